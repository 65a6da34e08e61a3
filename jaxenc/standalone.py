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

An export is data: JSON, text, `.npy` / `.npz` arrays (read without pickle), orbax arrays and
serialised `jax.export` functions. Nothing in it is imported or evaluated as Python, and the
readers (this one and `jaxenc.load`) read nothing outside the export folder:

- no file or folder inside the export may be a symbolic link, nor anything but a plain file or
  folder (the export folder given may itself be a link);
- every name in the manifest and every path in format.json is relative, without `..`, `.` or
  empty parts, backslashes or drive letters;
- every file read is listed in the manifest, jaxenc_manifest.json, with its size and SHA-256,
  and is refused when it differs; `verify` (and `jaxenc.load`) also refuse a file of the folder
  that the manifest does not list.

The manifest's digest is the SHA-256 of the bytes of jaxenc_manifest.json, as `sha256sum` prints
it; since the manifest holds the SHA-256 of every other file, that one digest pins the whole
export. `load(folder, sha256=digest)` and `jaxenc.load(folder, sha256=digest)` refuse an export
whose manifest has another digest; `python -m jaxenc verify FOLDER` checks every file and prints
the digest. Every refusal is an `ExportError`, a one-line `jaxenc.errors.DataError` naming the
file and the fix.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import stat
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

_HEX_DIGEST = re.compile("[0-9a-f]{64}")
_CHUNK = 1 << 20
_RECOPY = "copy the export again from its source, or export the training run again"
_LINK = ("a symbolic link inside an export (its readers read plain files only, so that nothing "
         "outside the folder is read)")
_UNLINK = f"{_RECOPY}, following no links"


class ExportError(DataError):
    """A missing, damaged, unsafe or incompatible export file (one line naming it)."""


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
    file = open(descriptor, "rb")
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        file.close()
        raise ExportError("not a plain file", path=path, fix=_RECOPY)
    return file


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
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
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


def verify(folder: str | os.PathLike, sha256: str | None = None) -> Manifest:
    """Checks the whole export `folder`: no links (module doc), a manifest whose digest is
    `sha256` when given, every file of the folder listed in it and every listed file of its
    size and SHA-256. Returns the manifest; raises ExportError naming the first bad file."""
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
    return manifest


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
        self.manifest = read_manifest(self.folder, sha256)
        check_folder(self.folder)
        try:
            self.description = json.loads(self.read(FORMAT_FILE))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ExportError(f"not readable JSON ({error})", path=self.folder / FORMAT_FILE,
                              fix=_RECOPY) from None
        problem = version_problem(self.description)
        if problem:
            raise ExportError(problem, path=self.folder)
        check_recorded_paths(self.folder, self.description, self.manifest)
        with np.load(io.BytesIO(self.read(self.description["params"]["npz"]))) as flat:
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
        check_name(name, source=self.folder, field="a read")
        path = self.folder / name
        if name not in self.manifest.files:
            raise ExportError(f"not in the export's {MANIFEST_FILE}, so not verifiable",
                              path=path, fix=_RECOPY)
        data = read_file(path)
        problem = file_problem(path, *self.manifest.files[name], data=data)
        if problem:
            raise ExportError(f"export file is damaged: {problem}", path=path, fix=_RECOPY)
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
