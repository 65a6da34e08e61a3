"""Files a killed process must never leave half-written (config.json, metrics, results)."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Writes `text` to a temporary file beside `path`, then renames it over `path`: a reader
    (or a process killed meanwhile) sees the old file or the new one, never a part."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
