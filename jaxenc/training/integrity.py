"""Checksums of checkpoint folders: written once a checkpoint is complete, verified before use.

orbax writes a checkpoint into a temporary folder and renames it when complete, so a killed run
never leaves a partial one; but a file can still be damaged later (a full disk, a partial copy,
bit rot), and orbax then fails with a long traceback or restores garbage. `seal` records the
size and SHA-256 of every file of a finished checkpoint folder in MANIFEST_FILE; `problem`
compares them again and names the first file that differs. A folder without a manifest (a run
killed between the rename and the seal) cannot be verified this way: restoring it is the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from jaxenc.files import write_text_atomic

MANIFEST_FILE = "jaxenc_manifest.json"
SET_ASIDE_SUFFIX = ".corrupted"


def _files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*")
                  if path.is_file() and path.name != MANIFEST_FILE)


def _sha256(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def seal(folder: str | os.PathLike) -> None:
    """Writes the manifest of a complete checkpoint folder: {relative path: [size, sha256]}."""
    folder = Path(folder)
    files = {str(path.relative_to(folder)): [path.stat().st_size, _sha256(path)]
             for path in _files(folder)}
    write_text_atomic(folder / MANIFEST_FILE, json.dumps(files, indent=1) + "\n")


def problem(folder: str | os.PathLike) -> tuple[Path, str] | None:
    """(file, what is wrong) for the first file of `folder` that differs from its manifest
    (missing, another size, another checksum; or an unreadable manifest); None when all match
    or the folder has no manifest."""
    folder = Path(folder)
    manifest = folder / MANIFEST_FILE
    if not manifest.is_file():
        return None
    try:
        files = json.loads(manifest.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return manifest, "not a readable manifest"
    if not isinstance(files, dict) or not all(
            isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
            and isinstance(entry[1], str) for entry in files.values()):
        return manifest, "not a manifest of {file: [size, sha256]}"
    for name, (size, digest) in files.items():
        path = folder / name
        if Path(name).is_absolute() or ".." in Path(name).parts:
            return manifest, f"names {name!r}, outside the checkpoint"
        if not path.is_file():
            return path, "missing"
        if path.stat().st_size != size:
            return path, f"{path.stat().st_size} bytes, {size} were written"
        if _sha256(path) != digest:
            return path, "its content changed since it was written (checksum)"
    return None


def set_aside(folder: str | os.PathLike) -> Path:
    """Renames a corrupted checkpoint folder to `<name>.corrupted` (which orbax ignores),
    replacing an older one of that name; returns the new path."""
    folder = Path(folder)
    target = folder.with_name(folder.name + SET_ASIDE_SUFFIX)
    if target.exists():
        shutil.rmtree(target)
    return folder.rename(target)
