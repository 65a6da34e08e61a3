"""Where the Dependency-Transformer loses to the Tree-LSTM on SST-2 and SST-5: test accuracy by
sentence length and by negation, from each run's per-example test outputs.

    python -m reports.sst_breakdown collect RUN_DIR [RUN_DIR ...]

runs `python -m jaxenc predict` on each finished SST-2 or SST-5 run directory (its best-dev
checkpoint, its own evaluation step; the shared data and the run's checkpoints are needed) and
writes results/encoders/sst2_breakdown/<run>.jsonl (SST-5: sst5_breakdown/): per test sentence
(in the split's order) its token count, whether it holds a negation word (NEGATIONS) and
whether the run classified it correctly; no sentence text. With `--trained_again` (a run
trained again because its table run kept no checkpoint) it also copies the run's results.md,
config.json and dev / test metric records into <that folder>/trained_again/<run>/. The tables
of results/encoders/README.md are rebuilt from those files alone by `python -m reports
sst2_by_length sst2_by_negation sst2_by_seed sst2_layers sst5_breakdown sst5_breakdown_by_seed
sst5_retrained`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reports.encoder_runs import copy_run_files
from reports.sst import SST2_BREAKDOWN, SST5_BREAKDOWN

# dataset of a run's config -> the folder of its per-sentence files
OUT = {"sst2_phrases": SST2_BREAKDOWN, "sst5_phrases": SST5_BREAKDOWN}
NEGATIONS = frozenset({"not", "n't", "no", "never", "nothing", "none", "nobody", "neither", "nor",
                       "nowhere", "cannot", "without"})


def sentence_facts(tokens: tuple[str, ...]) -> dict[str, int | bool]:
    """{"tokens": the token count, "negation": whether a token is in NEGATIONS}."""
    return {"tokens": len(tokens), "negation": any(t.lower() in NEGATIONS for t in tokens)}


def collect(run_dirs: list[Path], trained_again: bool = False) -> None:
    """Writes OUT/<run>.jsonl for each run directory (module docstring)."""
    from jaxenc.training import input_pipeline, predict, run_files

    for run_dir in run_dirs:
        config = run_files.load_config(run_dir)
        if config.task.dataset not in OUT:
            raise SystemExit(f"{run_dir}: a {config.task.dataset} run, not SST-2 or SST-5 (fix: "
                             f"pass the directory of a run of {' or '.join(OUT)})")
        examples = input_pipeline.load_splits(config)["test"]
        outputs = predict.predict(run_dir, "test")
        rows = [{**sentence_facts(example.sentences[0].tokens),
                 "correct": bool(prediction == label)}
                for example, prediction, label in zip(examples, outputs["prediction"],
                                                      outputs["label"], strict=True)]
        OUT[config.task.dataset].mkdir(exist_ok=True)
        path = OUT[config.task.dataset] / f"{run_dir.name}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        accuracy = sum(row["correct"] for row in rows) / len(rows)
        print(f"{run_dir.name}: {len(rows)} test sentences, accuracy {accuracy:.4f} -> {path}")
        if trained_again:
            copy_run_files(run_dir, OUT[config.task.dataset] / "trained_again" / run_dir.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("collect", help="per-sentence facts of finished SST-2 or SST-5 runs")
    make.add_argument("run_dirs", nargs="+", type=Path, help="training run directories")
    make.add_argument("--trained_again", action="store_true",
                      help="also copy each run's results.md, config.json and dev / test metrics "
                           "(runs trained again for lack of their table run's checkpoints)")
    args = parser.parse_args()
    collect(args.run_dirs, args.trained_again)


if __name__ == "__main__":
    main()
