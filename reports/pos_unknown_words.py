"""POS tagging accuracy on the words the training text lacks, from each run's best checkpoint.

    python -m reports.pos_unknown_words collect NAME=RUN_DIR [NAME=RUN_DIR ...]

runs `jaxenc.training.predict` on the dev and test splits of each finished POS run directory
(the PhraseTransformer's, and its Transformer twin's in RUN_DIR/baselines/transformer when
there is one; the shared data and the checkpoints are needed) and writes
results/phrase_transformer/unknown_words/NAME.json: per model and split the tagging task's
per-example sums added up (tagged tokens, correct ones, and the same over the tokens read as the
unknown id). The table `pt_pos_recipe` of results/phrase_transformer/README.md is rebuilt from
those files and the run files by `python -m reports pt_pos_recipe`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reports.phrase_transformer import PT_UNKNOWN

OUT = PT_UNKNOWN
SUMS = ("count", "correct", "unknown_count", "unknown_correct")


def split_sums(run_dir: Path, split: str) -> dict[str, int]:
    """{sum name: total over the split} of the run's best checkpoint (SUMS)."""
    from jaxenc.training import predict

    outputs = predict.predict(run_dir, split)
    return {name: int(round(float(outputs[name].sum()))) for name in SUMS}


def collect(named_runs: dict[str, Path]) -> None:
    """Writes OUT/NAME.json for each run directory (module docstring)."""
    from jaxenc.training import run_files

    OUT.mkdir(exist_ok=True)
    for name, run_dir in named_runs.items():
        models = {run_files.load_config(run_dir).model.name: run_dir}
        twin = run_dir / "baselines" / "transformer"
        if (twin / "config.json").is_file():
            models["transformer"] = twin
        sums = {model: {split: split_sums(folder, split) for split in ("dev", "test")}
                for model, folder in models.items()}
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(sums, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        for model, splits in sums.items():
            test = splits["test"]
            print(f"{name} {model}: test accuracy {test['correct'] / test['count']:.4f}, "
                  f"unknown words {test['unknown_correct']}/{test['unknown_count']} -> {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("collect", help="sums of finished POS runs")
    make.add_argument("runs", nargs="+", metavar="NAME=RUN_DIR",
                      help="the run file name (as in runs/, without .md) and its directory")
    args = parser.parse_args()
    named = {}
    for entry in args.runs:
        name, _, folder = entry.partition("=")
        if not folder:
            parser.error(f"{entry}: expected NAME=RUN_DIR, e.g. pos_k2_s0=../runs/pos_k2_s0")
        named[name] = Path(folder)
    collect(named)


if __name__ == "__main__":
    main()
