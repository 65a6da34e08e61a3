"""Writing a run's files: never half-written (config.json, metrics, results), and a write the
operating system refuses (a read-only folder, a full disk) reported in one line."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from jaxenc.errors import WriteError

# errno -> the fix offered when a write fails with it (others: `_OTHER_FIX`).
_FIXES = {
    errno.ENOSPC: "free disk space there, or pass a --workdir on a disk with room",
    errno.EDQUOT: "free disk space there (disk quota), or pass a --workdir on a disk with room",
    errno.EACCES: "make it writable, or pass a writable --workdir",
    errno.EPERM: "make it writable, or pass a writable --workdir",
    errno.EROFS: "the file system is read-only: pass a --workdir on a writable one",
}
_OTHER_FIX = "check the disk, or pass another --workdir"


def write_error(error: OSError, path: str | os.PathLike, outcome: str = "") -> WriteError:
    """A one-line WriteError for `error`, raised writing `path`: it names the file the operating
    system named (else `path`), its reason, `outcome` (what was kept) and the fix."""
    where = error.filename if error.filename is not None else path
    reason = error.strerror or str(error) or type(error).__name__
    fix = _FIXES.get(error.errno, _OTHER_FIX)
    return WriteError(f"cannot write {where}: {reason}{f'; {outcome}' if outcome else ''} "
                      f"(fix: {fix})")


@contextlib.contextmanager
def writing(path: str | os.PathLike, outcome: str = "") -> Iterator[None]:
    """Turns an OSError raised in the block (writing `path` or files under it) into
    `write_error`'s one-line WriteError."""
    try:
        yield
    except WriteError:
        raise
    except OSError as error:
        raise write_error(error, path, outcome) from None


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Writes `text` to a temporary file beside `path`, then renames it over `path`: a reader
    (or a process killed meanwhile) sees the old file or the new one, never a part. A refused
    write is a WriteError naming `path` (`write_error`)."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        try:
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as error:  # it names the temporary file, which no longer exists
        raise write_error(OSError(error.errno, error.strerror), path) from None
