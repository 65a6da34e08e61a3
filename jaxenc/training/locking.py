"""One writer per run directory: a training run holds an exclusive lock on `workdir/.lock` while
it trains, so a second run started on the same workdir fails at once (`WorkdirInUseError`, naming
the holder's PID and host) instead of interleaving checkpoints and metrics with the first.

The lock is `fcntl.flock` on the file, which the operating system releases when its process ends
however it ends (exit, SIGKILL, a crash), so a dead run's lock is taken over by the next run with
no stale-lock cleanup. The file holds the holder's PID, host and start time for the message; it
is never deleted (deleting it would let two processes lock two different files of that name),
except with the folder `hold` made for a run refused before it wrote anything else: a refused
run leaves no workdir behind.
In a multi-process run each process locks its own file (`.lock` for process 0, `.lock.<index>`
for the others): every process of a second run on the same (shared) workdir fails at once, and
processes whose workdirs are local folders of the same name lock each their own. Locks are
reentrant within a process: `run` holds the workdir while `train_and_evaluate` trains in it.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import jax

from jaxenc.errors import WorkdirInUseError
from jaxenc.files import writing

LOCK_FILE = ".lock"

_held: dict[Path, int] = {}  # lock file -> how many `hold` blocks of this process hold it


def lock_path(workdir: str | os.PathLike) -> Path:
    """This process's lock file in `workdir` (module doc)."""
    index = jax.process_index()
    return Path(workdir).absolute() / (LOCK_FILE if index == 0 else f"{LOCK_FILE}.{index}")


@contextlib.contextmanager
def hold(workdir: str | os.PathLike) -> Iterator[None]:
    """Holds `workdir`'s lock (creating the folder) for the block; WorkdirInUseError, at once,
    when another process holds it; WriteError when the folder or the lock file cannot be
    written (read-only, full). A folder made here is removed again when the block fails with
    nothing but lock files in it."""
    path = lock_path(workdir)
    if path in _held:
        _held[path] += 1
        try:
            yield
        finally:
            _held[path] -= 1
        return
    made = not path.parent.exists()
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WorkdirInUseError(
                f"--workdir {path.parent} is in use by {_holder(path)} (fix: wait for that run "
                "to finish or stop it, or pass another --workdir)") from None
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        with writing(path):
            os.ftruncate(descriptor, 0)
            os.write(descriptor, f"{os.getpid()} {socket.gethostname()} {started}\n".encode())
        _held[path] = 1
        try:
            yield
        except BaseException:
            if made:
                _remove_if_only_locks(path.parent)
            raise
        finally:
            del _held[path]
    finally:
        os.close(descriptor)  # releases the lock


def _remove_if_only_locks(folder: Path) -> None:
    """Removes `folder` when it holds nothing but lock files."""
    entries = list(folder.iterdir())
    if all(entry.name.startswith(LOCK_FILE) and entry.is_file() for entry in entries):
        for entry in entries:
            entry.unlink()
        folder.rmdir()


def _holder(path: Path) -> str:
    """'process PID on HOST (since TIME)' from a held lock file."""
    fields = path.read_text(encoding="utf-8", errors="replace").split()
    if len(fields) != 3:  # the holder has locked the file and not yet written it
        return f"another process (lock file {path})"
    pid, host, started = fields
    return f"process {pid} on {host} (since {started}; lock file {path})"
