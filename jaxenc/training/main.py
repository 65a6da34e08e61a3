"""Trains a sentence encoder on a task (plus the config's baselines) and reports dev/test results.

Usage (installed: `jaxenc-train` instead of `python -m train.main`):
  python -m train.main --config=train/configs/base.py:MODEL,DATASET --workdir=DIR \\
      [--config.SECTION.KEY=VALUE ...]
  python -m train.main --config=train/configs/default.py --workdir=workdir/default
  python -m train.main --config=train/configs/bag_trec.py --workdir=workdir/bag_trec \\
      --config.optim.learning_rate=0.1 --config.train.num_steps=500

Flags:
  --config=FILE[:ARG]   a config file (its get_config(ARG)), by path or, from any folder, by
                        the name of one of train/configs (`--config=disan_trec`; the presets
                        are listed below). base takes "MODEL,DATASET" (the models and datasets
                        are listed below); compare "DATASET[,single|pair][,MODEL,...]" trains
                        every encoder at its family's recipe (your own files: DATASET "files");
                        default is the main job: the embedded synthetic dataset.
  --config.SECTION.KEY=VALUE
                        overrides one value; every key is listed below with its default
                        (with --config=FILE --help: with that file's values).
  --workdir=DIR         the run directory: config.json, vocab.txt, checkpoints/, best/,
                        metrics.jsonl, results.md, curves.png. A run already there is resumed
                        from its newest intact checkpoint; the config may change only keys that
                        cannot change results (eval_every, log_every, checkpoint.*, a longer
                        num_steps, ...: jaxenc.training.sections.RESUMABLE_KEYS), recorded
                        in config.json's history; any other change is refused.
  --helpfull            absl's own flags too (logging, --flagfile, ...).

Datasets other than "synthetic" are read from --config.data.data_dir or $JAXENC_DATA_DIR.
Errors in the config or the data (an unknown key, a value out of range: checked before the
workdir is made), a loss that becomes nan or inf or passes --config.train.divergence_bound
(--config.train.nonfinite), a resume on other data than the run's, a workdir in which another
run is training, and a write the system refuses (read-only workdir, full disk) are reported in
one line (exit status 2). SIGTERM or SIGINT
(preemption, Ctrl-C) ends the step in progress, saves a checkpoint at it and exits with 143 /
130 after one line naming the step; rerunning the same command resumes it.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import logging
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import NoReturn

import ml_collections
from absl import app, flags
from absl import logging as absl_logging
from ml_collections import config_flags

from jaxenc import cli
from jaxenc.errors import JaxencError

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "config file (train/configs/*.py), optionally FILE:ARG; override any value "
    "with --config.SECTION.KEY=VALUE (every key: --help)", lock_config=True)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "run directory for checkpoints, metrics.jsonl, results.md and curves.png; "
    "an existing run there is resumed")
flags.mark_flags_as_required(["config", "workdir"])

_HELP = frozenset({"--help", "-help", "-h", "-?", "--helpshort", "-helpshort"})
_HELPFULL = frozenset({"--helpfull", "-helpfull"})
_CONFIG_FLAG = re.compile(r"--?config(=|$)")
_OVERRIDE = re.compile(r"--?(?:no)?config\.([^=]+)")


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


def _flag_arguments(argv: list[str]) -> list[str]:
    """The arguments of `argv` before a `--` (absl reads no flag after it)."""
    arguments = argv[1:]
    return arguments[:arguments.index("--")] if "--" in arguments else arguments


def _config_source(arguments: list[str]) -> str | None:
    """The value of --config=FILE[:ARG] (or `--config FILE[:ARG]`) in `arguments`, else None."""
    source = None
    for index, argument in enumerate(arguments):
        found = _CONFIG_FLAG.match(argument)
        if found and found.group(1):
            source = argument[found.end():]
        elif found and index + 1 < len(arguments):
            source = arguments[index + 1]
    return source


PRESETS = "train.configs"  # the package of the config files, installed with jaxenc


def preset_folder() -> Path | None:
    """The folder of the installed config files (`PRESETS`), None when it is not importable."""
    try:
        spec = importlib.util.find_spec(PRESETS)
    except ModuleNotFoundError:
        return None
    return Path(spec.origin).parent if spec and spec.origin else None


def preset_names() -> list[str]:
    """The config files a --config may name without a path: every public file of `PRESETS`."""
    folder = preset_folder()
    return sorted(path.stem for path in folder.glob("*.py")
                  if not path.stem.startswith("_")) if folder else []


def resolved_source(source: str) -> str:
    """--config's FILE[:ARG] with FILE an existing path: a path as given when it exists, else
    the preset's file when FILE is a preset's name (`disan_trec`, `compare.py`) or a path
    train/configs/NAME.py given from another folder; else exits with one line listing the
    presets."""
    path, colon, arg = source.partition(":")
    if Path(path).is_file():
        return source
    name = Path(path).name.removesuffix(".py")
    folder = preset_folder()
    named = path in (name, f"{name}.py") or Path(path).parent.as_posix() == "train/configs"
    if folder and named and name in preset_names():
        return f"{folder / name}.py{colon}{arg}"
    cli.fail(f"--config={source}: no file {path} in {Path.cwd()} and no preset named {name!r} "
             f"(fix: give a config file's path, or a preset: {', '.join(preset_names())})")


def _with_resolved_config(argv: list[str]) -> list[str]:
    """`argv` with the value of its --config flag made a path (`resolved_source`)."""
    argv, arguments = list(argv), _flag_arguments(argv)
    for index, argument in enumerate(arguments, start=1):
        found = _CONFIG_FLAG.match(argument)
        if found and found.group(1):
            argv[index] = argument[:found.end()] + resolved_source(argument[found.end():])
        elif found and index < len(arguments):
            argv[index + 1] = resolved_source(argv[index + 1])
    return argv


def _load_config(source: str) -> ml_collections.ConfigDict:
    """The config of --config=`source` without its overrides; a config file that fails to load
    exits with its one-line error."""
    try:
        config = flags.FLAGS[_CONFIG.name].parser.parse(source)
        config.get("model")  # a config file that failed to load raises on first use
    except _CONFIG_ERRORS as error:
        cli.fail(f"{_one_line(error)} (see --help)")
    return config


def _show(text: str) -> NoReturn:
    """Prints `text` (help) on stdout and exits with status 0, also when a pager such as `head`
    closes the pipe early."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
    sys.exit(0)


def _help(arguments: list[str]) -> str:
    """--help: the module docstring, then the models, datasets and config keys (the values of the
    --config given, else the defaults)."""
    from jaxenc import configs
    from jaxenc.training import usage

    source = _config_source(arguments)
    config = _load_config(source) if source else configs.get_config()
    presets = textwrap.fill(", ".join(preset_names()), 100, initial_indent="  ",
                            subsequent_indent="  ")
    return (f"{__doc__}\nPresets (--config=NAME[:ARG]):\n{presets}\n\n"
            f"{usage.help_text(config, source)}\n\n"
            "absl's own flags (logging, --flagfile, ...): --helpfull")


def _unknown_override(arguments: list[str]) -> str | None:
    """The message for the first --config.PATH override naming a key the config lacks."""
    from jaxenc.training.validation import unknown_key

    source = _config_source(arguments)
    if source is None:
        return None
    config = _load_config(source)
    for argument in arguments:
        override = _OVERRIDE.match(argument)
        message = override and unknown_key(config, override.group(1))
        if message:
            return message
    return None


def _parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing, with --help and --helpfull printed here (exit status 0) and every
    error in one line (exit status 2)."""
    argv = _with_resolved_config(argv)
    arguments = _flag_arguments(argv)
    if _HELP & set(arguments):
        _show(_help(arguments))
    if _HELPFULL & set(arguments):
        _show(f"{__doc__.splitlines()[0]}\nUsage and config keys: --help.\n\nflags:\n"
              f"{flags.FLAGS.get_help()}")
    try:
        return flags.FLAGS(argv)
    except (KeyError, AttributeError) as error:  # an override of a key the config does not have
        cli.fail(_unknown_override(arguments) or f"{_one_line(error)} (see --help)")
    except _CONFIG_ERRORS as error:
        cli.fail(f"{_one_line(error)} (see --help)")


class _ReportedWriteErrors(logging.Filter):
    """Drops orbax's own records (with tracebacks) of a write the operating system refused, and
    asyncio's "Task exception was never retrieved" of its pending writes, printed when they are
    collected at exit: the job reports the refusal in one line (`jaxenc.errors.WriteError`),
    the last one it prints."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return "os_error_code=" not in f"{record.getMessage()} {error}"


def _quiet_logging() -> None:
    """Library INFO chatter (JAX, orbax) off, and orbax's reports of refused writes (reported
    in one line); jaxenc's own progress lines as plain text."""
    absl_logging.set_verbosity(absl_logging.WARNING)
    for name in ("absl", "asyncio"):
        logging.getLogger(name).addFilter(_ReportedWriteErrors())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    ours = logging.getLogger("jaxenc")
    ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    ours.propagate = False


def _file_config(spec: str) -> ml_collections.ConfigDict:
    """The config of `--config=FILE[:ARG]` (loaded by absl already) again, without the command
    line's overrides: what a fix offers for a value the command line got wrong."""
    path, _, arg = spec.partition(":")
    spec_of_file = importlib.util.spec_from_file_location("jaxenc_config_file", path)
    module = importlib.util.module_from_spec(spec_of_file)
    spec_of_file.loader.exec_module(module)
    return module.get_config(arg) if arg else module.get_config()


def _add_encode_rates(config: ml_collections.ConfigDict, workdir: Path,
                      rows: list[dict]) -> None:
    """Adds each run's end-to-end encode rate on the test sentences (`jaxenc.throughput`) to
    its row, after "train s", and writes results.md again."""
    import jax

    from jaxenc import throughput
    from jaxenc.training.experiment import write_report
    from jaxenc.training.input_pipeline import load_splits

    if jax.process_count() > 1:  # the encoder runs in this process alone; the others have ended
        logging.getLogger("jaxenc").info("encode rate: measured by single-process runs only")
        return
    sentences = throughput.texts(load_splits(config)["test"])
    logging.getLogger("jaxenc").info(
        "encode rate of each model: encode() of %d test sentences end to end", len(sentences))
    for index, row in enumerate(rows):
        rate = throughput.record_encode_rate(row["workdir"], row["best step"], sentences)
        cells = list(row.items())
        at = [key for key, _ in cells].index("train s") + 1
        rows[index] = dict(cells[:at] + [("encode sent/s", round(rate))] + cells[at:])
    write_report(workdir, rows, config.train.seeds)


@cli.reports_errors
def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    config = _CONFIG.value
    try:
        config.get("model")  # a config file that failed to load raises on first use
    except _CONFIG_ERRORS as error:
        cli.fail(f"{_one_line(error)} (see --help)")
    from jaxenc.training.validation import check_config

    # before run() makes the workdir; sets "auto" model options
    check_config(config, _file_config(config_flags.get_config_filename(flags.FLAGS["config"])))
    _quiet_logging()
    import jax  # after flag parsing: --help stays fast

    from jaxenc.training.experiment import run

    rows = run(config, _WORKDIR.value)
    if jax.process_index() != 0:  # a multi-host run: process 0 writes and prints the results
        return
    workdir = Path(rows[0]["workdir"])
    _add_encode_rates(config, workdir, rows)
    if config.get("showcase") and config.showcase.export_best:
        from jaxenc.showcase import showcase

        # the first seed's runs, one per model
        showcase(rows[:len(rows) // config.train.seeds], workdir, config.showcase.sentences)
    print((workdir / "results.md").read_text())
    print(f"wrote {workdir}/results.md, {workdir}/curves.png and metrics.jsonl; checkpoints in "
          f"{workdir}/checkpoints and {workdir}/best")


def command() -> None:
    """The `jaxenc-train` / `python -m train.main` command."""
    app.run(main, flags_parser=_parse_flags)


if __name__ == "__main__":
    command()
