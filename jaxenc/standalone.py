"""Read a jaxenc encoder export with jax and numpy alone.

This module imports the standard library, numpy, `jaxenc.errors` and the export modules that
import nothing more (`export_format`, `export_arrays`, `export_checks`) only (jax when a function
is first called, and with it flatbuffers, which `jax.export` deserialisation needs), never flax,
optax, orbax or the rest of jaxenc: a downstream program with jax and numpy needs nothing else
of jaxenc's dependencies (`pip install --no-deps jaxenc flatbuffers`).

    from jaxenc.standalone import load
    encoder = load("path/to/export", sha256="...")  # sha256: optional, see below
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

Before reading anything, `load` checks the whole export as `jaxenc.load` and `python -m jaxenc
verify` do (`jaxenc.export_checks.check`: links, paths, the manifest, format.json's fields and
caps, the array headers); `sha256` pins the export by its manifest's digest. It also checks that
each function takes params.npz's arrays (shapes, dtypes) and gives float32[batch_size, dim]
(`jaxenc.load` checks every array against its model instead). Every refusal is a
`jaxenc.export_format.ExportError`, a one-line `jaxenc.errors.DataError` naming the file, the
field and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from jaxenc.export_arrays import read_npz
from jaxenc.export_checks import check, check_table, read_listed
from jaxenc.export_format import RECOPY, SEPARATOR, ExportError, unflatten


class JaxEncoder:
    """An export's parameters and per-bucket functions (module doc).

    Attributes:
      folder: the export folder.
      manifest: its manifest (`manifest.sha256`: the digest that pins the export).
      description: format.json.
      params: the encoder's parameters, nested dicts of numpy arrays.
    """

    def __init__(self, folder: str | os.PathLike, *, sha256: str | None = None):
        self.folder = Path(folder)
        self.manifest, self.description = check(self.folder, sha256)
        npz = self.description["params"]["npz"]
        self.params = unflatten(read_npz(
            self.read(npz), self.folder / npz,
            lambda headers: check_table(headers, self.description, self.folder / npz)))
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
        return read_listed(self.folder, self.manifest, name)

    def inputs(self, length: int) -> dict[str, tuple[tuple[int, ...], str]]:
        """field -> (shape, dtype) of a batch of bucket `length`."""
        fields = self._bucket(length)["inputs"]
        return {key: (tuple(spec["shape"]), spec["dtype"]) for key, spec in fields.items()}

    def function(self, length: int) -> Any:
        """The `jax.export.Exported` of bucket `length`: `.call(params, fields)`."""
        if length not in self._functions:
            import jax

            name = self._bucket(length)["file"]
            try:
                function = jax.export.deserialize(bytearray(self.read(name)))
                function.mlir_module()  # its StableHLO, else deserialised when first called
            except ExportError:
                raise
            except Exception as error:  # untrusted bytes: any failure refuses them
                raise ExportError(f"not a serialised jax.export function ({type(error).__name__})",
                                  path=self.folder / name, fix=RECOPY) from None
            self._check_function(function, self.folder / name)
            self._functions[length] = function
        return self._functions[length]

    def _check_function(self, function: Any, path: Path) -> None:
        """Refuses a function whose parameters are not params.npz's arrays (shapes and dtypes)
        or whose output is not float32[batch_size, format.json dim]."""
        import jax

        try:
            (params, _), _ = function.in_tree.unflatten(function.in_avals)
            expected = {SEPARATOR.join(str(key.key) for key in where): (leaf.shape, leaf.dtype)
                        for where, leaf in jax.tree_util.tree_flatten_with_path(params)[0]}
            output = function.out_avals[0]
        except (TypeError, ValueError, AttributeError, IndexError):
            raise ExportError("not an encode function of (params, fields)", path=path,
                              fix=RECOPY) from None
        given = {SEPARATOR.join(str(key.key) for key in where): (leaf.shape, leaf.dtype)
                 for where, leaf in jax.tree_util.tree_flatten_with_path(self.params)[0]}
        if given != expected:
            key = sorted(set(given.items()) ^ set(expected.items()), key=str)[0][0]
            raise ExportError(f"the function takes params {key!r} as "
                              f"{expected.get(key, 'missing')}, params.npz holds "
                              f"{given.get(key, 'nothing')}", path=path, fix=RECOPY)
        dim = (self.batch_size, self.description["dim"])
        if tuple(output.shape) != dim or output.dtype != np.float32:
            raise ExportError(f"the function gives {output.dtype}{list(output.shape)}, not "
                              f"float32{list(dim)} (format.json functions.batch_size, dim)",
                              path=path, fix=RECOPY)

    def __call__(self, fields: dict[str, np.ndarray], params: dict | None = None) -> np.ndarray:
        """float32[B, D]: the sentence vectors of one batch (its bucket: the tokens' length)."""
        fields = {key: value for key, value in fields.items() if key != "index"}
        length = int(np.shape(fields["tokens"])[1])
        return np.asarray(self.function(length).call(
            self.params if params is None else params, fields))

    def _bucket(self, length: int) -> dict:
        buckets = self.description["functions"]["buckets"]
        if str(length) not in buckets:
            raise ExportError(f"no function for bucket length {length} (the export has "
                              f"{', '.join(map(str, self.buckets))})", path=self.folder,
                              fix="pad to one, or cut longer sentences to the largest")
        return buckets[str(length)]


def load(folder: str | os.PathLike, *, sha256: str | None = None) -> JaxEncoder:
    """The export in `folder` (module doc); with `sha256`, only if its manifest has that digest.

    Raises ExportError (a one-line DataError) for an unsafe, incomplete, damaged or incompatible
    export, ConfigError for a `sha256` that is not a SHA-256 digest.
    """
    return JaxEncoder(folder, sha256=sha256)
