"""`jaxenc.load(out_dir)`: the `jaxenc.encoding.Encoder` of an export folder (written by
`jaxenc.exporting`, whose module doc lists its files).

Nothing outside the folder is read. `load` checks it first as `python -m jaxenc verify OUT` does
(`export_checks.check`: links, paths, the manifest, format.json's fields and caps, the array
headers), then every array's shape and dtype against the parameters its model config gives
(computed with `jax.eval_shape`, nothing allocated) before reading it. `sha256=`, the manifest's
digest that `verify` prints, pins the export. Every refusal is one ExportError line naming the
file and the field. An overwrite of the export that was cut is finished or undone first
(`exporting.recover`). `jaxenc.standalone.load` reads the same folder with jax and numpy alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from jaxenc import export_arrays, export_checks, prediction
from jaxenc.data.vocab import Vocabulary
from jaxenc.encode_batching import INDEX
from jaxenc.encoding import DEFAULT_MAX_LENGTH, Encoder
from jaxenc.export_format import FORMAT_FILE, RECOPY, ExportError, unflatten
from jaxenc.exporting import flatten, recover
from jaxenc.structures.relations import RelationVocabulary
from jaxenc.text_io import TOKENIZERS


def load(path: str | os.PathLike, *, sha256: str | None = None, tokenizer: str | None = None,
         text_parser: str | None = None,
         parse_cache_dir: str | os.PathLike | None = None,
         max_length: int = DEFAULT_MAX_LENGTH, long_sentences: str = "truncate",
         token_budget: int | None = None) -> Encoder:
    """The `Encoder` of an export folder, after checking every file and field.

    Nothing outside the folder is read, nothing the manifest does not vouch for and no array
    before its header is checked (`jaxenc.export_checks.check`, module doc): the word table must be
    float[vocabulary.size, d], every params.npz array of the shape and dtype the model config
    gives, every bucket at most `max_length`. A replacement of the export that was stopped is
    finished first (`exporting.recover`).

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

    Raises `export_format.ExportError` (a one-line DataError) for a folder that is no export, is
    unsafe, malformed or of sizes beyond the checks above, whose files differ from its manifest,
    or whose manifest has another digest than `sha256` (for another format version an
    `ExportVersionError`, also a ConfigError); ConfigError for a malformed `sha256`.
    """
    folder = Path(path)
    recover(folder)
    read_description(folder)  # an export, of this version: before every file is hashed
    manifest, description = export_checks.check(folder, sha256)
    vocabulary, structures = description["vocabulary"], description["structures"]
    source = folder / FORMAT_FILE
    if description["buckets"][-1] > max_length:
        raise ExportError(f"field buckets holds {description['buckets'][-1]}, above max_length "
                          f"{max_length}", path=source,
                          fix=f"pass max_length={description['buckets'][-1]} to load it")
    vocab = _built(folder / vocabulary["file"], "vocabulary.file", lambda: Vocabulary.load(
        folder / vocabulary["file"], lowercase=vocabulary["lowercase"]))
    if len(vocab) != vocabulary["size"]:
        raise ExportError(f"{len(vocab)} words, not format.json vocabulary.size "
                          f"{vocabulary['size']}", path=folder / vocabulary["file"], fix=RECOPY)
    found = None
    if vocabulary["found"]:
        found = export_arrays.read_npy(
            export_checks.read_listed(folder, manifest, vocabulary["found"]),
            folder / vocabulary["found"], (len(vocab),), "b")
    relation_vocab = None
    if structures["relations"]:
        relation_vocab = _built(folder / structures["relations"], "structures.relations",
                                lambda: RelationVocabulary.load(folder / structures["relations"]))
    options = dict(
        lowercase_fallback=vocabulary["lowercase_fallback"], found=found,
        relation_vocab=relation_vocab, tokenizer=tokenizer or description["tokenizer"],
        text_parser=text_parser or structures["text_parser"], buckets=description["buckets"],
        bucket_step=description["bucket_step"], parse_cache_dir=parse_cache_dir,
        dim=description["dim"], name=f"export-{folder.resolve().name}-{manifest.sha256[:12]}",
        max_length=max_length, long_sentences=long_sentences, token_budget=token_budget)
    if tokenizer is None and description["tokenizer"] not in TOKENIZERS:
        raise ExportError(f"field tokenizer is {description['tokenizer']!r}, not one of "
                          f"{', '.join(TOKENIZERS)}", path=source, fix=RECOPY)
    from jaxenc.models.registry import structure_spec

    model = description["model"]
    _built(source, "model", lambda: structure_spec(ml_collections.ConfigDict(model)))
    shell = Encoder(model, {}, vocab, **options)  # a ConfigError here names a load argument
    expected = _built(source, "model", lambda: _parameter_shapes(shell))
    npz = folder / description["params"]["npz"]
    flat = export_arrays.read_npz(
        export_checks.read_listed(folder, manifest, description["params"]["npz"]), npz,
        lambda headers: _check_shapes(headers, expected, npz, "model"))
    head = None
    if description.get("head"):
        head = _read_head(folder, manifest, description)
    return Encoder(model, jax.device_put(unflatten(flat)), vocab, head=head,
                   **options)


def read_description(folder: Path) -> dict[str, Any]:
    """format.json of an export folder (a plain file, not a link), checked to be this format's
    version (`export_format.ExportVersionError`, also a ConfigError); its fields are checked with
    the whole export (`export_checks.check`)."""
    path = folder / FORMAT_FILE
    if not os.path.lexists(path):
        raise ExportError(f"not a jaxenc encoder export (no {FORMAT_FILE})", path=folder,
                          fix="pass a folder written by `python -m jaxenc export WORKDIR OUT`")
    return export_checks.parse_description(export_checks.read_file(path), path)


def _read_head(folder: Path, manifest: export_checks.Manifest,
               description: dict[str, Any]) -> prediction.Head:
    """The task head of head.npz, its arrays checked against format.json "head" first."""
    source = folder / FORMAT_FILE
    shell = _built(source, "head", lambda: prediction.Head.from_description(
        description["head"], {}))
    dim = description["dim"]

    def shapes() -> dict[str, jax.ShapeDtypeStruct]:
        vector = jax.ShapeDtypeStruct((1, dim), np.float32)
        second = None if shell.kind == "single" else vector
        return flatten(jax.eval_shape(
            lambda u, v: shell.module.init(jax.random.key(0), u, v), vector, second)["params"])

    expected = _built(source, "head", shapes)
    path = folder / description["head"]["file"]
    flat = export_arrays.read_npz(
        export_checks.read_listed(folder, manifest, description["head"]["file"]), path,
        lambda headers: _check_shapes(headers, expected, path, "head"))
    return prediction.Head.from_description(description["head"], unflatten(flat))


def _built(source: Path, field: str, build: Callable[[], Any]) -> Any:
    """`build()`, whose inputs come from the export: whatever it raises is an ExportError naming
    `source` and `field` (the builders were written for trusted input, not for an export's)."""
    try:
        return build()
    except ExportError:
        raise
    except Exception as error:  # untrusted input: any failure refuses it
        text = str(error).splitlines()[0][:200] if str(error) else ""
        raise ExportError(f"{field} cannot be used ({type(error).__name__}: {text})",
                          path=source, fix=RECOPY) from None


def _parameter_shapes(encoder: Encoder) -> dict[str, jax.ShapeDtypeStruct]:
    """{"a/b": shape and dtype} of the parameters of `encoder`'s model, as initialising it
    gives them (`jax.eval_shape`: nothing is allocated)."""
    from jaxenc.models.registry import build_encoder

    module = build_encoder(encoder.model_config, len(encoder.vocab))
    fields = {key: value for key, value in encoder.example_batch(encoder.buckets[0], 1).items()
              if key != INDEX}
    shapes = jax.eval_shape(lambda: module.init(jax.random.key(0), fields, train=False))
    return flatten(shapes["params"])


def _check_shapes(headers: dict[str, export_arrays.ArrayHeader],
                  expected: dict[str, jax.ShapeDtypeStruct], path: Path, by: str) -> None:
    """Refuses array headers other than `expected` (keys, shapes, dtypes), naming the first."""
    given = {key: (header.shape, np.dtype(header.dtype.newbyteorder("=")))
             for key, header in headers.items()}
    wanted = {key: (tuple(leaf.shape), np.dtype(leaf.dtype)) for key, leaf in expected.items()}
    if given != wanted:
        key = sorted(set(given) ^ set(wanted) or
                     {key for key in given if given[key] != wanted[key]})[0]
        show = lambda entry: f"{entry[1]}{list(entry[0])}" if entry else "missing"
        raise ExportError(f"array {key!r} is {show(given.get(key))}, format.json {by} needs "
                          f"{show(wanted.get(key))}", path=path, fix=RECOPY)
