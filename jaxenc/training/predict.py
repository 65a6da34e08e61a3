"""Per-example outputs of a finished run's best checkpoint on one of its splits.

    python -m jaxenc predict WORKDIR [--split test] --out predictions.jsonl

`predict(workdir, split)` rebuilds the run from its config.json and vocabularies (the data is
read again from the run's data source, as a resumed run reads it), restores the best-dev
parameters and evaluates `split` with the run's own evaluation step, returning each output of
the task's evaluation (a classifier's "prediction", "label" and "loss"; a relatedness head's
"prediction" and "score") per example, in the split's example order. The metrics the run
printed are these outputs summarised, so `task.summarize(predict(...))` equals the run's
results row for that split.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from jaxenc import cli
from jaxenc.errors import ConfigError
from jaxenc.training import checkpointing, input_pipeline, loop, preparation, run_files
from jaxenc.training.sharding import make_mesh, replicated


def predict(workdir: str | os.PathLike, split: str = "test") -> dict[str, np.ndarray]:
    """{output name: [N] array} of the best checkpoint on `split`, row i the split's example i;
    ConfigError when the run has no such split or its task's outputs are not one value per
    example (a sequence task's tokens)."""
    workdir = Path(workdir)
    config = run_files.load_config(workdir)
    splits = input_pipeline.load_splits(config)
    if split not in splits:
        raise ConfigError(f"--split {split}: the run in {workdir} has splits "
                          f"{', '.join(sorted(splits))} (fix: --split test)")
    setup = preparation.prepare(config, workdir, make_mesh(), splits)
    checkpoints = checkpointing.Checkpoints(workdir, keep=config.checkpoint.keep,
                                            best_k=config.checkpoint.best_k, repair=False)
    try:
        params = jax.device_put(checkpoints.restore_best_params(setup.state.params),
                                replicated(setup.mesh))
    finally:
        checkpoints.close()
    with_index = lambda params, batch: {**setup.eval_step(params, batch), "index": batch["index"]}
    collected = loop.collect(with_index, params, setup.batchers[split], setup.mesh)
    for name, value in collected.items():
        if value.ndim != 1:
            raise ConfigError(f"{workdir}: the {config.task.name} task's output {name!r} is not "
                              "one value per example (fix: predict a classification or "
                              "relatedness run)")
    order = np.argsort(collected.pop("index"))
    return {name: value[order] for name, value in collected.items()}


def write_jsonl(outputs: dict[str, np.ndarray], path: str | os.PathLike) -> None:
    """One JSON object per example: {"index": i, output name: value, ...}."""
    names = list(outputs)
    with open(path, "w", encoding="utf-8") as file:
        for i in range(len(outputs[names[0]])):
            row = {"index": i, **{name: outputs[name][i].item() for name in names}}
            file.write(json.dumps(row) + "\n")


def main(argv: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """`python -m jaxenc predict`: see --help."""
    parser = argparse.ArgumentParser(
        prog="python -m jaxenc predict",
        description="Evaluate the best checkpoint of a finished training run on one of its "
        "splits and write one JSON line per example (its index in the split, then the task's "
        "per-example outputs: prediction, label or gold score, loss), in the split's order.",
        epilog="Example: python -m jaxenc predict runs/dt_sst2_s0 --split test --out dt.jsonl")
    parser.add_argument("workdir", help="the --workdir of a finished python -m train.main run")
    parser.add_argument("--split", default="test", help="dev or test (default test)")
    parser.add_argument("--out", required=True, help="the JSON-lines file to write")
    return _main(parser.parse_args(argv))


@cli.reports_errors
def _main(args: argparse.Namespace) -> dict[str, np.ndarray]:
    outputs = predict(args.workdir, args.split)
    write_jsonl(outputs, args.out)
    print(f"{len(next(iter(outputs.values())))} {args.split} examples -> {args.out}")
    return outputs
