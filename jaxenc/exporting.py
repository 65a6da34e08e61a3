"""`jaxenc.export(workdir, out_dir)` writes a self-describing encoder; `jaxenc.load(out_dir)` reads
it back as an `jaxenc.encoding.Encoder`.

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
  params/               the encoder's parameters (orbax), word table included
  params.npz            the same parameters for readers without orbax (keys "embed/embedding")
  head.npz              a classification or relatedness run's task head (keys "head/..."),
                        which `predict` applies (format.json "head": its kind, sizes, label
                        names or score points; jaxenc.prediction)
  functions/encode_l<L>.jaxexport
                        `jax.export` of `apply(params, fields) -> float32[B, D]` for each bucket
                        length L and the export's batch size B
  training_config.json  the run's config.json, for the record
  jaxenc_manifest.json  size and SHA-256 of every other file (jaxenc.training.integrity)

The folder is written beside `out_dir` and renamed into place when complete. It holds data
only, no code: `load` reads it with jaxenc, `jaxenc.standalone.load` with jax and numpy alone.
Both read nothing outside the folder and only files the manifest vouches for (links, paths
leaving the folder, unlisted or altered files are refused: jaxenc/standalone.py), and both take
`sha256=`, the manifest's digest that `python -m jaxenc verify OUT` prints, to pin the export.
`load` also refuses an export of another format version, in one line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxenc import __version__, cli, prediction, standalone
from jaxenc.encoding import DEFAULT_MAX_LENGTH, INDEX, Encoder
from jaxenc.errors import ConfigError, DataError
from jaxenc.standalone import FORMAT_FILE, FORMAT_NAME, FORMAT_VERSION, PARAMS_NPZ, SEPARATOR
from jaxenc.training import integrity

VOCAB_FILE, FOUND_FILE, RELATIONS_FILE = "vocab.txt", "found.npy", "relations.json"
HEAD_FILE = "head.npz"
PARAMS_DIR, FUNCTIONS_DIR = "params", "functions"
TRAINING_CONFIG_FILE = "training_config.json"
DEFAULT_BATCH_SIZE = 64
DEFAULT_PLATFORMS = ("cpu", "cuda")
PLATFORMS = ("cpu", "cuda", "rocm", "tpu")  # what jax.export lowers for


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
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    loaded = Encoder(encoder.model_config, params, encoder.vocab,
                     lowercase_fallback=encoder.lowercase_fallback, found=encoder.found,
                     relation_vocab=encoder.relation_vocab, buckets=encoder.buckets,
                     bucket_step=encoder.bucket_step)  # what `load` gives: the exact table
    functions = _write_functions(loaded, partial, batch_size, tuple(platforms), differentiable)
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
    _write_files(partial, description, encoder, params, Path(workdir))
    integrity.seal(partial)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    partial.rename(out_dir)
    print(describe(description, out_dir), flush=True)
    return out_dir


def best_checkpoint(workdir: str | os.PathLike, config: dict[str, Any]) -> dict[str, Any]:
    """Which checkpoint of a run `export` (and `Encoder.from_workdir`) reads: {"step", "checkpoint"
    (its folder), "dev" (the dev metrics recorded at that step in metrics.jsonl, {} when the run
    has no such record)}. `config`: the run's config.json."""
    from jaxenc.training import checkpointing, report

    checkpoints = checkpointing.Checkpoints(workdir, keep=config["checkpoint"]["keep"],
                                            best_k=config["checkpoint"]["best_k"], repair=False)
    try:
        step = checkpoints.best_step()
    finally:
        checkpoints.close()
    metrics = Path(workdir) / report.METRICS_FILE
    dev = next((record for record in report.read_metrics(metrics, "dev")
                if record["step"] == step), {}) if metrics.is_file() else {}
    return {"step": step,
            "checkpoint": str((Path(workdir) / checkpointing.BEST_DIR / str(step)).resolve()),
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


def load(path: str | os.PathLike, *, sha256: str | None = None, tokenizer: str | None = None,
         text_parser: str | None = None,
         parse_cache_dir: str | os.PathLike | None = None,
         max_length: int = DEFAULT_MAX_LENGTH, long_sentences: str = "truncate",
         token_budget: int | None = None) -> Encoder:
    """The `Encoder` of an export folder, after checking its format version and every file.

    Nothing outside the folder is read, and nothing the manifest does not vouch for: a symbolic
    link inside the folder, a manifest entry or format.json path that leaves it, a file of the
    folder that the manifest does not list, or a file whose size or SHA-256 differs from the
    manifest's is refused (`jaxenc.standalone.verify`).

    Args:
      path: an `export` folder.
      sha256: the digest of the export's manifest file (64 hex digits, as `python -m jaxenc
        verify OUT` and `sha256sum OUT/jaxenc_manifest.json` print it); when given, an export
        whose manifest has another digest is refused, so the whole export is pinned.
      tokenizer: how strings become tokens, instead of the training data's (format.json).
      text_parser: the parser of sentences without gold trees, instead of the export's.
      parse_cache_dir: where parser outputs are cached (None: not cached).
      max_length, long_sentences, token_budget: how `encode` batches and what it does with a
        sentence over max_length tokens (`jaxenc.encoding.Encoder`; the export's functions
        cover its buckets only, `encode` compiles longer ones).

    Raises ConfigError for another format version or a malformed `sha256`, DataError
    (`standalone.ExportError`) for a folder that is no export, is unsafe (above), or whose files
    differ from its manifest (truncated, altered, missing), or whose manifest has another digest
    than `sha256`.
    """
    import orbax.checkpoint as ocp

    from jaxenc.data.vocab import Vocabulary
    from jaxenc.structures.relations import RelationVocabulary

    folder = Path(path)
    description = read_description(folder)
    manifest = standalone.verify(folder, sha256)
    standalone.check_recorded_paths(folder, description, manifest)
    with ocp.StandardCheckpointer() as checkpointer:
        params = jax.device_put(checkpointer.restore(
            (folder / description["params"]["orbax"]).absolute()))
    vocabulary, structures = description["vocabulary"], description["structures"]
    head = None
    if description.get("head"):
        with np.load(folder / description["head"]["file"], allow_pickle=False) as stored:
            head = prediction.Head.from_description(
                description["head"], standalone.unflatten(dict(stored)))
    return Encoder(
        description["model"], params,
        Vocabulary.load(folder / vocabulary["file"], lowercase=vocabulary["lowercase"]),
        lowercase_fallback=vocabulary["lowercase_fallback"],
        found=np.load(folder / vocabulary["found"]) if vocabulary["found"] else None,
        relation_vocab=RelationVocabulary.load(folder / structures["relations"])
        if structures["relations"] else None,
        tokenizer=tokenizer or description["tokenizer"],
        text_parser=text_parser or structures["text_parser"],
        buckets=description["buckets"], bucket_step=description["bucket_step"],
        parse_cache_dir=parse_cache_dir, dim=description["dim"],
        name=f"export-{folder.resolve().name}-{manifest.sha256[:12]}", max_length=max_length,
        long_sentences=long_sentences, token_budget=token_budget, head=head)


def is_export(path: str | os.PathLike) -> bool:
    """Whether `path` is a folder with an export's format.json."""
    return (Path(path) / FORMAT_FILE).is_file()


def read_description(folder: Path) -> dict[str, Any]:
    """format.json of an export folder (a plain file, not a link), checked to be this format's
    version."""
    path = folder / FORMAT_FILE
    if not os.path.lexists(path):
        raise DataError(f"not a jaxenc encoder export (no {FORMAT_FILE})", path=folder,
                        fix="pass a folder written by `python -m jaxenc export WORKDIR OUT`")
    try:
        description = json.loads(standalone.read_file(path).decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataError(f"not readable JSON ({error})", path=path,
                        fix="copy the export again, or export the training run again") from None
    problem = standalone.version_problem(description)
    if problem:
        raise ConfigError(f"{folder}: {problem}")
    return description


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
    """{"a/b/c": leaf} of nested params (standalone.unflatten's inverse)."""
    return {SEPARATOR.join(str(key.key) for key in path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]}


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

