"""Reading an export's `.npy` and `.npz` arrays with numpy, each header checked before its data.

Stored `.npy` members only (a compressed member is refused, so nothing is expanded), numeric
dtypes only (no pickle), each declared shape exactly the bytes that follow; reading an array
then allocates its declared bytes, at most the file's size, and refuses nan or inf. Every
refusal is an `ExportError` naming the file.
"""

from __future__ import annotations

import io
import math
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np

from jaxenc.export_format import RECOPY, ExportError, show

_ARRAY_KINDS = "biuf"  # bool, integer and floating-point arrays; no object, string or record


class ArrayHeader(NamedTuple):
    """What a .npy header declares."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool


def npy_header(file: BinaryIO, size: int, path: Path, where: str) -> ArrayHeader:
    """The header of the .npy data `file` (`size` bytes, header included), refused unless its
    dtype is numbers (`_ARRAY_KINDS`) and its shape's bytes are exactly the data after it."""
    try:
        version = np.lib.format.read_magic(file)
        read = {(1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read is None:
            raise ValueError(f"npy format version {version}")
        shape, fortran_order, dtype = read(file)
    except (ValueError, TypeError, SyntaxError, EOFError, OSError, struct.error,
            zipfile.BadZipFile) as error:
        raise ExportError(f"{where}: not a readable .npy header ({error})", path=path,
                          fix=RECOPY) from None
    if (dtype.hasobject or dtype.kind not in _ARRAY_KINDS or dtype.fields is not None
            or dtype.subdtype is not None):
        raise ExportError(f"{where} has dtype {dtype}, not numbers (the readers read numeric "
                          "arrays only, never pickled objects)", path=path, fix=RECOPY)
    declared, held = math.prod(shape) * dtype.itemsize, size - file.tell()
    if declared != held:
        raise ExportError(f"{where} declares {dtype}{list(shape)}, {declared} bytes, but holds "
                          f"{held}", path=path, fix=RECOPY)
    return ArrayHeader(tuple(shape), dtype, bool(fortran_order))


def _array(file: BinaryIO, header: ArrayHeader, path: Path, where: str) -> np.ndarray:
    """The data after `header` in `file` (finite, when floating-point), in native byte order."""
    size = math.prod(header.shape) * header.dtype.itemsize
    data = file.read(size)
    if len(data) != size:
        raise ExportError(f"{where} is cut short", path=path, fix=RECOPY)
    array = np.frombuffer(data, header.dtype).reshape(
        header.shape, order="F" if header.fortran_order else "C")
    array = array.astype(header.dtype.newbyteorder("="), copy=False)
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ExportError(f"{where} holds nan or inf", path=path, fix=RECOPY)
    return array


_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError,
               NotImplementedError, struct.error, UnicodeDecodeError, OverflowError)


def _members(archive: zipfile.ZipFile, size: int, path: Path) -> dict[str, zipfile.ZipInfo]:
    """key -> member of an .npz archive of `size` bytes; refused unless every member is a
    stored (uncompressed, unencrypted) `<key>.npy` whose size fits the archive."""
    members: dict[str, zipfile.ZipInfo] = {}
    for info in archive.infolist():
        key = info.filename[:-len(".npy")]
        if not info.filename.endswith(".npy") or not key or key in members:
            raise ExportError(f"member {show(info.filename)} is not one <key>.npy array",
                              path=path, fix=RECOPY)
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1:
            raise ExportError(f"member {show(info.filename)} is compressed or encrypted (the "
                              "readers expand nothing: np.savez stores arrays as they are)",
                              path=path, fix=RECOPY)
        if info.file_size != info.compress_size or info.file_size > size:
            raise ExportError(f"member {show(info.filename)} declares {info.file_size} bytes "
                              f"stored in {info.compress_size} of the file's {size}", path=path,
                              fix=RECOPY)
        members[key] = info
    return members


def _headers(archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo],
             path: Path) -> dict[str, ArrayHeader]:
    """key -> ArrayHeader of each member (`npy_header`), its data unread."""
    headers = {}
    for key, info in members.items():
        with archive.open(info) as member:
            headers[key] = npy_header(member, info.file_size, path, f"array {key!r}")
    return headers


def npz_headers(file: BinaryIO, size: int, path: Path) -> dict[str, ArrayHeader]:
    """key -> ArrayHeader of every array of the .npz `file` (`size` bytes), its data unread."""
    try:
        with zipfile.ZipFile(file) as archive:
            return _headers(archive, _members(archive, size, path), path)
    except ExportError:
        raise
    except _ZIP_ERRORS as error:
        raise ExportError(f"not a readable .npz archive ({type(error).__name__}: {error})",
                          path=path, fix=RECOPY) from None


def read_npz(data: bytes, path: Path,
             check_headers: Callable[[dict[str, ArrayHeader]], None] | None = None
             ) -> dict[str, np.ndarray]:
    """The arrays of the .npz bytes `data` (`_members`, `npy_header`), after
    `check_headers({key: ArrayHeader})` (a callable raising ExportError) has accepted their
    declared shapes: nothing is allocated before. At most len(data) bytes are allocated."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = _members(archive, len(data), path)
            headers = _headers(archive, members, path)
            if check_headers is not None:
                check_headers(headers)
            arrays = {}
            for key, info in members.items():
                with archive.open(info) as member:
                    npy_header(member, info.file_size, path, f"array {key!r}")
                    arrays[key] = _array(member, headers[key], path, f"array {key!r}")
            return arrays
    except ExportError:
        raise
    except _ZIP_ERRORS as error:
        raise ExportError(f"not a readable .npz archive ({type(error).__name__}: {error})",
                          path=path, fix=RECOPY) from None


def read_npy(data: bytes, path: Path, shape: tuple[int, ...], kind: str) -> np.ndarray:
    """The array of the .npy bytes `data`, refused unless it has `shape` and dtype kind `kind`
    (checked before it is read)."""
    file = io.BytesIO(data)
    header = npy_header(file, len(data), path, "the array")
    if header.shape != shape or header.dtype.kind != kind:
        raise ExportError(f"the array is {header.dtype}{list(header.shape)}, not "
                          f"{np.dtype(kind)}{list(shape)}", path=path, fix=RECOPY)
    return _array(file, header, path, "the array")
