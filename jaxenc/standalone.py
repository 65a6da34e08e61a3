"""Read a jaxenc encoder export with jax and numpy alone, and check an export's files.

This module imports the standard library, numpy and `jaxenc.errors` only (jax when a function
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

An export is data: JSON, text, `.npy` / `.npz` arrays, orbax arrays and serialised
`jax.export` functions. Nothing in it is imported or evaluated as Python. Both readers (this
one and `jaxenc.load`) and `python -m jaxenc verify` first run the same checks (`check`):

- no file or folder inside the export may be a symbolic link, nor anything but a plain file or
  folder (the export folder given may itself be a link);
- every name in the manifest and every path in format.json is relative, without `..`, `.` or
  empty parts, backslashes or drive letters, and names a file (or folder) the manifest lists;
- every file of the folder is listed in the manifest, jaxenc_manifest.json, with its size and
  SHA-256, and is refused when it differs;
- format.json is this format's version and has every field the readers use, of its type, its
  numbers within this module's caps (MAX_*: buckets, batch size, widths, vocabulary, layers),
  increasing buckets with one function each (`check_description`);
- the arrays' headers are read before their data (`check_arrays`): stored `.npy` members only
  (a compressed member is refused, so nothing is expanded), numeric dtypes only (no pickle),
  each declared shape exactly the bytes that follow, the word table float[vocabulary.size, d],
  found.npy bool[vocabulary.size].

Reading an array then allocates its declared bytes, at most the file's size, and refuses nan or
inf. This reader also checks that each function takes params.npz's arrays (shapes, dtypes) and
gives float32[batch_size, dim]; `jaxenc.load` checks every array against its model instead.

The manifest's digest is the SHA-256 of the bytes of jaxenc_manifest.json, as `sha256sum` prints
it; since the manifest holds the SHA-256 of every other file, that one digest pins the whole
export. `load(folder, sha256=digest)` and `jaxenc.load(folder, sha256=digest)` refuse an export
whose manifest has another digest; `python -m jaxenc verify FOLDER` checks every file and prints
the digest. Every refusal is an `ExportError`, a one-line `jaxenc.errors.DataError` naming the
file, the field and the fix.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import re
import stat
import struct
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path, PureWindowsPath
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from jaxenc.errors import ConfigError, DataError

FORMAT_NAME = "jaxenc-encoder"
FORMAT_VERSION = 1
FORMAT_FILE = "format.json"
MANIFEST_FILE = "jaxenc_manifest.json"
PARAMS_NPZ = "params.npz"
SEPARATOR = "/"  # params.npz keys: the path of each leaf in the nested dicts, "embed/embedding"
EMBEDDING = "embed/embedding"  # the word table, float[vocabulary.size, d]

# Sane absolute caps on format.json's numbers (`check_description`): a bucket's tokens, a batch's
# rows, a vector's or layer's width, the words of a vocabulary, a model's layer counts.
MAX_BUCKET_LENGTH = 4096
MAX_BATCH_SIZE = 4096
MAX_DIM = 1 << 16
MAX_VOCABULARY = 1 << 26
MAX_MODEL_NUMBER = 1 << 20
MAX_LAYERS = 256
_LAYER_COUNTS = ("num_layers", "num_levels")
_ARRAY_KINDS = "biuf"  # bool, integer and floating-point arrays; no object, string or record

_HEX_DIGEST = re.compile("[0-9a-f]{64}")
_CHUNK = 1 << 20
_RECOPY = "copy the export again from its source, or export the training run again"
_LINK = ("a symbolic link inside an export (its readers read plain files only, so that nothing "
         "outside the folder is read)")
_UNLINK = f"{_RECOPY}, following no links"


class ExportError(DataError):
    """A missing, damaged, unsafe or incompatible export file (one line naming it)."""


class ExportVersionError(ExportError, ConfigError):
    """An export of another format version than this reader's (also a ConfigError)."""


class Manifest(NamedTuple):
    """An export's jaxenc_manifest.json: `files` maps each relative name to (size, sha256);
    `sha256` is the digest of the manifest file's bytes."""

    files: dict[str, tuple[int, str]]
    sha256: str


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
            f"reads version {FORMAT_VERSION} (fix: upgrade jaxenc: pip install -U jaxenc)")


def check_name(name: Any, *, source: Path, field: str) -> str:
    """`name` if it is a plain relative path that stays inside the export folder (module doc),
    else an ExportError naming the file `source` and its `field` that recorded it."""
    parts = name.split("/") if isinstance(name, str) else []
    if (not parts or any(part in ("", ".", "..") for part in parts) or "\\" in name
            or "\0" in name or PureWindowsPath(name).drive):
        raise ExportError(f"{field} records the path {name!r}, which leaves the export folder "
                          "or is no plain relative path (the readers read inside it only)",
                          path=source, fix=_RECOPY)
    return name


def open_file(path: Path) -> BinaryIO:
    """The plain file `path` opened for reading, refusing a symbolic link or anything else."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise ExportError("missing (the export is incomplete)", path=path, fix=_RECOPY) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ExportError(_LINK, path=path, fix=_UNLINK) from None
        raise ExportError(f"cannot be read as a plain file ({error.strerror})", path=path,
                          fix=_RECOPY) from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise ExportError("not a plain file", path=path, fix=_RECOPY)
    return open(descriptor, "rb")


def read_file(path: Path) -> bytes:
    """The bytes of the plain file `path` (`open_file`)."""
    with open_file(path) as file:
        return file.read()


def _existing_folder(folder: str | os.PathLike) -> Path:
    """`folder` as a Path, refused unless it is a folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ExportError("not a folder", path=folder,
                          fix="pass a folder written by `python -m jaxenc export WORKDIR OUT`")
    return folder


def check_folder(folder: str | os.PathLike) -> list[str]:
    """The relative names of the plain files inside the export `folder`, after refusing every
    symbolic link and every entry that is neither a plain file nor a folder."""
    folder = _existing_folder(folder)
    files = []
    for root, folders, names in os.walk(folder):
        for name in sorted(folders + names):
            path = Path(root) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise ExportError(_LINK, path=path, fix=_UNLINK)
            if stat.S_ISREG(mode):
                files.append(path.relative_to(folder).as_posix())
            elif not stat.S_ISDIR(mode):
                raise ExportError("neither a plain file nor a folder", path=path, fix=_RECOPY)
    return sorted(files)


def read_manifest(folder: str | os.PathLike, sha256: str | None = None) -> Manifest:
    """The manifest of the export `folder`, its names checked (module doc) and, with `sha256`,
    its digest compared with that one."""
    folder = _existing_folder(folder)
    path = folder / MANIFEST_FILE
    if not os.path.lexists(path):
        raise ExportError(f"no {MANIFEST_FILE}: an incomplete export", path=folder,
                          fix="export the training run again")
    data = read_file(path)
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None:
        expected = sha256.strip().lower() if isinstance(sha256, str) else sha256
        if not isinstance(expected, str) or not _HEX_DIGEST.fullmatch(expected):
            raise ConfigError(f"sha256={sha256!r} is not a SHA-256 digest (fix: pass the 64 hex "
                              "digits `python -m jaxenc verify FOLDER` prints)")
        if digest != expected:
            raise ExportError(f"its SHA-256 is {digest}, not the pinned {expected}: another or "
                              "an altered export", path=path,
                              fix="load the export that digest names, or pin this one's digest "
                              "(python -m jaxenc verify FOLDER) if you trust it")
    try:
        entries = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise ExportError(f"not a readable manifest ({error})", path=path, fix=_RECOPY) from None
    well_formed = isinstance(entries, dict) and all(
        isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
        and entry[0] >= 0 and isinstance(entry[1], str) and _HEX_DIGEST.fullmatch(entry[1])
        for entry in entries.values())
    if not well_formed:
        raise ExportError("not a manifest: {name: [size, sha256], ...} expected", path=path,
                          fix=_RECOPY)
    files = {check_name(name, source=path, field="an entry"): (size, sha)
             for name, (size, sha) in entries.items()}
    return Manifest(files, digest)


def file_problem(path: Path, size: int, sha256: str, data: bytes | None = None) -> str | None:
    """What differs between the file `path` (or its bytes `data`, when read already) and its
    manifest entry (`size`, `sha256`), or None. A large file is hashed in chunks."""
    if data is None and not os.path.lexists(path):
        return "missing"
    if data is None:
        digest, length = hashlib.sha256(), 0
        with open_file(path) as file:
            while chunk := file.read(_CHUNK):
                digest.update(chunk)
                length += len(chunk)
        actual = (length, digest.hexdigest())
    else:
        actual = (len(data), hashlib.sha256(data).hexdigest())
    if actual[0] != size:
        return f"{actual[0]} bytes, {size} were written (truncated or altered)"
    if actual[1] != sha256:
        return "its content changed since it was written (checksum)"
    return None


class Checked(NamedTuple):
    """A checked export: its manifest and its format.json."""

    manifest: Manifest
    description: dict


def verify(folder: str | os.PathLike, sha256: str | None = None) -> Manifest:
    """Checks the whole export `folder` as both readers do before reading it (`check`). Returns
    the manifest; raises ExportError naming the first bad file and field."""
    return check(folder, sha256).manifest


def check(folder: str | os.PathLike, sha256: str | None = None) -> Checked:
    """Checks the whole export `folder`: no links (module doc), a manifest whose digest is
    `sha256` when given, every file of the folder listed in it, every listed file of its size
    and SHA-256, format.json (`check_description`) and the headers of the arrays it names
    (`check_arrays`). Raises ExportError naming the first bad file (and field)."""
    manifest = read_manifest(folder, sha256)
    present = check_folder(folder)
    folder = Path(folder)
    unlisted = sorted(set(present) - set(manifest.files) - {MANIFEST_FILE})
    if unlisted:
        raise ExportError(f"not in the export's {MANIFEST_FILE}, so not verifiable",
                          path=folder / unlisted[0], fix=f"remove it, or {_RECOPY}")
    for name, (size, digest) in sorted(manifest.files.items()):
        problem = file_problem(folder / name, size, digest)
        if problem:
            raise ExportError(f"export file is damaged: {problem}", path=folder / name,
                              fix=_RECOPY)
    if FORMAT_FILE not in manifest.files:
        raise ExportError(f"not in the export's {MANIFEST_FILE}, so not verifiable",
                          path=folder / FORMAT_FILE, fix=_RECOPY)
    description = parse_description(read_file(folder / FORMAT_FILE), folder / FORMAT_FILE)
    check_description(folder, description, manifest)
    check_arrays(folder, description)
    return Checked(manifest, description)


def parse_description(data: bytes, path: Path) -> dict:
    """format.json's bytes as a dict of this format's version (else ExportError)."""
    try:
        description = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise ExportError(f"not readable JSON ({error})", path=path, fix=_RECOPY) from None
    problem = version_problem(description)
    if problem:
        raise ExportVersionError(problem, path=path.parent)
    return description


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _field(description: dict, dotted: str, types: type | tuple[type, ...], source: Path) -> Any:
    """format.json's field `dotted` ("a.b"), refused unless it is one of `types`."""
    node: Any = description
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        if not isinstance(node, dict):
            raise ExportError(f"field {'.'.join(parts[:index])} is {_show(node)}, not an object",
                              path=source, fix=_RECOPY)
        if part not in node:
            raise ExportError(f"field {'.'.join(parts[:index + 1])} is missing", path=source,
                              fix=_RECOPY)
        node = node[part]
    if not isinstance(node, types) or (isinstance(node, bool) and bool not in (
            types if isinstance(types, tuple) else (types,))):
        names = " or ".join(kind.__name__ if kind is not type(None) else "null" for kind in (
            types if isinstance(types, tuple) else (types,)))
        raise ExportError(f"field {dotted} is {_show(node)}, not {names}", path=source,
                          fix=_RECOPY)
    return node


def _whole(value: Any, where: str, low: int, high: int, source: Path) -> int:
    """`value` if it is a whole number from `low` to `high`, else ExportError naming `where`."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ExportError(f"field {where} is {_show(value)}, not a whole number from {low} to "
                          f"{high}", path=source, fix=_RECOPY)
    return value


def check_description(folder: Path, description: dict, manifest: Manifest) -> None:
    """Refuses a format.json that lacks a field the readers use, has one of another type, a
    number beyond this module's caps (MAX_*), buckets that are not increasing or that differ
    from the functions', or a path that leaves the folder or names no file of the manifest."""
    source = folder / FORMAT_FILE
    field = lambda dotted, *types: _field(description, dotted, types, source)
    model = field("model", dict)
    field("model.name", str)
    for key, value in model.items():
        if isinstance(value, int) and not isinstance(value, bool):
            high = MAX_LAYERS if key in _LAYER_COUNTS else MAX_MODEL_NUMBER
            _whole(value, f"model.{key}", -MAX_MODEL_NUMBER if high > MAX_LAYERS else 0, high,
                   source)
    _whole(field("dim", int), "dim", 1, MAX_DIM, source)
    _whole(field("vocabulary.size", int), "vocabulary.size", 1, MAX_VOCABULARY, source)
    field("vocabulary.file", str)
    field("vocabulary.found", str, type(None))
    field("vocabulary.lowercase", bool)
    field("vocabulary.lowercase_fallback", bool)
    field("tokenizer", str)
    if not all(isinstance(item, str) for item in field("structures.fields", list)):
        raise ExportError("field structures.fields holds a non-string", path=source, fix=_RECOPY)
    for index, token in enumerate(field("structures.prefix_tokens", list)):
        _whole(token, f"structures.prefix_tokens[{index}]", 0, MAX_VOCABULARY, source)
    for name in ("parser", "text_parser", "relations"):
        field(f"structures.{name}", str, type(None))
    buckets = field("buckets", list)
    for index, length in enumerate(buckets):
        _whole(length, f"buckets[{index}]", 1, MAX_BUCKET_LENGTH, source)
    if not buckets or buckets != sorted(set(buckets)):
        raise ExportError(f"field buckets is {_show(buckets)}, not increasing bucket lengths",
                          path=source, fix=_RECOPY)
    _whole(field("bucket_step", int), "bucket_step", 1, MAX_BUCKET_LENGTH, source)
    field("params.npz", str)
    _whole(field("functions.batch_size", int), "functions.batch_size", 1, MAX_BATCH_SIZE,
           source)
    functions = field("functions.buckets", dict)
    if sorted(functions) != sorted(map(str, buckets)):
        raise ExportError(f"field functions.buckets has {_show(sorted(functions))}, not one "
                          f"function per bucket of {_show(buckets)}", path=source, fix=_RECOPY)
    for length in functions:
        field(f"functions.buckets.{length}.file", str)
        field(f"functions.buckets.{length}.inputs", dict)
    if field("head", dict, type(None)) is not None:
        field("head.file", str)
        _whole(field("head.num_classes", int), "head.num_classes", 1, MAX_DIM, source)
    check_recorded_paths(folder, description, manifest)


class ArrayHeader(NamedTuple):
    """What a .npy header declares."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool


def _npy_header(file: BinaryIO, size: int, path: Path, where: str) -> ArrayHeader:
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
                          fix=_RECOPY) from None
    if (dtype.hasobject or dtype.kind not in _ARRAY_KINDS or dtype.fields is not None
            or dtype.subdtype is not None):
        raise ExportError(f"{where} has dtype {dtype}, not numbers (the readers read numeric "
                          "arrays only, never pickled objects)", path=path, fix=_RECOPY)
    declared, held = math.prod(shape) * dtype.itemsize, size - file.tell()
    if declared != held:
        raise ExportError(f"{where} declares {dtype}{list(shape)}, {declared} bytes, but holds "
                          f"{held}", path=path, fix=_RECOPY)
    return ArrayHeader(tuple(shape), dtype, bool(fortran_order))


def _array(file: BinaryIO, header: ArrayHeader, path: Path, where: str) -> np.ndarray:
    """The data after `header` in `file` (finite, when floating-point), in native byte order."""
    size = math.prod(header.shape) * header.dtype.itemsize
    data = file.read(size)
    if len(data) != size:
        raise ExportError(f"{where} is cut short", path=path, fix=_RECOPY)
    array = np.frombuffer(data, header.dtype).reshape(
        header.shape, order="F" if header.fortran_order else "C")
    array = array.astype(header.dtype.newbyteorder("="), copy=False)
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ExportError(f"{where} holds nan or inf", path=path, fix=_RECOPY)
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
            raise ExportError(f"member {_show(info.filename)} is not one <key>.npy array",
                              path=path, fix=_RECOPY)
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1:
            raise ExportError(f"member {_show(info.filename)} is compressed or encrypted (the "
                              "readers expand nothing: np.savez stores arrays as they are)",
                              path=path, fix=_RECOPY)
        if info.file_size != info.compress_size or info.file_size > size:
            raise ExportError(f"member {_show(info.filename)} declares {info.file_size} bytes "
                              f"stored in {info.compress_size} of the file's {size}", path=path,
                              fix=_RECOPY)
        members[key] = info
    return members


def npz_headers(file: BinaryIO, size: int, path: Path) -> dict[str, ArrayHeader]:
    """key -> ArrayHeader of every array of the .npz `file` (`size` bytes), its data unread."""
    try:
        with zipfile.ZipFile(file) as archive:
            headers = {}
            for key, info in _members(archive, size, path).items():
                with archive.open(info) as member:
                    headers[key] = _npy_header(member, info.file_size, path, f"array {key!r}")
            return headers
    except ExportError:
        raise
    except _ZIP_ERRORS as error:
        raise ExportError(f"not a readable .npz archive ({type(error).__name__}: {error})",
                          path=path, fix=_RECOPY) from None


def read_npz(data: bytes, path: Path,
             check_headers: Callable[[dict[str, ArrayHeader]], None] | None = None
             ) -> dict[str, np.ndarray]:
    """The arrays of the .npz bytes `data` (`_members`, `_npy_header`), after
    `check_headers({key: ArrayHeader})` (a callable raising ExportError) has accepted their
    declared shapes: nothing is allocated before. At most len(data) bytes are allocated."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = _members(archive, len(data), path)
            headers = {}
            for key, info in members.items():
                with archive.open(info) as member:
                    headers[key] = _npy_header(member, info.file_size, path, f"array {key!r}")
            if check_headers is not None:
                check_headers(headers)
            arrays = {}
            for key, info in members.items():
                with archive.open(info) as member:
                    _npy_header(member, info.file_size, path, f"array {key!r}")
                    arrays[key] = _array(member, headers[key], path, f"array {key!r}")
            return arrays
    except ExportError:
        raise
    except _ZIP_ERRORS as error:
        raise ExportError(f"not a readable .npz archive ({type(error).__name__}: {error})",
                          path=path, fix=_RECOPY) from None


def read_npy(data: bytes, path: Path, shape: tuple[int, ...], kind: str) -> np.ndarray:
    """The array of the .npy bytes `data`, refused unless it has `shape` and dtype kind `kind`
    (checked before it is read)."""
    file = io.BytesIO(data)
    header = _npy_header(file, len(data), path, "the array")
    if header.shape != shape or header.dtype.kind != kind:
        raise ExportError(f"the array is {header.dtype}{list(header.shape)}, not "
                          f"{np.dtype(kind)}{list(shape)}", path=path, fix=_RECOPY)
    return _array(file, header, path, "the array")


def check_table(headers: Mapping[str, ArrayHeader], description: dict, path: Path) -> None:
    """Refuses params.npz headers without the word table float[vocabulary.size, d] (d at most
    MAX_DIM)."""
    size = description["vocabulary"]["size"]
    table = headers.get(EMBEDDING)
    if (table is None or len(table.shape) != 2 or table.shape[0] != size
            or not 1 <= table.shape[1] <= MAX_DIM or table.dtype.kind != "f"):
        found = f"{table.dtype}{list(table.shape)}" if table else "missing"
        raise ExportError(f"array {EMBEDDING!r} is {found}, not the word table "
                          f"float[{size}, d] of format.json vocabulary.size {size}", path=path,
                          fix=_RECOPY)


def check_arrays(folder: Path, description: dict) -> None:
    """Refuses array files whose headers do not fit format.json (`check_table`; found.npy
    bool[vocabulary.size]; head.npz readable), reading their headers only."""
    npz = folder / description["params"]["npz"]
    with open_file(npz) as file:
        check_table(npz_headers(file, os.fstat(file.fileno()).st_size, npz), description, npz)
    found = description["vocabulary"]["found"]
    if found is not None:
        path = folder / found
        with open_file(path) as file:
            header = _npy_header(file, os.fstat(file.fileno()).st_size, path, "the array")
        size = description["vocabulary"]["size"]
        if header.shape != (size,) or header.dtype.kind != "b":
            raise ExportError(f"the array is {header.dtype}{list(header.shape)}, not "
                              f"bool[{size}] (format.json vocabulary.size)", path=path,
                              fix=_RECOPY)
    if description.get("head") is not None:
        path = folder / description["head"]["file"]
        with open_file(path) as file:
            npz_headers(file, os.fstat(file.fileno()).st_size, path)


def recorded_paths(description: dict) -> dict[str, Any]:
    """Where in format.json -> the relative path recorded there (files and the orbax folder)."""
    section = lambda parent, key: parent.get(key) if isinstance(parent.get(key), dict) else {}
    vocabulary, structures = section(description, "vocabulary"), section(description, "structures")
    params, functions = section(description, "params"), section(description, "functions")
    paths = {"vocabulary.file": vocabulary.get("file"), "vocabulary.found": vocabulary.get("found"),
             "structures.relations": structures.get("relations"),
             "params.npz": params.get("npz"), "params.orbax": params.get("orbax"),
             "head.file": section(description, "head").get("file")}
    buckets = section(functions, "buckets")
    paths.update({f"functions.buckets.{length}.file": section(buckets, length).get("file", "")
                  for length in buckets})
    return {where: path for where, path in paths.items() if path is not None}


def check_recorded_paths(folder: Path, description: dict, manifest: Manifest) -> None:
    """Refuses a format.json path that leaves the export folder, or that names neither a file
    of the manifest nor a folder of such files."""
    for where, name in recorded_paths(description).items():
        check_name(name, source=folder / FORMAT_FILE, field=where)
        if name not in manifest.files and not any(
                listed.startswith(f"{name}/") for listed in manifest.files):
            raise ExportError(f"not in the export's {MANIFEST_FILE}, so not verifiable "
                              f"({FORMAT_FILE} {where} names it)", path=folder / name,
                              fix=_RECOPY)


def read_listed(folder: Path, manifest: Manifest, name: str) -> bytes:
    """The bytes of the export's file `name`, checked against the manifest."""
    check_name(name, source=folder, field="a read")
    path = folder / name
    if name not in manifest.files:
        raise ExportError(f"not in the export's {MANIFEST_FILE}, so not verifiable",
                          path=path, fix=_RECOPY)
    data = read_file(path)
    problem = file_problem(path, *manifest.files[name], data=data)
    if problem:
        raise ExportError(f"export file is damaged: {problem}", path=path, fix=_RECOPY)
    return data


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
                                  path=self.folder / name, fix=_RECOPY) from None
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
                              fix=_RECOPY) from None
        given = {SEPARATOR.join(str(key.key) for key in where): (leaf.shape, leaf.dtype)
                 for where, leaf in jax.tree_util.tree_flatten_with_path(self.params)[0]}
        if given != expected:
            key = sorted(set(given.items()) ^ set(expected.items()), key=str)[0][0]
            raise ExportError(f"the function takes params {key!r} as "
                              f"{expected.get(key, 'missing')}, params.npz holds "
                              f"{given.get(key, 'nothing')}", path=path, fix=_RECOPY)
        dim = (self.batch_size, self.description["dim"])
        if tuple(output.shape) != dim or output.dtype != np.float32:
            raise ExportError(f"the function gives {output.dtype}{list(output.shape)}, not "
                              f"float32{list(dim)} (format.json functions.batch_size, dim)",
                              path=path, fix=_RECOPY)

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
