"""Trains a sentence encoder on a task (plus the config's baselines) and reports dev/test results.

Usage (installed: `jaxenc-train` instead of `python -m train.main`):
  python -m train.main --config=train/configs/default.py --workdir=workdir/default
  python -m train.main --config=train/configs/bag_trec.py --workdir=workdir/bag_trec \\
      --config.optim.learning_rate=0.1 --config.train.num_steps=500
  python -m train.main --config=train/configs/base.py:transformer,sick_e --workdir=DIR

Flags:
  --config=FILE[:ARG]   a config file from train/configs (its get_config(ARG)); base.py takes
                        "MODEL,DATASET". default.py is the main job: the embedded synthetic
                        dataset, no data folder needed.
  --config.SECTION.KEY=VALUE
                        overrides one value; sections model, task, data, optim, train,
                        checkpoint, baselines (every key is listed in train/configs/base.py).
  --workdir=DIR         the run directory: config.json, vocab.txt, checkpoints/, best/,
                        metrics.jsonl, results.md, curves.png. A run already there is resumed
                        from its newest intact checkpoint; the config may change only keys that
                        cannot change results (eval_every, log_every, checkpoint.*, a longer
                        num_steps, ...: jaxenc.training.checkpointing.RESUMABLE_KEYS), recorded
                        in config.json's history; any other change is refused.

Datasets other than "synthetic" are read from --config.data.data_dir or $JAXENC_DATA_DIR.
Errors in the config or the data, and a loss that becomes nan or inf (--config.train.nonfinite),
are reported in one line (exit status 2).
"""

from __future__ import annotations

import ast
import contextlib
import logging
import sys
from pathlib import Path

from absl import app, flags
from absl import logging as absl_logging
from ml_collections import config_flags

from jaxenc import cli
from jaxenc.errors import JaxencError

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "config file (train/configs/*.py), optionally FILE:ARG; override any value "
    "with --config.SECTION.KEY=VALUE (sections: model, task, data, optim, train, checkpoint, "
    "baselines; see train/configs/base.py)", lock_config=True)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "run directory for checkpoints, metrics.jsonl, results.md and curves.png; "
    "an existing run there is resumed")
flags.mark_flags_as_required(["config", "workdir"])


def _one_line(error: Exception) -> str:
    """The message of a flag / config-file error on one line: absl wraps the config file's own
    traceback into its message, whose last line is the cause."""
    text = str(error)
    with contextlib.suppress(ValueError, SyntaxError):  # a KeyError's message arrives quoted
        text = str(ast.literal_eval(text))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if isinstance(error, flags.Error):
        return lines[-1]
    return " ".join(lines)


# Raised while loading a config file or applying a --config.KEY=VALUE override.
_CONFIG_ERRORS = (flags.Error, AttributeError, KeyError, OSError, TypeError, ValueError,
                  JaxencError)


def _parse_flags(argv: list[str]) -> list[str]:
    try:
        return flags.FLAGS(argv)
    except _CONFIG_ERRORS as error:
        cli.fail(f"{_one_line(error)} (see --help)")


def _quiet_logging() -> None:
    """Library INFO chatter (JAX, orbax) off; jaxenc's own progress lines as plain text."""
    absl_logging.set_verbosity(absl_logging.WARNING)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    ours = logging.getLogger("jaxenc")
    ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    ours.propagate = False


@cli.reports_errors
def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    config = _CONFIG.value
    try:
        config.get("model")  # a config file that failed to load raises on first use
    except _CONFIG_ERRORS as error:
        cli.fail(f"{_one_line(error)} (see --help)")
    _quiet_logging()
    import jax  # after flag parsing: --help stays fast

    from jaxenc.training.loop import run

    rows = run(config, _WORKDIR.value)
    if jax.process_index() != 0:  # a multi-host run: process 0 writes and prints the results
        return
    workdir = Path(rows[0]["workdir"])
    if config.get("showcase") and config.showcase.export_best:
        from jaxenc.training.showcase import showcase

        showcase(rows, workdir, config.showcase.sentences)
    print((workdir / "results.md").read_text())
    print(f"wrote {workdir}/results.md, {workdir}/curves.png and metrics.jsonl; checkpoints in "
          f"{workdir}/checkpoints and {workdir}/best")


def command() -> None:
    """The `jaxenc-train` / `python -m train.main` command."""
    app.run(main, flags_parser=_parse_flags)


if __name__ == "__main__":
    command()
