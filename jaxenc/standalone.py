"""Read a jaxenc encoder export with jax and numpy alone: this file imports nothing of jaxenc.

`jaxenc.export` copies it into every export folder as `jax_encoder.py`. Beside it:

    import jax_encoder
    encoder = jax_encoder.load("path/to/export")
    vectors = encoder(fields)  # float32[B, D], one row per row of the batch

`fields` is one batch of bucket length L (one of `encoder.buckets`) and B = `encoder.batch_size`
rows, as `jaxenc.load(path).featurize(sentences, batch_size=B)` gives it, without its "index":
`tokens` int32[B, L] (vocab.txt ids, the model's prefix tokens first), `lengths` int32[B] (0 for
filler rows) and the model's structure fields; `encoder.inputs(L)` lists every field's shape and
dtype. Models without structure fields (bag, transformer, disan, meanmax_aae) need only the
tokens and lengths (vocab.txt ids, unknown words looked up lower-cased when format.json's
`lowercase_fallback` says so). A sentence longer than the largest bucket has no function here
(jaxenc's `encode` compiles a longer bucket): cut its ids to the bucket, or encode it with jaxenc.
Each bucket's function is a `jax.export.Exported`
taking `(params, fields)`: pass fine-tuned params to `encoder(fields, params)`; an export made
with `differentiable=True` can be differentiated with respect to them.

Every file read is first checked against the export's manifest (size and SHA-256): a truncated
or altered file raises `ExportError`, never loads.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

FORMAT_NAME = "jaxenc-encoder"
FORMAT_VERSION = 1
FORMAT_FILE = "format.json"
MANIFEST_FILE = "jaxenc_manifest.json"
PARAMS_NPZ = "params.npz"
SEPARATOR = "/"  # params.npz keys: the path of each leaf in the nested dicts, "embed/embedding"


class ExportError(ValueError):
    """A missing, damaged or incompatible export file (one line)."""


def version_problem(description: Any) -> str | None:
    """What is wrong with format.json's `format` / `format_version` for this reader, or None."""
    if not isinstance(description, dict) or description.get("format") != FORMAT_NAME:
        return f"{FORMAT_FILE} does not describe a {FORMAT_NAME} export"
    version = description.get("format_version")
    if version == FORMAT_VERSION:
        return None
    if isinstance(version, int) and version < FORMAT_VERSION:
        return (f"export format version {version} is older than the version {FORMAT_VERSION} "
                "this reader needs (fix: export the training run again with this jaxenc: "
                "python -m jaxenc export WORKDIR OUT)")
    return (f"export format version {version!r} needs a newer reader than this one, which "
            f"reads version {FORMAT_VERSION} (fix: upgrade jaxenc, or use the jax_encoder.py "
            "of that export)")


def unflatten(flat: dict[str, np.ndarray]) -> dict:
    """Nested dicts of params.npz's flat `a/b/c` keys."""
    tree: dict = {}
    for key, value in flat.items():
        *parents, leaf = key.split(SEPARATOR)
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return tree


class JaxEncoder:
    """An export's parameters and per-bucket functions (module doc).

    Attributes:
      folder: the export folder.
      description: format.json.
      params: the encoder's parameters, nested dicts of numpy arrays.
    """

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        manifest = self.folder / MANIFEST_FILE
        if not manifest.is_file():
            raise ExportError(f"{self.folder}: no {MANIFEST_FILE}: not a complete jaxenc export")
        try:
            self._manifest = json.loads(manifest.read_text(encoding="utf-8"))
            self.description = json.loads(self.read(FORMAT_FILE))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ExportError(f"{self.folder}: unreadable JSON ({error})") from None
        problem = version_problem(self.description)
        if problem:
            raise ExportError(f"{self.folder}: {problem}")
        with np.load(io.BytesIO(self.read(PARAMS_NPZ))) as flat:
            self.params = unflatten({key: flat[key] for key in flat.files})
        self._functions: dict[int, Any] = {}

    @property
    def buckets(self) -> tuple[int, ...]:
        """The bucket lengths L that have a function."""
        return tuple(sorted(int(length) for length in self.description["functions"]["buckets"]))

    @property
    def batch_size(self) -> int:
        """B, the rows of every batch."""
        return int(self.description["functions"]["batch_size"])

    def read(self, name: str) -> bytes:
        """The bytes of the export's file `name`, checked against the manifest."""
        if name not in self._manifest:
            raise ExportError(f"{self.folder / name}: not in the export's manifest")
        size, digest = self._manifest[name]
        path = self.folder / name
        if not path.is_file():
            raise ExportError(f"{path}: missing (the export is incomplete)")
        data = path.read_bytes()
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise ExportError(f"{path}: {len(data)} bytes that differ from the {size} the "
                              "manifest records (truncated or altered; copy the export again)")
        return data

    def inputs(self, length: int) -> dict[str, tuple[tuple[int, ...], str]]:
        """field -> (shape, dtype) of a batch of bucket `length`."""
        fields = self._bucket(length)["inputs"]
        return {key: (tuple(spec["shape"]), spec["dtype"]) for key, spec in fields.items()}

    def function(self, length: int) -> Any:
        """The `jax.export.Exported` of bucket `length`: `.call(params, fields)`."""
        if length not in self._functions:
            import jax

            self._functions[length] = jax.export.deserialize(
                bytearray(self.read(self._bucket(length)["file"])))
        return self._functions[length]

    def __call__(self, fields: dict[str, np.ndarray], params: dict | None = None) -> np.ndarray:
        """float32[B, D]: the sentence vectors of one batch (its bucket: the tokens' length)."""
        fields = {key: value for key, value in fields.items() if key != "index"}
        length = int(np.shape(fields["tokens"])[1])
        return np.asarray(self.function(length).call(
            self.params if params is None else params, fields))

    def _bucket(self, length: int) -> dict:
        buckets = self.description["functions"]["buckets"]
        if str(length) not in buckets:
            raise ExportError(f"{self.folder}: no function for bucket length {length} (the "
                              f"export has {', '.join(map(str, self.buckets))}: pad to one, or "
                              "cut longer sentences to the largest)")
        return buckets[str(length)]


def load(folder: str | os.PathLike) -> JaxEncoder:
    """The export in `folder` (module doc)."""
    return JaxEncoder(folder)
