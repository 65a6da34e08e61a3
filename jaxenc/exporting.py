"""`jaxenc.export(workdir, out_dir)` writes a self-describing encoder, which `jaxenc.load(out_dir)`
(`jaxenc.loading`) reads back as a `jaxenc.encoding.Encoder`.

    python -m jaxenc export WORKDIR OUT [--batch_size 64] [--platforms cpu,cuda] ...

An export holds everything encoding needs: nothing outside it is read again (the paths it
records, of the run and the vectors file, are for the record). docs/ARCHITECTURE.md, "Export
format":

  format.json           what the export is: FORMAT_NAME, FORMAT_VERSION, its source (the run's
                        folder, dataset, model, and the checkpoint exported: step, folder, dev
                        metrics), the model config, vector size, vocabulary options, tokenizer,
                        parser settings, buckets and the inputs of every exported function
  vocab.txt             the vocabulary (training words, then the words added by vocabulary
                        expansion); found.npy bool[V] under data.oov="drop"
  relations.json        the relation vocabulary of a model with the "relations" field
  params/               the encoder's parameters (orbax), word table included, for orbax
                        users: neither reader reads it (their sizes could not be checked first)
  params.npz            the same parameters, what both readers read (keys "embed/embedding")
  head.npz              a classification or relatedness run's task head (keys "head/..."),
                        which `predict` applies (format.json "head": its kind, sizes, label
                        names or score points; jaxenc.prediction)
  functions/encode_l<L>.jaxexport
                        `jax.export` of `apply(params, fields) -> float32[B, D]` for each bucket
                        length L and the export's batch size B
  training_config.json  the run's config.json, for the record
  jaxenc_manifest.json  size and SHA-256 of every other file (jaxenc.training.integrity)

The folder is written beside `out_dir` and renamed into place when complete; with `overwrite`
the export there is first renamed aside (`.OUT.replaced`) and removed once the new one is in
place, so a process killed at any moment leaves the old export or the new one whole, and the
next `export` or `load` of OUT finishes the replacement with a one-line warning (`recover`). A
write the operating system refuses (a full disk, a read-only folder) is one WriteError line.

It holds data only, no code: `jaxenc.loading` reads it with jaxenc, `jaxenc.standalone` with jax
and numpy alone, both after the checks of `python -m jaxenc verify OUT` (`export_checks.check`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxenc import __version__, cli, files
from jaxenc.encode_batching import INDEX
from jaxenc.encoding import Encoder
from jaxenc.errors import ConfigError, WriteError
from jaxenc.export_format import FORMAT_FILE, FORMAT_NAME, FORMAT_VERSION, PARAMS_NPZ, SEPARATOR
from jaxenc.training import integrity

VOCAB_FILE, FOUND_FILE, RELATIONS_FILE = "vocab.txt", "found.npy", "relations.json"
HEAD_FILE = "head.npz"
PARAMS_DIR, FUNCTIONS_DIR = "params", "functions"
TRAINING_CONFIG_FILE = "training_config.json"
# errno -> the fix offered when writing an export fails with it (others: "check the disk ...")
_WRITE_FIXES = {errno.ENOSPC: "free disk space there, or pass an OUT on a disk with room",
                errno.EDQUOT: "free disk space there (quota), or pass an OUT on a disk with room",
                errno.EACCES: "make the folder writable, or pass an OUT in a writable folder",
                errno.EPERM: "make the folder writable, or pass an OUT in a writable folder",
                errno.EROFS: "the file system is read-only: pass an OUT on a writable one"}
DEFAULT_BATCH_SIZE = 64
DEFAULT_PLATFORMS = ("cpu", "cuda")
PLATFORMS = ("cpu", "cuda", "rocm", "tpu")  # what jax.export lowers for

log = logging.getLogger(__name__)


def export(workdir: str | os.PathLike, out_dir: str | os.PathLike, *,
           batch_size: int = DEFAULT_BATCH_SIZE, platforms: Sequence[str] = DEFAULT_PLATFORMS,
           text_parser: str | None = None, expand_limit: int | None = None,
           differentiable: bool = False, overwrite: bool = False) -> Path:
    """Writes the encoder of a training run directory (its best checkpoint) to `out_dir`.

    Args:
      workdir: a `python -m train.main` run directory.
      out_dir: the export folder (module doc); it must not exist unless `overwrite`.
      batch_size: B, the rows of the exported functions' batches.
      platforms: what the functions are lowered for (a subset of PLATFORMS; one file serves all).
      text_parser: the parser of sentences without gold trees, for a model trained on gold trees
        (default: spaCy, `jaxenc.encoding.default_text_parser`).
      expand_limit: with data.expand_vocabulary, add at most this many words of the vectors file
        (in file order; GloVe's are most frequent first); None: every word with a vector.
      differentiable: also export the functions' VJP (jax.grad through them without jaxenc).
      overwrite: replace an existing `out_dir`.

    Prints one line naming what was exported (`describe`): the model, its dataset, the
    checkpoint's step, folder and dev score; format.json's "source" records the same.

    Returns: `out_dir`.
    """
    out_dir = Path(out_dir)
    recover(out_dir)
    _check_arguments(out_dir, batch_size, platforms, overwrite)
    encoder = Encoder.from_workdir(workdir, text_parser=text_parser)
    config = json.loads((Path(workdir) / "config.json").read_text(encoding="utf-8"))
    source = {"workdir": str(Path(workdir).resolve()), "dataset": config["task"]["dataset"],
              "name": encoder.name, "model": config["model"]["name"],
              **best_checkpoint(workdir, config)}
    expanded = _expand_fully(encoder, config["data"], expand_limit)
    params = jax.device_get(encoder.params)
    table = params["embed"]["embedding"][:len(encoder.vocab)]  # expansion pads to a power of 2
    params = {**params, "embed": {**params["embed"], "embedding": table}}
    partial = out_dir.with_name(f".{out_dir.name}.partial")
    try:
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir(parents=True)
        description = _write_export(partial, encoder, params, config, source, expanded,
                                    batch_size, tuple(platforms), differentiable, Path(workdir))
        _replace(partial, out_dir)
    except OSError as error:
        shutil.rmtree(partial, ignore_errors=True)
        with contextlib.suppress(WriteError):
            recover(out_dir)  # an export renamed aside goes back
        reason = error.strerror or str(error) or type(error).__name__
        kept = f"{out_dir} holds a whole export" if is_export(out_dir) else "nothing written"
        raise WriteError(f"cannot write {error.filename or partial}: {reason}; {kept} (fix: "
                         f"{_WRITE_FIXES.get(error.errno, 'check the disk, or pass another OUT')}"
                         ")") from None
    print(describe(description, out_dir), flush=True)
    return out_dir


def _write_export(partial: Path, encoder: Encoder, params: dict, config: dict, source: dict,
                  expanded: dict | None, batch_size: int, platforms: tuple[str, ...],
                  differentiable: bool, workdir: Path) -> dict[str, Any]:
    """Writes the whole export into the empty folder `partial`, sealed; returns format.json."""
    loaded = Encoder(encoder.model_config, params, encoder.vocab,
                     lowercase_fallback=encoder.lowercase_fallback, found=encoder.found,
                     relation_vocab=encoder.relation_vocab, buckets=encoder.buckets,
                     bucket_step=encoder.bucket_step)  # what `load` gives: the exact table
    functions = _write_functions(loaded, partial, batch_size, platforms, differentiable)
    description = {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION,
        "created_by": {"jaxenc": __version__, "jax": jax.__version__},
        "source": source,
        "model": encoder.model_config,
        "dim": functions.pop("dim"),
        "vocabulary": {
            "file": VOCAB_FILE, "size": len(encoder.vocab), "lowercase": encoder.vocab.lowercase,
            "lowercase_fallback": encoder.lowercase_fallback, "oov": config["data"]["oov"],
            "found": FOUND_FILE if encoder.found is not None else None, "expanded": expanded},
        "tokenizer": encoder.tokenizer,
        "structures": {
            "fields": list(encoder.structure_fields),
            "prefix_tokens": list(encoder.prefix_tokens), "parser": encoder.parser,
            "text_parser": encoder.text_parser,
            "relations": RELATIONS_FILE if encoder.relation_vocab is not None else None},
        "buckets": list(encoder.buckets), "bucket_step": encoder.bucket_step,
        "params": {"orbax": PARAMS_DIR, "npz": PARAMS_NPZ},
        "functions": functions,
        "head": encoder.head.description(HEAD_FILE) if encoder.head is not None else None,
    }
    _write_files(partial, description, encoder, params, workdir)
    integrity.seal(partial)
    return description


def best_checkpoint(workdir: str | os.PathLike, config: dict[str, Any]) -> dict[str, Any]:
    """Which checkpoint of a run `export` (and `Encoder.from_workdir`) reads: {"step", "checkpoint"
    (its folder), "dev" (the dev metrics recorded at that step in metrics.jsonl, {} when the run
    has no such record)}. `config`: the run's config.json."""
    from jaxenc.training import checkpointing, run_files, run_report

    checkpoints = checkpointing.Checkpoints(workdir, keep=config["checkpoint"]["keep"],
                                            best_k=config["checkpoint"]["best_k"], repair=False)
    try:
        step = checkpoints.best_step()
    finally:
        checkpoints.close()
    metrics = Path(workdir) / run_report.METRICS_FILE
    dev = next((record for record in run_report.read_metrics(metrics, "dev")
                if record["step"] == step), {}) if metrics.is_file() else {}
    return {"step": step,
            "checkpoint": str((Path(workdir) / run_files.BEST_DIR / str(step)).resolve()),
            "dev": {key: value for key, value in dev.items() if key not in ("step", "split")}}


def describe(description: dict[str, Any], out_dir: str | os.PathLike) -> str:
    """One line: which model an export holds (model, dataset, checkpoint step and folder, dev
    score there) and what it is (name, size, vocabulary, buckets). `export` prints it, so a
    run's export, the main job's included, names the model it wrote."""
    source, model = description["source"], description["model"]
    step = source.get("step")
    dev = ", ".join(f"dev {key} {value:.4f}" for key, value in source.get("dev", {}).items()
                    if key != "loss" and isinstance(value, (int, float)))
    where = (f"step {step}{f' ({dev})' if dev else ''} from {source['checkpoint']}"
             if step is not None else f"the best checkpoint of {source['workdir']}")
    return (f"exported {model['name']} trained on {source['dataset']}, {where}, to {out_dir} "
            f"({source['name']}: {description['dim']}-d, vocabulary "
            f"{description['vocabulary']['size']}, buckets "
            f"{','.join(map(str, description['buckets']))})")


def recover(out_dir: str | os.PathLike) -> None:
    """Finishes a replacement of the export `out_dir` that was stopped (`_replace`), with a
    one-line warning: the export set aside is removed when `out_dir` is in place, else renamed
    back to `out_dir`. Either way `out_dir` is a whole export, the new or the old."""
    out_dir = Path(out_dir)
    aside = _aside(out_dir)
    if not os.path.lexists(aside):
        return
    with files.writing(aside):
        if os.path.lexists(out_dir):
            shutil.rmtree(aside)
            log.warning("removed %s, the export that %s replaced (its removal was stopped)",
                        aside, out_dir)
        else:
            os.rename(aside, out_dir)
            log.warning("restored the export %s from %s (its replacement was stopped before "
                        "the new export was in place)", out_dir, aside)


def _aside(out_dir: Path) -> Path:
    """Where `export --overwrite` moves the export it replaces until the new one is in place."""
    return out_dir.with_name(f".{out_dir.name}.replaced")


def _replace(partial: Path, out_dir: Path) -> None:
    """Renames the complete export `partial` to `out_dir`: the export there is first renamed
    aside, then removed once the new one is in place. A process killed at any step leaves the
    old export or the new one whole at `out_dir` or aside (`recover`)."""
    aside = _aside(out_dir)
    if os.path.lexists(out_dir):
        os.rename(out_dir, aside)
    os.rename(partial, out_dir)
    if os.path.lexists(aside):
        shutil.rmtree(aside)


def is_export(path: str | os.PathLike) -> bool:
    """Whether `path` is a folder with an export's format.json."""
    return (Path(path) / FORMAT_FILE).is_file()


def _check_arguments(out_dir: Path, batch_size: int, platforms: Sequence[str],
                     overwrite: bool) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        if not overwrite:
            raise ConfigError(f"{out_dir} exists (fix: pass a new folder, or --overwrite to "
                              "replace it)")
        if not is_export(out_dir):  # --overwrite replaces an export, nothing else
            raise ConfigError(f"{out_dir} exists and is not an export, --overwrite leaves it "
                              "(fix: pass a new folder)")
    if batch_size < 1:
        raise ConfigError(f"--batch_size {batch_size} (fix: a positive number of rows)")
    unknown = sorted(set(platforms) - set(PLATFORMS)) or ([] if platforms else ["none given"])
    if unknown:
        raise ConfigError(f"--platforms: {', '.join(unknown)} (fix: a comma-separated subset of "
                          f"{', '.join(PLATFORMS)})")


def _expand_fully(encoder: Encoder, data: dict, limit: int | None) -> dict | None:
    """With data.expand_vocabulary: adds every word of data.embeddings that has a vector (at
    most `limit`), so that the export needs no vectors file; what was added, else None."""
    from jaxenc.data.embeddings import vector_words

    if not data.get("expand_vocabulary"):
        return None
    before = len(encoder.vocab)
    encoder.expand_vocabulary(vector_words(data["embeddings"], limit))
    return {"vectors": data["embeddings"], "limit": limit, "training_words": before,
            "added_words": len(encoder.vocab) - before}


def _write_functions(encoder: Encoder, folder: Path, batch_size: int,
                     platforms: tuple[str, ...], differentiable: bool) -> dict[str, Any]:
    """Serialises `apply` for each bucket; format.json's "functions" section (and "dim")."""
    (folder / FUNCTIONS_DIR).mkdir()
    shape_of = lambda array: jax.ShapeDtypeStruct(np.shape(array), np.asarray(array).dtype)
    params = jax.tree.map(shape_of, encoder.params)
    buckets, dim = {}, None
    for length in encoder.buckets:
        fields = {key: value for key, value in encoder.example_batch(length, batch_size).items()
                  if key != INDEX}
        exported = jax.export.export(encoder.apply.jitted, platforms=platforms)(
            params, jax.tree.map(shape_of, fields))
        name = f"{FUNCTIONS_DIR}/encode_l{length}.jaxexport"
        (folder / name).write_bytes(exported.serialize(vjp_order=1 if differentiable else 0))
        buckets[str(length)] = {"file": name, "inputs": {
            key: {"shape": list(np.shape(value)), "dtype": str(np.asarray(value).dtype)}
            for key, value in fields.items()}}
        dim = int(exported.out_avals[0].shape[-1])
    return {"batch_size": batch_size, "platforms": list(platforms),
            "differentiable": differentiable, "output": {"shape": [batch_size, dim],
                                                         "dtype": "float32"},
            "buckets": buckets, "dim": dim}


def _write_files(folder: Path, description: dict, encoder: Encoder, params: dict,
                 workdir: Path) -> None:
    """Everything but the functions and the manifest (module doc)."""
    import orbax.checkpoint as ocp

    (folder / FORMAT_FILE).write_text(json.dumps(description, indent=1) + "\n", encoding="utf-8")
    encoder.vocab.save(folder / VOCAB_FILE)
    if encoder.found is not None:
        np.save(folder / FOUND_FILE, np.asarray(encoder.found, bool))
    if encoder.relation_vocab is not None:
        encoder.relation_vocab.save(folder / RELATIONS_FILE)
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save((folder / PARAMS_DIR).absolute(), params)
        checkpointer.wait_until_finished()
    np.savez(folder / PARAMS_NPZ, **_flat(params))
    if encoder.head is not None:
        np.savez(folder / HEAD_FILE, **_flat(jax.device_get(encoder.head.params)))
    shutil.copyfile(workdir / "config.json", folder / TRAINING_CONFIG_FILE)


def _flat(params: dict) -> dict[str, np.ndarray]:
    """{"a/b/c": array} of nested params."""
    return {key: np.asarray(leaf) for key, leaf in flatten(params).items()}


def flatten(tree: dict) -> dict[str, Any]:
    """{"a/b/c": leaf} of nested dicts, the leaves as they are (export_format.unflatten's
    inverse: the keys of params.npz and head.npz)."""
    return {SEPARATOR.join(str(key.key) for key in path): leaf
            for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def main(argv: Sequence[str] | None = None) -> Path:
    """`python -m jaxenc export WORKDIR OUT`: see --help."""
    parser = argparse.ArgumentParser(
        prog="python -m jaxenc export",
        description="Export the encoder of a training run (its best checkpoint) as a "
        "self-describing folder: parameters (orbax and .npz), model config, vocabulary, "
        "relation vocabulary, parser settings, one jax.export function per bucket length and "
        "a SHA-256 manifest. Load it with jaxenc.load(OUT) (an Encoder: encode, featurize, "
        "apply, params), evaluate it with python -m eval.transfer --encoder OUT, run its "
        "functions with jax and numpy alone (jaxenc.standalone.load(OUT)), or check it and "
        "print the digest that pins it with python -m jaxenc verify OUT.",
        epilog="Example: python -m jaxenc export workdir/disan_trec exports/disan_trec")
    parser.add_argument("workdir", help="a python -m train.main --workdir folder")
    parser.add_argument("out", help="the export folder to write (must not exist)")
    parser.add_argument("--batch_size", type=int, default=DEFAULT_BATCH_SIZE,
                        help="rows of the exported functions' batches (default %(default)s)")
    parser.add_argument("--platforms", default=",".join(DEFAULT_PLATFORMS),
                        help=f"comma-separated subset of {','.join(PLATFORMS)} the functions are "
                        "lowered for (default %(default)s)")
    parser.add_argument("--text_parser", default=None,
                        help="parser of sentences without gold trees when the model was trained "
                        "on gold trees (default: spacy)")
    parser.add_argument("--expand_limit", type=int, default=None,
                        help="with data.expand_vocabulary: add at most this many words of the "
                        "vectors file (default: every word; GloVe 840B's 2.2M words take "
                        "2.6 GB per 300-d copy)")
    parser.add_argument("--differentiable", action="store_true",
                        help="also export the VJP, so jax.grad works on the functions")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    return _main(parser.parse_args(argv))


@cli.reports_errors
def _main(args: argparse.Namespace) -> Path:
    out = export(args.workdir, args.out, batch_size=args.batch_size,
                 platforms=[p for p in args.platforms.split(",") if p],
                 text_parser=args.text_parser, expand_limit=args.expand_limit,
                 differentiable=args.differentiable, overwrite=args.overwrite)
    return out  # `export` printed which model it wrote


if __name__ == "__main__":
    main()

