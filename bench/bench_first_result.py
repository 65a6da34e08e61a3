"""Time to first result: a short run of every encoder on its real dataset, from a fresh process
to its results row, split into start-up, data, trace, lower, compile and run.

Each run is the training job (`jaxenc.training.loop.train_and_evaluate`) of `base.py:MODEL,DATASET`
with `--steps` steps (default 6) and a dev evaluation every `--eval_every` steps (default 3: two
evaluations), then the test evaluation and the results row (encode rate, peak memory), in a new
Python process and a new workdir. Every encoder runs twice against one persistent compilation
cache folder, new at the start: "cold" (the cache is empty) and "warm" (a second identical run in
another workdir: what a rerun, a resume or a second seed costs).

Columns (seconds): total = the child process's wall time; start = interpreter and imports; data =
reading, parsing and featurizing the splits (JAX work during set-up excluded); trace, lower,
compile = JAX's own timings of tracing to jaxprs, lowering to StableHLO and XLA compiling (a
cache hit counts its read), summed over every program of the run; run = the rest (training steps,
evaluations, checkpoints, decoding). compiles = XLA compilations the cache did not serve; hits =
those it did. load = the 1-minute load average when the row's run ended (the machine is shared).

`--update` re-measures only `--models` and replaces their rows in the report already in `--out`
(results.json and report.md), keeping the other encoders' rows as they were measured; it
refuses other `--steps` / `--eval_every` than the report's.

    python -m bench.bench_first_result --data_dir $JAXENC_DATA_DIR
    python -m bench.bench_first_result --models psan,disan --steps 6 --out results/bench/first
    python -m bench.bench_first_result --models meanmax_aae --update \
        --out results/bench/first_result
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Each encoder on the dataset of its own results (base.py:MODEL,DATASET).
DATASETS = {
    "bag": "trec", "transformer": "trec", "disan": "trec", "psan": "sst5_trees",
    "tree_lstm": "sick_r", "dependency_transformer": "sick_r", "phrase_transformer": "ud_ewt",
    "meanmax_aae": "corpus",
}
CORPUS_LINES = 3000  # Mean-Max AAE: the first lines of Multi30k's English training side
COLUMNS = ("total", "start", "data", "trace", "lower", "compile", "run")
# report.md's first line before results.json kept the settings: its steps, dev period and load
OLD_HEADER = re.compile(r"Time to first result: (\d+) steps, dev every (\d+), .*load average "
                        r"([\d.]+) at the end")


def child(model: str, workdir: str, cache: str, steps: int, eval_every: int, data_dir: str,
          corpus_file: str) -> dict:
    """One run in this process; its time split (seconds) and compile counts."""
    from jaxenc.training import compilation, input_pipeline, loop, preparation
    from train.configs import base

    started = time.perf_counter()
    config = base.get_config(f"{model},{DATASETS[model]}")
    config.data.data_dir = data_dir
    if model == "meanmax_aae":  # its vocabulary is the corpus words that have a vector
        config.data.update(dict(corpus_files=corpus_file, embeddings="glove-6b-50d"))
        config.model.embed_dim = 50
    config.train.update(dict(num_steps=steps, eval_every=eval_every, progress_bar=False,
                             compilation_cache=cache))
    data_s, prepare = 0.0, preparation.prepare

    def timed_prepare(*args, **kwargs):
        nonlocal data_s
        start = time.perf_counter()
        with compilation.CompileRecorder() as inside:
            setup = prepare(*args, **kwargs)
        jax_s = inside.stats.trace_s + inside.stats.lower_s + inside.stats.compile_s
        data_s += time.perf_counter() - start - jax_s
        return setup

    preparation.prepare = timed_prepare
    with compilation.CompileRecorder() as recorder:
        start = time.perf_counter()
        splits = input_pipeline.load_splits(config)
        data_s += time.perf_counter() - start
        row = loop.train_and_evaluate(config, workdir, splits=splits)
    stats = recorder.stats
    total = time.perf_counter() - started
    return {"data": data_s, "trace": stats.trace_s, "lower": stats.lower_s,
            "compile": stats.compile_s, "in_process": total,
            "compiles": stats.compiled, "hits": stats.cache_hits,
            "train shapes": row["compiled shapes"]}


def _corpus(data_dir: str, out: Path) -> str:
    source = Path(data_dir) / "multi30k" / "train.lc.norm.tok.en"
    with source.open(encoding="utf-8") as lines:
        out.write_text("".join(line for _, line in zip(range(CORPUS_LINES), lines,
                                                       strict=False)), encoding="utf-8")
    return str(out)


def run_twice(model: str, args: argparse.Namespace, scratch: Path, corpus_file: str
              ) -> list[dict]:
    """The cold and the warm run of `model`, each in a new process."""
    cache = scratch / f"{model}-xla"
    rows = []
    for turn in ("cold", "warm"):
        command = [sys.executable, "-m", "bench.bench_first_result", "--child", model,
                   "--workdir", str(scratch / f"{model}-{turn}"), "--cache", str(cache),
                   "--steps", str(args.steps), "--eval_every", str(args.eval_every),
                   "--data_dir", args.data_dir, "--corpus_file", corpus_file]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"{model} ({turn}) failed:\n{done.stderr[-3000:]}")
        split = json.loads(done.stdout.strip().splitlines()[-1])
        jax_s = split["trace"] + split["lower"] + split["compile"]
        rows.append({"model": model, "dataset": DATASETS[model], "cache": turn, "total": wall,
                     "start": wall - split["in_process"], "data": split["data"],
                     "trace": split["trace"], "lower": split["lower"],
                     "compile": split["compile"],
                     "run": split["in_process"] - split["data"] - jax_s,
                     "compiles": split["compiles"], "hits": split["hits"],
                     "train shapes": split["train shapes"], "load": os.getloadavg()[0]})
        print(_table(rows[-1:], header=not rows[:-1] and model == args.models[0]), flush=True)
    return rows


def _table(rows: list[dict], header: bool = True) -> str:
    names = ("model", "dataset", "cache", *COLUMNS, "compiles", "hits", "train shapes", "load")
    lines = [f"| {' | '.join(names)} |", f"|{'---|' * len(names)}"] if header else []
    for row in rows:
        cells = [f"{row[name]:.1f}" if name in COLUMNS else str(row[name]) for name in names[:-1]]
        cells.append(f"{row['load']:.1f}" + ("*" if row.get("load_at_end_of_all") else ""))
        lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines)


def _previous(out: Path) -> tuple[list[dict], dict]:
    """(rows, settings) of the report in `out`. A results.json that is a list of rows predates
    the settings and loads in it: they are read from report.md's first line, each row getting
    the load at the end of its whole run (`load_at_end_of_all`)."""
    saved = json.loads((out / "results.json").read_text())
    if isinstance(saved, dict):
        return saved["rows"], saved["settings"]
    match = OLD_HEADER.match((out / "report.md").read_text())
    if match is None:
        sys.exit(f"error: {out / 'report.md'} does not start with the line this script writes")
    rows = [{**row, "load": float(match[3]), "load_at_end_of_all": True} for row in saved]
    return rows, {"steps": int(match[1]), "eval_every": int(match[2])}


def _merged(previous: list[dict], measured: list[dict]) -> list[dict]:
    """`previous` with the rows of every model in `measured` replaced by its new ones, in place
    (a model new to the report is added at the end)."""
    models = list(dict.fromkeys(row["model"] for row in measured))
    merged, placed = [], set()
    for row in previous:
        if row["model"] not in models:
            merged.append(row)
        elif row["model"] not in placed:
            merged += [new for new in measured if new["model"] == row["model"]]
            placed.add(row["model"])
    return merged + [row for row in measured if row["model"] not in placed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(DATASETS),
                        help=f"comma-separated, from {', '.join(DATASETS)} (default: all)")
    parser.add_argument("--steps", type=int, default=6, help="training steps per run")
    parser.add_argument("--eval_every", type=int, default=3, help="dev evaluation period")
    parser.add_argument("--data_dir", default=os.environ.get("JAXENC_DATA_DIR", ""),
                        help="the data root, docs/data.md (default: $JAXENC_DATA_DIR)")
    parser.add_argument("--out", default="", help="folder for results.json and report.md")
    parser.add_argument("--update", action="store_true",
                        help="replace only the rows of --models in the report in --out")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", default="", help=argparse.SUPPRESS)
    parser.add_argument("--cache", default="", help=argparse.SUPPRESS)
    parser.add_argument("--corpus_file", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.workdir, args.cache, args.steps, args.eval_every,
                               args.data_dir, args.corpus_file)))
        return
    if not args.data_dir:
        sys.exit("error: the real datasets are needed (fix: --data_dir or $JAXENC_DATA_DIR)")
    args.models = args.models.split(",")
    unknown = sorted(set(args.models) - set(DATASETS))
    if unknown:
        sys.exit(f"error: --models {','.join(unknown)}: not one of {', '.join(DATASETS)}")
    previous = []
    if args.update:
        if not args.out:
            sys.exit("error: --update replaces rows of the report in --out (fix: --out FOLDER)")
        previous, settings = _previous(Path(args.out))
        if settings != {"steps": args.steps, "eval_every": args.eval_every}:
            sys.exit(f"error: the report in {args.out} has {settings['steps']} steps, dev every "
                     f"{settings['eval_every']} (fix: --steps {settings['steps']} --eval_every "
                     f"{settings['eval_every']})")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        corpus_file = _corpus(args.data_dir, Path(scratch) / "corpus.txt")
        for model in args.models:
            rows += run_twice(model, args, Path(scratch), corpus_file)
            # after every model: a later failure keeps the rows
            report = _write(_merged(previous, rows), args)
    print("\n" + report)


def _write(rows: list[dict], args: argparse.Namespace) -> str:
    """The report of `rows` (markdown), also written to --out when given."""
    marked = any(row.get("load_at_end_of_all") for row in rows)
    report = (f"Time to first result: {args.steps} steps, dev every {args.eval_every}, then test "
              f"(seconds; {os.cpu_count()} CPU cores; load: the 1-minute load average when the "
              "row's run ended" + ("; *: when the run of every encoder ended" if marked else "")
              + f")\n\n{_table(rows)}\n")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        settings = {"steps": args.steps, "eval_every": args.eval_every}
        (out / "results.json").write_text(json.dumps({"settings": settings, "rows": rows},
                                                     indent=1) + "\n")
        (out / "report.md").write_text(report)
    return report


if __name__ == "__main__":
    main()
