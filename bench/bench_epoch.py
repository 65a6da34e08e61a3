"""Seconds per training epoch and per test pass on a real dataset, every model measured side by
side in one run: the Dependency-Transformer paper's Table 2 (one SICK-E epoch: DT 57 s training,
< 1 s testing; Tree-LSTM 282 s / 8 s, PyTorch on a Quadro RTX 5000).

Each model is built exactly as training builds it (`jaxenc.training.preparation.prepare`: the paper
config, spaCy parses, buckets, the task head and optimiser) from `--models` (label=config spec,
as `python -m train.main --config` takes it); all use the same `--batch` and random word vectors
of the config's width (the word-vector file changes nothing that is timed). The epoch's batches
are featurised and put on the device first, so an epoch times the jitted train steps only. A
warm-up epoch compiles every bucket shape; then the models take turns, `--repeats` epochs each,
and the median is reported, with the test pass (the jitted evaluation step over every test
batch) measured the same way. Turns are not settled (`bench.common.time_in_turns`): an epoch
repeats its own steps, so only its first inherits the other model's state.

    python -m bench.bench_epoch --dataset sick_e --repeats 2 \
        --out results/dependency_transformer/epoch_sick_e.md
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import os
import tempfile
from pathlib import Path

import jax

from bench.common import time_in_turns
from jaxenc import cli
from jaxenc.errors import ConfigError
from jaxenc.training import input_pipeline, preparation
from jaxenc.training.measure import roles
from jaxenc.training.sharding import make_mesh, shard_batch
from jaxenc.training.steps import make_train_step
from train.configs import base

DEFAULT_MODELS = ("DT_full=dependency_transformer_{dataset}",
                  "Transformer=dependency_transformer_{dataset}:model.variant=transformer",
                  "Tree-LSTM=tree_lstm_{dataset}")
IN_FLIGHT = 2  # steps dispatched ahead: the device never idles, the queue stays short (XLA's
# CPU collectives of fake devices can stall when hundreds of steps are queued on a loaded host)
PAPER_SECONDS = {("sick_e", "DT_full"): (57, "< 1"), ("sick_e", "Tree-LSTM"): (282, 8)}


def literal(text: str) -> object:
    """A Python literal ("3", "True", "(50,)") or, failing that, the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def load_config(spec: str, dataset: str, batch: int):
    """`label=config[:key=value;...]` -> (label, config): a module of train/configs (with
    `{dataset}` filled in) or `base.py`'s `model,dataset`, then dotted overrides."""
    label, _, rest = spec.partition("=")
    name, _, overrides = rest.format(dataset=dataset).partition(":")
    if "," in name:
        config = base.get_config(name)
    else:
        try:
            config = importlib.import_module(f"train.configs.{name}").get_config()
        except ModuleNotFoundError as error:
            raise ConfigError(f"--models {spec!r}: no config module train/configs/{name}.py "
                              "(fix: name a file of train/configs or base.py's model,dataset)"
                              ) from error
    for item in filter(None, overrides.split(";")):
        key, _, value = item.partition("=")
        try:
            *path, leaf = key.split(".")
            parent = functools.reduce(lambda node, part: node[part], path, config)
            if leaf not in parent:
                raise KeyError(f"no field {leaf!r}")
            config.update_from_flattened_dict({key: literal(value)})
        except (KeyError, TypeError) as error:
            raise ConfigError(f"--models {spec!r}: cannot set {key}={value} ({error}) (fix: a "
                              "dotted field of the config, e.g. model.num_layers=1)") from error
    config.data.embeddings = ""
    config.data.batch_size = config.data.eval_batch_size = batch
    return label, config


def build(label: str, config, workdir: Path, parse_cache: Path, mesh) -> dict:
    """The model's epoch and test pass as zero-argument callables, and its numbers."""
    workdir.mkdir(parents=True)
    (workdir / "parse_cache").symlink_to(parse_cache)
    setup = preparation.prepare(config, workdir, mesh, input_pipeline.load_splits(config))
    train_step = make_train_step(setup.model, setup.task, setup.tx, mesh)
    train_batches = [shard_batch(b, mesh) for b in setup.batchers["train"].epoch(0)]
    test_batches = [shard_batch(b, mesh) for b in setup.batchers["test"].epoch(0)]
    holder = {"state": setup.state}

    def epoch():
        state, in_flight = holder["state"], []
        for batch in train_batches:
            state, stats = train_step(state, batch)
            in_flight.append(stats)
            if len(in_flight) > IN_FLIGHT:  # as training's log points do: a bounded queue
                jax.block_until_ready(in_flight.pop(0))
        holder["state"] = state
        return state.params

    def test():
        return [setup.eval_step(holder["state"].params, batch) for batch in test_batches]

    _, outside = preparation.count_params(setup.state.params)
    test_sentences = sum(int((batch["weight"] > 0).sum()) * len(roles(batch))
                         for batch in setup.batchers["test"].epoch(0))
    return dict(label=label, epoch=epoch, test=test, steps=len(train_batches),
                test_sentences=test_sentences,
                params=outside, optimizer=config.optim.name, train_step=train_step)


def markdown(rows: list[dict], args) -> str:
    reference = rows[0]["epoch_s"]
    lines = [f"One {args.dataset} epoch, batch {args.batch}, {jax.device_count()} "
             f"{jax.devices()[0].platform} device(s) ({os.cpu_count()} cores, load average "
             f"{args.load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end); median of "
             f"{args.repeats} epochs per model, the models taking turns "
             "(python -m bench.bench_epoch).", "",
             f"| model | parameters (no embeddings) | optimiser | steps/epoch | train s/epoch | "
             f"x {rows[0]['label']} | test pass s | test sentences/s | train-step shapes | "
             "recompiles after warm-up | paper train / test s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        paper = PAPER_SECONDS.get((args.dataset, row["label"]))
        paper = f"{paper[0]} / {paper[1]}" if paper else "—"
        lines.append(
            f"| {row['label']} | {row['params']:,} | {row['optimizer']} | {row['steps']} | "
            f"{row['epoch_s']:.1f} | {row['epoch_s'] / reference:.2f} | {row['test_s']:.2f} | "
            f"{row['test_sentences'] / row['test_s']:,.0f} | "
            f"{row['shapes']} | {row['recompiles']} | {paper} |")
    return "\n".join(lines) + "\n"


@cli.reports_errors
def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="sick_e", help="a registered dataset")
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS),
                        help="label=config[:key=value;...] each: a train/configs module or "
                             "base.py's model,dataset; {dataset} is filled in")
    parser.add_argument("--batch", type=int, default=32, help="examples per batch (paper: 32)")
    parser.add_argument("--repeats", type=int, default=2, help="timed epochs per model")
    parser.add_argument("--out", type=Path, help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    args.load = os.getloadavg()
    mesh, rows = make_mesh(), []
    with tempfile.TemporaryDirectory() as tmp:
        parse_cache = Path(tmp) / "parse_cache"
        parse_cache.mkdir()
        for index, spec in enumerate(args.models):
            label, config = load_config(spec, args.dataset, args.batch)
            rows.append(build(label, config, Path(tmp) / f"model{index}", parse_cache, mesh))
            print(f"{label}: {rows[-1]['steps']} steps per epoch, built", flush=True)
        timings = time_in_turns({**{f"{r['label']} epoch": (r["epoch"], ()) for r in rows},
                                 **{f"{r['label']} test": (r["test"], ()) for r in rows}},
                                args.repeats, settle=False)
        for row in rows:
            row["epoch_s"] = timings[f"{row['label']} epoch"].wall
            row["test_s"] = timings[f"{row['label']} test"].wall
            row["shapes"] = len(row["train_step"].executables)
            row["recompiles"] = sum(timings[f"{row['label']} {part}"].compiles
                                    for part in ("epoch", "test"))
    table = markdown(rows, args)
    print(table)
    if args.out:
        args.out.write_text(table)
        print(f"wrote {args.out}")
    return [{key: value for key, value in row.items() if not callable(value)} for row in rows]


if __name__ == "__main__":
    main()
