"""The checks every reader of a jaxenc encoder export runs first (`check`).

An export is data: JSON, text, `.npy` / `.npz` arrays, orbax arrays and serialised
`jax.export` functions. Nothing in it is imported or evaluated as Python. Both readers
(`jaxenc.standalone.load` and `jaxenc.load`) and `python -m jaxenc verify` first run `check`:

- no file or folder inside the export may be a symbolic link, nor anything but a plain file or
  folder (the export folder given may itself be a link);
- every name in the manifest and every path in format.json is relative, without `..`, `.` or
  empty parts, backslashes or drive letters, and names a file (or folder) the manifest lists;
- every file of the folder is listed in the manifest, jaxenc_manifest.json, with its size and
  SHA-256, and is refused when it differs;
- format.json is this format's version and has every field the readers use, of its type, its
  numbers within the caps of `jaxenc.export_format` (MAX_*: buckets, batch size, widths,
  vocabulary, layers), increasing buckets with one function each (`check_description`);
- the arrays' headers are read before their data (`check_arrays`, `jaxenc.export_arrays`): the
  word table float[vocabulary.size, d], found.npy bool[vocabulary.size].

The manifest's digest is the SHA-256 of the bytes of jaxenc_manifest.json, as `sha256sum` prints
it; since the manifest holds the SHA-256 of every other file, that one digest pins the whole
export. `check(folder, sha256=digest)` refuses an export whose manifest has another digest;
`python -m jaxenc verify FOLDER` checks every file and prints the digest. Every refusal is an
`ExportError`, a one-line `jaxenc.errors.DataError` naming the file, the field and the fix.

This module imports the standard library, numpy and `jaxenc.errors` only (with the other export
modules), like `jaxenc.standalone`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path, PureWindowsPath
from typing import Any, BinaryIO, NamedTuple

from jaxenc.errors import ConfigError
from jaxenc.export_arrays import ArrayHeader, npy_header, npz_headers
from jaxenc.export_format import (
    EMBEDDING,
    FORMAT_FILE,
    MANIFEST_FILE,
    MAX_BATCH_SIZE,
    MAX_BUCKET_LENGTH,
    MAX_DIM,
    MAX_LAYERS,
    MAX_MODEL_NUMBER,
    MAX_VOCABULARY,
    RECOPY,
    ExportError,
    ExportVersionError,
    show,
    version_problem,
)

_LAYER_COUNTS = ("num_layers", "num_levels")
_HEX_DIGEST = re.compile("[0-9a-f]{64}")
_CHUNK = 1 << 20
_LINK = ("a symbolic link inside an export (its readers read plain files only, so that nothing "
         "outside the folder is read)")
_UNLINK = f"{RECOPY}, following no links"


class Manifest(NamedTuple):
    """An export's jaxenc_manifest.json: `files` maps each relative name to (size, sha256);
    `sha256` is the digest of the manifest file's bytes."""

    files: dict[str, tuple[int, str]]
    sha256: str


def check_name(name: Any, *, source: Path, field: str) -> str:
    """`name` if it is a plain relative path that stays inside the export folder (module doc),
    else an ExportError naming the file `source` and its `field` that recorded it."""
    parts = name.split("/") if isinstance(name, str) else []
    if (not parts or any(part in ("", ".", "..") for part in parts) or "\\" in name
            or "\0" in name or PureWindowsPath(name).drive):
        raise ExportError(f"{field} records the path {name!r}, which leaves the export folder "
                          "or is no plain relative path (the readers read inside it only)",
                          path=source, fix=RECOPY)
    return name


def open_file(path: Path) -> BinaryIO:
    """The plain file `path` opened for reading, refusing a symbolic link or anything else."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise ExportError("missing (the export is incomplete)", path=path, fix=RECOPY) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ExportError(_LINK, path=path, fix=_UNLINK) from None
        raise ExportError(f"cannot be read as a plain file ({error.strerror})", path=path,
                          fix=RECOPY) from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise ExportError("not a plain file", path=path, fix=RECOPY)
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
                raise ExportError("neither a plain file nor a folder", path=path, fix=RECOPY)
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
        raise ExportError(f"not a readable manifest ({error})", path=path, fix=RECOPY) from None
    well_formed = isinstance(entries, dict) and all(
        isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
        and entry[0] >= 0 and isinstance(entry[1], str) and _HEX_DIGEST.fullmatch(entry[1])
        for entry in entries.values())
    if not well_formed:
        raise ExportError("not a manifest: {name: [size, sha256], ...} expected", path=path,
                          fix=RECOPY)
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
                          path=folder / unlisted[0], fix=f"remove it, or {RECOPY}")
    for name, (size, digest) in sorted(manifest.files.items()):
        problem = file_problem(folder / name, size, digest)
        if problem:
            raise ExportError(f"export file is damaged: {problem}", path=folder / name,
                              fix=RECOPY)
    if FORMAT_FILE not in manifest.files:
        raise ExportError(f"not in the export's {MANIFEST_FILE}, so not verifiable",
                          path=folder / FORMAT_FILE, fix=RECOPY)
    description = parse_description(read_file(folder / FORMAT_FILE), folder / FORMAT_FILE)
    check_description(folder, description, manifest)
    check_arrays(folder, description)
    return Checked(manifest, description)


def parse_description(data: bytes, path: Path) -> dict:
    """format.json's bytes as a dict of this format's version (else ExportError)."""
    try:
        description = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise ExportError(f"not readable JSON ({error})", path=path, fix=RECOPY) from None
    problem = version_problem(description)
    if problem:
        raise ExportVersionError(problem, path=path.parent)
    return description


def _field(description: dict, dotted: str, types: type | tuple[type, ...], source: Path) -> Any:
    """format.json's field `dotted` ("a.b"), refused unless it is one of `types`."""
    node: Any = description
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        if not isinstance(node, dict):
            raise ExportError(f"field {'.'.join(parts[:index])} is {show(node)}, not an object",
                              path=source, fix=RECOPY)
        if part not in node:
            raise ExportError(f"field {'.'.join(parts[:index + 1])} is missing", path=source,
                              fix=RECOPY)
        node = node[part]
    if not isinstance(node, types) or (isinstance(node, bool) and bool not in (
            types if isinstance(types, tuple) else (types,))):
        names = " or ".join(kind.__name__ if kind is not type(None) else "null" for kind in (
            types if isinstance(types, tuple) else (types,)))
        raise ExportError(f"field {dotted} is {show(node)}, not {names}", path=source,
                          fix=RECOPY)
    return node


def _whole(value: Any, where: str, low: int, high: int, source: Path) -> int:
    """`value` if it is a whole number from `low` to `high`, else ExportError naming `where`."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ExportError(f"field {where} is {show(value)}, not a whole number from {low} to "
                          f"{high}", path=source, fix=RECOPY)
    return value


def check_description(folder: Path, description: dict, manifest: Manifest) -> None:
    """Refuses a format.json that lacks a field the readers use, has one of another type, a
    number beyond the caps (export_format.MAX_*), buckets that are not increasing or that differ
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
        raise ExportError("field structures.fields holds a non-string", path=source, fix=RECOPY)
    for index, token in enumerate(field("structures.prefix_tokens", list)):
        _whole(token, f"structures.prefix_tokens[{index}]", 0, MAX_VOCABULARY, source)
    for name in ("parser", "text_parser", "relations"):
        field(f"structures.{name}", str, type(None))
    buckets = field("buckets", list)
    for index, length in enumerate(buckets):
        _whole(length, f"buckets[{index}]", 1, MAX_BUCKET_LENGTH, source)
    if not buckets or buckets != sorted(set(buckets)):
        raise ExportError(f"field buckets is {show(buckets)}, not increasing bucket lengths",
                          path=source, fix=RECOPY)
    _whole(field("bucket_step", int), "bucket_step", 1, MAX_BUCKET_LENGTH, source)
    field("params.npz", str)
    _whole(field("functions.batch_size", int), "functions.batch_size", 1, MAX_BATCH_SIZE,
           source)
    functions = field("functions.buckets", dict)
    if sorted(functions) != sorted(map(str, buckets)):
        raise ExportError(f"field functions.buckets has {show(sorted(functions))}, not one "
                          f"function per bucket of {show(buckets)}", path=source, fix=RECOPY)
    for length in functions:
        field(f"functions.buckets.{length}.file", str)
        field(f"functions.buckets.{length}.inputs", dict)
    if field("head", dict, type(None)) is not None:
        field("head.file", str)
        _whole(field("head.num_classes", int), "head.num_classes", 1, MAX_DIM, source)
    check_recorded_paths(folder, description, manifest)


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
                          fix=RECOPY)


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
            header = npy_header(file, os.fstat(file.fileno()).st_size, path, "the array")
        size = description["vocabulary"]["size"]
        if header.shape != (size,) or header.dtype.kind != "b":
            raise ExportError(f"the array is {header.dtype}{list(header.shape)}, not "
                              f"bool[{size}] (format.json vocabulary.size)", path=path,
                              fix=RECOPY)
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
                              fix=RECOPY)


def read_listed(folder: Path, manifest: Manifest, name: str) -> bytes:
    """The bytes of the export's file `name`, checked against the manifest."""
    check_name(name, source=folder, field="a read")
    path = folder / name
    if name not in manifest.files:
        raise ExportError(f"not in the export's {MANIFEST_FILE}, so not verifiable",
                          path=path, fix=RECOPY)
    data = read_file(path)
    problem = file_problem(path, *manifest.files[name], data=data)
    if problem:
        raise ExportError(f"export file is damaged: {problem}", path=path, fix=RECOPY)
    return data
