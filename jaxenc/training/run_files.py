"""The files of a run directory (a workdir), and its config.json: the config it was trained
with, checked against the config of a run that resumes it, and what it records besides.

Layout of a workdir:
  config.json           the run's config, and under "history" the changes resumed runs made;
                        a resumed run may change only keys that cannot change its results
                        (`RESUMABLE_KEYS`, a longer `EXTENSIBLE_KEYS`), any other change is
                        refused naming the keys; under "data_identity" each split's example
                        count and content hash (`data_identity`): a resumed run on other data
                        is refused naming the split, the same data at another path is not
  vocab.txt             the input vocabulary (+ target_vocab.txt / tags.txt when the task has them)
  checkpoints/<step>/   periodic: the full TrainState + the loop position (keep the last `keep`);
                        the position also holds the statistics of the next "train" record so
                        far and the compiled footprint of each batch shape, so that a resumed
                        run writes the records and results row of an uninterrupted one
  best/<step>/          the parameters of the `best_k` best dev evaluations
  metrics.jsonl, results.md, curves.png   (jaxenc.training.run_report)
  .lock                 held by the process training in the workdir (jaxenc.training.locking)
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ml_collections

from jaxenc.data.vocab import Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.files import write_text_atomic, writing
from jaxenc.layers.dropout import resolve_mask_bits
from jaxenc.models.registry import encoder_spec
from jaxenc.records import Example
from jaxenc.training.sections import ADDED_KEY_DEFAULTS, EXTENSIBLE_KEYS, RESUMABLE_KEYS

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
HISTORY_KEY = "history"  # config.json: [{"time", "changed": {key: [old, new]}}] of resumed runs
DATA_KEY = "data_identity"  # config.json: {split: {"examples": count, "sha256": hex}}
# config.json: {"name", "kind", "num_classes", "label_names", "score_range"} of the dataset
# trained on (a user's files: what their train file held)
DATASET_KEY = "dataset"
RECORD_KEYS = (DATA_KEY, DATASET_KEY)  # what config.json records besides the config
# the config's sections: objects (a model section's own values are checked when it is built)
CONFIG_SECTIONS = ("model", "task", "data", "optim", "train", "checkpoint", "showcase",
                   "baselines", "recipes")
VOCAB_FILE = "vocab.txt"
LATEST_DIR, BEST_DIR = "checkpoints", "best"
BASELINES_DIR = "baselines"  # workdir/baselines/<name>: the run of the config's baselines.<name>
SEEDS_DIR = "seeds"  # workdir/seeds/<seed>: the runs of each further seed of train.seeds

# Sections a resumed run may change: other runs and their settings (compared in their own
# workdirs), what is done after training. Which keys of the other sections it may change:
# RESUMABLE_KEYS and EXTENSIBLE_KEYS (jaxenc.training.sections).
RESUMABLE_SECTIONS = ("baselines", "recipes", "showcase")
_ABSENT = "<absent>"


def config_to_dict(config: ml_collections.ConfigDict) -> dict:
    """The config as plain JSON values."""
    return json.loads(config.to_json_best_effort())


def flatten(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}, at any depth; lists become tuples so values are hashable."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = tuple(value) if isinstance(value, list) else value
    return flat


def _read_run_file(workdir: str | os.PathLike) -> dict | None:
    """config.json of the run in `workdir` as written (config, history, data identity), None
    when there is none; ConfigError unless it is a JSON object whose config sections (and
    history) have their types."""
    path = Path(workdir) / CONFIG_FILE
    if not path.is_file():
        return None
    fix = "(fix: restore it from a copy, or use a new --workdir)"
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not a JSON config ({error}) {fix}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: holds a JSON {type(values).__name__}, not a config object "
                          f"{fix}")
    for key, value in values.items():
        expected = list if key == HISTORY_KEY else dict
        if key in CONFIG_SECTIONS + (HISTORY_KEY, *RECORD_KEYS) and not isinstance(
                value, expected):
            raise ConfigError(f"{path}: {key!r} is a JSON {type(value).__name__}, not "
                              f"{'a list' if expected is list else 'an object'} {fix}")
    return values


def saved_config(workdir: str | os.PathLike) -> dict | None:
    """The config.json of the run in `workdir` (its history and data identity left out), None
    when there is none. A model option the saved config lacks, and whose default computes
    something else (`EncoderConfig.BEFORE_OPTION`), reads as the value the run was trained with."""
    saved = _read_run_file(workdir)
    if saved is not None:
        for key in (HISTORY_KEY, *RECORD_KEYS):
            saved.pop(key, None)
        _fill_options_before(saved.get("model", {}))
    return saved


def _fill_options_before(model: dict) -> None:
    """Adds to a saved model section the BEFORE_OPTION values of the options it lacks."""
    try:
        before = encoder_spec(model.get("name")).config.BEFORE_OPTION
    except ConfigError:  # an unknown model: building it fails with its own message
        return
    for key, value in before.items():
        model.setdefault(key, value)


def _model_defaults(config: Mapping) -> dict[str, Any]:
    """{"model.FIELD": default} of the model `config` (plain values) names: an option a saved
    config lacks may resume at its default. For most such options the default computes what the
    config without it computes; `dropout_bits` does not: a DiSAN or PSAN config without it
    resumes with the default's narrower dropout masks (the same dropout in distribution, another
    random stream) unless it says model.dropout_bits=32."""
    name = config.get("model", {}).get("name")
    try:
        defaults = encoder_spec(name).config().to_dict()
    except ConfigError:  # an unknown model: building it fails with its own message
        return {}
    return flatten(json.loads(json.dumps(defaults)), "model.")


def _same_dropout(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two flat configs' model.dropout_bits draw the same bits (0 picks them from
    keep_prob): a run saved with 8 resumes under the default 0 where that also means 8."""
    bits = [config.get("model.dropout_bits") for config in (old, new)]
    keep = [config.get("model.keep_prob") for config in (old, new)]
    if not all(isinstance(value, int) for value in bits) or keep[0] != keep[1] or keep[0] is None:
        return False
    return resolve_mask_bits(keep[0], bits[0]) == resolve_mask_bits(keep[1], bits[1])


def _resumable(key: str, old: Any, new: Any, defaults: Mapping[str, Any]) -> bool:
    """Whether a resumed run may change `key` from `old` to `new` (values or _ABSENT); a model
    option (or an ADDED_KEY_DEFAULTS key) the saved run predates may appear at its default."""
    if key in RESUMABLE_KEYS or key.split(".")[0] in RESUMABLE_SECTIONS:
        return True
    if old == _ABSENT and key in defaults and new == defaults[key]:
        return True
    if key not in EXTENSIBLE_KEYS or _ABSENT in (old, new):
        return False
    return new >= old and (key != "train.num_steps" or (old == 0) == (new == 0))


def check_compatible(workdir: str | os.PathLike,
                     config: ml_collections.ConfigDict) -> dict[str, tuple[Any, Any]]:
    """The changes {key: (saved, new)} of `config` against the run already in `workdir` that
    a resumed run may make ({} for a new workdir); ConfigError, naming every other changed key,
    when there is any (or when `workdir` cannot be a directory, or holds checkpoints without
    its config.json)."""
    workdir = Path(workdir)
    _check_workdir(workdir)
    saved = saved_config(workdir)
    if saved is None:
        found = [path for folder in (LATEST_DIR, BEST_DIR)
                 for path in step_folders(workdir / folder)]
        if found:
            raise ConfigError(f"{workdir / CONFIG_FILE}: missing, while {found[0]} holds a "
                              "checkpoint of the run (fix: restore config.json from a copy, or "
                              "use a new --workdir)")
        return {}
    return _allowed_changes(saved, config, f"{workdir} holds a run trained with")


def check_checkpoint_config(saved: Mapping[str, Any], config: ml_collections.ConfigDict,
                            checkpoint: Path) -> None:
    """ConfigError unless `config` may resume from a checkpoint saved with the config `saved`
    (the plain config a periodic checkpoint keeps, `loop.Position.config`; {} for checkpoints
    that predate it): what config.json says cannot replace what the run trained with."""
    if saved:
        _allowed_changes(saved, config, f"{checkpoint} was saved by a run with")


def _allowed_changes(saved: Mapping[str, Any], config: ml_collections.ConfigDict,
                     holder: str) -> dict[str, tuple[Any, Any]]:
    """`check_compatible`'s changes of `config` against the plain config `saved`; ConfigError
    "<holder> a different config: ..." naming the changes a resumed run may not make."""
    plain = config_to_dict(config)
    old, new = flatten(saved), flatten(plain)
    defaults = {**_model_defaults(plain), **ADDED_KEY_DEFAULTS}
    changes = {}
    for key in sorted(old.keys() | new.keys()):
        before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if before != after and not (key == "model.dropout_bits" and _same_dropout(old, new)):
            changes[key] = (before, after)
    refused = [_refusal(key, before, after) for key, (before, after) in changes.items()
               if not _resumable(key, before, after, defaults)]
    if refused:
        raise ConfigError(
            f"{holder} a different config: {', '.join(refused)} (fix: use a new --workdir for "
            "a different config; a resumed run may only change "
            f"{', '.join(sorted(RESUMABLE_KEYS))} or the baselines, or increase "
            f"{' / '.join(EXTENSIBLE_KEYS)})")
    return changes


def _refusal(key: str, before: Any, after: Any) -> str:
    """How a refused change reads; a key the saved run predates names the value to resume with."""
    if before == _ABSENT and key in ADDED_KEY_DEFAULTS:
        value = ADDED_KEY_DEFAULTS[key]
        return (f"{key} absent, i.e. {value!r} (config says {after!r}; resume with "
                f"--config.{key}={value})")
    return f"{key}={before!r} (config says {after!r})"


def _check_workdir(workdir: Path) -> None:
    """ConfigError when `workdir`, or a folder above it, exists as something else than a folder."""
    for path in (workdir, *workdir.parents):
        if path.exists():
            if not path.is_dir():
                raise ConfigError(f"--workdir {workdir}: {path} is a file, not a folder (fix: "
                                  "pass a new or existing run directory)")
            return


def record_changes(workdir: str | os.PathLike, config: ml_collections.ConfigDict,
                   changes: Mapping[str, tuple[Any, Any]]) -> None:
    """Rewrites config.json with `config`'s values, adding `changes` (from `check_compatible`)
    to its history with the time; its records (RECORD_KEYS) are kept."""
    saved = _read_run_file(workdir) or {}
    history = saved.get(HISTORY_KEY, [])
    history.append({"time": datetime.datetime.now(datetime.UTC).isoformat(
        timespec="seconds"), "changed": {key: list(values) for key, values in changes.items()}})
    extra = {key: saved[key] for key in RECORD_KEYS if key in saved}
    _write_config(Path(workdir) / CONFIG_FILE,
                  {**config_to_dict(config), HISTORY_KEY: history, **extra})


def _write_config(path: Path, values: dict) -> None:
    write_text_atomic(path, json.dumps(values, indent=2) + "\n")


def save_run_files(workdir: str | os.PathLike, config: ml_collections.ConfigDict,
                   vocabularies: Mapping[str, Vocabulary],
                   identity: Mapping[str, Mapping[str, Any]] | None = None,
                   dataset: Mapping[str, Any] | None = None) -> None:
    """Writes config.json (with the data `identity` of `data_identity` and the `dataset`
    record, when given) and one `<name>.txt` per vocabulary ("vocab", "target_vocab", ...).
    WriteError when the operating system refuses a write."""
    workdir = Path(workdir)
    with writing(workdir):
        workdir.mkdir(parents=True, exist_ok=True)
    extra = {key: dict(value) for key, value in ((DATA_KEY, identity), (DATASET_KEY, dataset))
             if value is not None}
    _write_config(workdir / CONFIG_FILE, {**config_to_dict(config), **extra})
    for name, vocab in vocabularies.items():
        vocab.save(workdir / f"{name}.txt")


# ----------------------------------------------------------------------------- data identity


def split_identity(examples: Sequence[Example]) -> dict[str, Any]:
    """{"examples": count, "sha256": hex} of a split: a hash of what training reads of each
    example, in order (tokens, gold structure, label, score, fine label, target tokens); where
    the examples were read from (`Example.uid`) is left out, so the same data at another path
    has the same identity. Fields are joined with ASCII separators into one text hashed at once
    (about 0.5 s for SST's 318k training phrases, which take 9 s to read)."""
    unit, parts = "\x1f", []
    for example in examples:
        for s in example.sentences:
            parts += (unit.join(s.tokens), s.tree or "", s.binary_tree or "",
                      repr(s.heads) if s.heads is not None else "", unit.join(s.deprels or ()),
                      unit.join(s.tags or ()))
        target = example.target
        parts.append(f"{example.label}{unit}{example.score!r}{unit}{example.fine_label}{unit}"
                     f"{unit.join(target.tokens) if target is not None else ''}\x1e")
    digest = hashlib.sha256(unit.join(parts).encode("utf-8", "surrogatepass"))
    return {"examples": len(examples), "sha256": digest.hexdigest()}


def data_identity(splits: Mapping[str, Sequence[Example]]) -> dict[str, dict[str, Any]]:
    """`split_identity` of each split, by name."""
    return {name: split_identity(examples) for name, examples in splits.items()}


def check_data(workdir: str | os.PathLike, identity: Mapping[str, Mapping[str, Any]]) -> bool:
    """Compares `identity` (`data_identity` of the splits about to train) with the one the run
    in `workdir` recorded: ConfigError naming every split whose data differ; False (logged) when
    the saved run has no record of its data, so that the caller records it; True otherwise (a
    new workdir, or the same data)."""
    saved = _read_run_file(workdir)
    if saved is None:
        return True
    recorded = saved.get(DATA_KEY)
    if not recorded:
        log.info("%s has no record of the data it was trained on (%s predates it): data not "
                 "compared; this run's is recorded", workdir, CONFIG_FILE)
        return False
    short = lambda entry: f"{entry.get('examples')} examples, sha256 {entry.get('sha256', '')[:12]}"
    differ = [f"{name} data ({short(recorded[name])}; now {short(now)})"
              for name, now in identity.items() if name in recorded and recorded[name] != now]
    if differ:
        raise ConfigError(f"--workdir {workdir} was trained on other {', other '.join(differ)} "
                          "(fix: use a new --workdir, or point --config.data.data_dir at the data "
                          "it was trained on)")
    return True


def record_data(workdir: str | os.PathLike, identity: Mapping[str, Mapping[str, Any]]) -> None:
    """Adds `identity` to the config.json of the run in `workdir` (one that predates it)."""
    saved = _read_run_file(workdir) or {}
    _write_config(Path(workdir) / CONFIG_FILE, {**saved, DATA_KEY: dict(identity)})


def saved_dataset(workdir: str | os.PathLike) -> dict | None:
    """The dataset record (DATASET_KEY) of the run in `workdir`: name, kind, number of classes,
    label names and score range; None for a run that predates it."""
    saved = _read_run_file(workdir)
    return saved.get(DATASET_KEY) if saved is not None else None


def load_config(workdir: str | os.PathLike) -> ml_collections.ConfigDict:
    """The config a run in `workdir` was trained with (as last resumed)."""
    saved = saved_config(workdir)
    if saved is None:
        raise ConfigError(f"{workdir} is not a training run directory (no {CONFIG_FILE}) (fix: "
                          "pass the --workdir of a finished `python -m train.main` run)")
    return ml_collections.ConfigDict(saved)


def step_folders(folder: Path) -> list[Path]:
    """The step folders orbax finished in `folder` (named by their step), newest first."""
    if not folder.is_dir():
        return []
    return sorted((path for path in folder.iterdir() if path.is_dir() and path.name.isdigit()),
                  key=lambda path: int(path.name), reverse=True)


