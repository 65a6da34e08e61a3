"""PSAN's phrase attention side by side, two measurements (`--mode`).

table5 (the default): Table 5's comparison on TREC: peak train-step memory (compiled memory
analysis) and step time of PSAN (packed, dense and streaming phrase attention), DiSAN (dense and
blocked) and the multi-head Transformer, 300-d sentence vectors each, on the SAME real TREC batch
and bucket, measured side by side in one run; plus the data's own bound sum_t sum_p l_p^2 /
(2 L^2). TREC questions get phrase trees from the `spacy-constituency` parser (cached in
--cache_dir). The batch is the training batch of the chosen bucket with the most tokens (batch
64, TREC's longest questions pad to 40): the paper's numbers (PSAN 1192 MB, DiSAN 2943 MB,
multi-head 1508 MB) are GPU process peaks of whole training runs, so only the ratios compare.
A markdown report at the end, each peak also as a ratio to DiSAN dense's and the Transformer's
(--out writes it too).

compile: for each bucket length L of --lengths, PSAN's train step (forward and backward, as
bench/run.py times it) compiled for every phrase-attention form of --variants on a batch of
--batch full-length synthetic sentences with random trees (the real featurizer and batcher, so
the packed form gets the planned packing plan of that batch): seconds to lower and compile
(median of --rounds, the forms compiled in turns so that load drifts on a shared machine hit
all alike, caches cleared before each), and the compiled peak memory (XLA memory analysis:
arguments + outputs + temp - aliased), each with its ratio to the dense form's; with --steps,
also the median train-step time (forms timed in turns). A markdown table at the end (--out
writes it too).

    python -m bench.bench_psan --bucket 24 --batch 32 --out results/psan/table5_memory_24.md
    python -m bench.bench_psan --mode compile --lengths 16,64,128 --batch 64
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import statistics
from pathlib import Path

import jax
import numpy as np

from bench.common import (
    compile_timed,
    memory_mib,
    parse_ints,
    phrase_data_bound,
    synthetic_batches,
    time_in_turns,
    train_function,
    train_step,
)
from jaxenc import cli
from jaxenc.configs import model_config
from jaxenc.data import registry
from jaxenc.data.batching import Batcher, sentence_fields
from jaxenc.data.featurize import Featurizer
from jaxenc.data.paths import data_dir
from jaxenc.data.vocab import Vocabulary
from jaxenc.models.registry import build_encoder, structure_spec
from train.configs import base

MODELS = {  # label -> (model, overrides): 300-d sentence vectors each (Table 5)
    "PSAN packed": ("psan", dict(psa_impl="packed", packed_chunk=0)),
    "PSAN packed, chunk 16": ("psan", dict(psa_impl="packed", packed_chunk=16)),
    "PSAN packed, chunk 1": ("psan", dict(psa_impl="packed", packed_chunk=1)),
    "PSAN dense": ("psan", dict(psa_impl="dense")),
    "PSAN streaming": ("psan", dict(psa_impl="streaming")),
    "DiSAN dense": ("disan", dict(hidden=150, attention_impl="dense")),
    "DiSAN blocked": ("disan", dict(hidden=150, attention_impl="blocked")),
    "Transformer": ("transformer", {}),
}
COMPILE_VARIANTS = {  # --variants name -> PSAN overrides of the compile mode
    "dense": dict(psa_impl="dense"),
    "packed": dict(psa_impl="packed", packed_chunk=0),
    "packed-chunk1": dict(psa_impl="packed", packed_chunk=1),
    "streaming": dict(psa_impl="streaming"),
}


def trec_batch(model_cfg, examples, vocab, args) -> dict[str, np.ndarray]:
    """The sentence fields of the fullest training batch of bucket `args.bucket`."""
    needs = structure_spec(model_cfg)
    featurizer = Featurizer(kind="single", vocab=vocab, model_cfg=model_cfg,
                            structure_fields=needs.fields, prefix=needs.prefix_tokens,
                            parse_cache_dir=args.cache_dir)
    features = [f for f in featurizer.many(examples)
                if args.bucket - 8 < len(f["sentence/tokens"]) <= args.bucket]
    packing = needs.packing and dataclasses.replace(needs.packing, epochs=1)
    batches = Batcher(features, batch_size=args.batch, buckets=(args.bucket,), shuffle=True,
                      seed=0, packing=packing).epoch(0)
    return sentence_fields(max(batches, key=lambda b: b["sentence/lengths"].sum()), "sentence")


def table5(args: argparse.Namespace) -> str:
    """Table 5's TREC comparison (module docstring) as a markdown report."""
    examples = registry.load("trec", "train", data_dir=str(data_dir(args.data_dir)))
    vocab = Vocabulary.build(e.sentences[0].tokens for e in examples)
    steps, batches = {}, {}
    for label, (name, overrides) in MODELS.items():
        model_cfg = base.get_config(f"{name},trec").model
        model_cfg.update(overrides)
        batches[label] = batch = trec_batch(model_cfg, examples, vocab, args)
        encoder = build_encoder(model_cfg, len(vocab))
        params = jax.jit(lambda key, e=encoder, b=batch: e.init(key, b, train=False))(
            jax.random.key(0))
        steps[label] = train_step(encoder, params, batch)
    timings = time_in_turns(steps, args.repeats)
    rows = [dict(label=label, temp_mib=memory_mib(compiled)[0], peak_mib=memory_mib(compiled)[1],
                 step_s=timings[label].wall) for label, (compiled, _) in steps.items()]
    psan_batch = batches["PSAN dense"]
    bound = phrase_data_bound(psan_batch["segments"], psan_batch["lengths"], args.bucket)
    return table5_report(rows, bound, args)


def table5_report(rows: list[dict], bound: float, args: argparse.Namespace) -> str:
    """Markdown of `table5`'s rows (label, temp_mib, peak_mib, step_s), each peak also as a
    ratio to DiSAN dense's and to the Transformer's."""
    peaks = {row["label"]: row["peak_mib"] for row in rows}
    lines = ["| model | temp MiB | peak MiB | / DiSAN dense | / Transformer | step ms |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['label']} | {row['temp_mib']:,.1f} | {row['peak_mib']:,.1f} | "
                     f"{row['peak_mib'] / peaks['DiSAN dense']:.2f}x | "
                     f"{row['peak_mib'] / peaks['Transformer']:.2f}x | "
                     f"{1e3 * row['step_s']:,.1f} |")
    return "\n".join([
        f"# PSAN's Table 5 memory at equal size: TREC, bucket {args.bucket}, batch {args.batch}",
        "",
        f"Made by `python -m bench.bench_psan --bucket {args.bucket} --batch {args.batch} "
        f"--repeats {args.repeats}` on {jax.default_backend()} ({jax.device_count()} "
        "device(s)): the train step (forward and backward) of each model on the same real TREC "
        "batch (the bucket's training batch with the most tokens, spaCy-derived phrase trees), "
        "300-d sentence vectors each (PSAN d 300; DiSAN d_h 150 in each of 2 directions; the "
        "Transformer d 300, 6 heads), each model's paper dropout, random 300-d embeddings. Peak: "
        "XLA's compiled memory analysis, arguments + outputs + temp - aliased. PSAN packed is "
        "`packed_chunk=0`, the accelerator setting; chunk k attends k phrases of a length "
        "class per step of a loop the backward pass recomputes. The paper's numbers (PSAN "
        "1192 MB, DiSAN 2943 MB, multi-head 1508 MB, paper) are GPU process peaks of whole "
        "runs: only ratios compare. Data bound of phrase attention (sum_p l_p^2 / 2 L^2): "
        f"{bound:.3f}. Step ms: median of {args.repeats} timed calls, the models taking turns "
        f"(1-minute load average at the end: {os.getloadavg()[0]:.1f}; only the ratios of one "
        "run compare).",
        "",
        *lines,
        "",
    ])


def compile_length(length: int, args: argparse.Namespace) -> list[dict]:
    """One row per form of --variants at bucket length `length` (module docstring)."""
    prepared, data = {}, {}
    for name in args.variants:
        model_cfg = model_config("psan", **COMPILE_VARIANTS[name])
        packed = model_cfg.psa_impl == "packed"
        if packed not in data:
            data[packed] = synthetic_batches(model_cfg, length, args.batch, 1, seed=args.seed)
        (batch,), vocab_size = data[packed]
        encoder = build_encoder(model_cfg, vocab_size)
        init = functools.partial(encoder.init, train=False)
        prepared[name] = (encoder, init, jax.eval_shape(init, jax.random.key(0), batch), batch)
    seconds, compiled = {name: [] for name in args.variants}, {}
    for _ in range(args.rounds):
        for name, (encoder, _, abstract, batch) in prepared.items():
            jax.clear_caches()
            compiled[name], spent = compile_timed(train_function(encoder), abstract, batch,
                                                  jax.random.key(1))
            seconds[name].append(spent)
    timings = {}
    if args.steps:
        steps = {}
        for name, (_, init, _, batch) in prepared.items():
            arguments = (jax.jit(init)(jax.random.key(0), batch), batch, jax.random.key(1))
            steps[name] = (compiled[name], arguments)
        timings = time_in_turns(steps, args.steps)
    rows = []
    for name, (_, _, _, batch) in prepared.items():
        temp, peak = memory_mib(compiled[name])
        rows.append(dict(length=length, variant=name, compile_s=statistics.median(seconds[name]),
                         temp_mib=temp, peak_mib=peak,
                         step_s=timings[name].wall if name in timings else None,
                         plan_arrays=sum(key.startswith("pack_t") for key in batch)))
    return rows


def compile_table(rows: list[dict], args: argparse.Namespace) -> str:
    """The markdown report of `compile_length`'s rows, ratios to the dense form per length."""
    dense = {row["length"]: row for row in rows if row["variant"] == "dense"}

    def ratio(row: dict, key: str) -> str:
        reference = dense.get(row["length"])
        if reference is None or row[key] is None:
            return "-"
        return f"{row[key] / reference[key]:.2f}x"

    timed = args.steps > 0
    columns = ["L", "form", "compile s", "/ dense", "peak MiB", "/ dense", "temp MiB",
               *(["step ms", "/ dense"] if timed else []), "plan arrays"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [str(row["length"]), row["variant"], f"{row['compile_s']:.1f}",
                 ratio(row, "compile_s"), f"{row['peak_mib']:,.0f}", ratio(row, "peak_mib"),
                 f"{row['temp_mib']:,.0f}"]
        if timed:
            cells += [f"{1e3 * row['step_s']:,.0f}", ratio(row, "step_s")]
        cells.append(str(row["plan_arrays"]) if row["plan_arrays"] else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([
        "# PSAN train-step compile time and memory by phrase-attention form",
        "",
        f"Made by `python -m bench.bench_psan --mode compile --lengths "
        f"{','.join(map(str, args.lengths))} --batch {args.batch} --rounds {args.rounds}"
        f"{f' --steps {args.steps}' if timed else ''}` on {jax.default_backend()} "
        f"({jax.device_count()} device(s)). Compile: seconds to lower and compile the train step "
        f"(forward and backward), median of {args.rounds} compiled in turns; peak: compiled "
        "memory analysis, arguments + outputs + temp - aliased. packed: the accelerator "
        "setting (packed_chunk 0, packed_tile 4); packed-chunk1: the CPU loop setting. Plan "
        "arrays: the packing plan's class arrays over the levels.",
        "",
        *lines,
        "",
    ])


@cli.reports_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("table5", "compile"), default="table5",
                        help="table5: the TREC comparison; compile: compile time and memory "
                             "by phrase-attention form over --lengths")
    parser.add_argument("--bucket", type=int, default=24, help="table5: bucket length (tokens)")
    parser.add_argument("--batch", type=int, default=64, help="sentences per batch")
    parser.add_argument("--repeats", type=int, default=3, help="table5: timed repeats per model")
    parser.add_argument("--data_dir", default=None,
                        help="table5: the data root, docs/data.md ($JAXENC_DATA_DIR)")
    parser.add_argument("--cache_dir", default="/tmp/jaxenc_parse_cache",
                        help="table5: spaCy parse cache")
    parser.add_argument("--lengths", type=parse_ints, default=[16, 64, 128],
                        help="compile: bucket lengths, e.g. 16,64,128")
    parser.add_argument("--variants", nargs="+", choices=tuple(COMPILE_VARIANTS),
                        default=list(COMPILE_VARIANTS),
                        help="compile: phrase-attention forms (ratios need dense)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="compile: compilations per form, taken in turns (median)")
    parser.add_argument("--steps", type=int, default=0,
                        help="compile: timed train steps per form (0: no timing; runs the "
                             "dense step, several GiB at L 128)")
    parser.add_argument("--seed", type=int, default=0, help="compile: synthetic data seed")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the markdown report here")
    args = parser.parse_args(argv)
    if args.mode == "table5":
        text = table5(args)
    else:
        text = compile_table([row for length in args.lengths
                              for row in compile_length(length, args)], args)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
