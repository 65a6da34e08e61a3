"""Compile once, reuse everywhere: JAX's persistent compilation cache, and an account of the
tracing and compiling a piece of work did.

`persistent_cache(path)` turns JAX's on-disk cache of compiled programs on for the work inside
it (every program is cached however fast it compiled, so a rerun, a resume or an evaluation of
a finished run compiles nothing it compiled before) and restores the previous setting after;
"" turns it off. The default folder is `default_cache_dir()`: JAX's own JAX_COMPILATION_CACHE_DIR
when set, else under the user's cache directory.
JAX keys an entry by the program, the compile options, the devices and the jax/jaxlib version,
so an entry is reused only where it computes the same thing. The cache is trusted code: it must
not be a folder that other users can write.

`CompileRecorder` counts, through `jax.monitoring`, what JAX did while it was active: traces
(Python -> jaxpr), lowerings (jaxpr -> StableHLO), XLA compilations and persistent-cache hits and
misses, each with its seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import jax
from jax.experimental.compilation_cache import compilation_cache

log = logging.getLogger(__name__)

# Keeps the cache below this size on disk, the least recently used entries going first.
MAX_CACHE_BYTES = 4 * 2**30
# JAX's settings inside `persistent_cache`: every program is cached, however fast it compiled.
CACHE_SETTINGS = {"jax_persistent_cache_min_compile_time_secs": 0.0,
                  "jax_persistent_cache_min_entry_size_bytes": -1,
                  "jax_compilation_cache_max_size": MAX_CACHE_BYTES}

# jax.monitoring events (jax/_src/dispatch.py, jax/_src/compiler.py).
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
CACHE_MISS_EVENT = "/jax/compilation_cache/cache_misses"


def default_cache_dir() -> str:
    """$JAX_COMPILATION_CACHE_DIR (JAX's own setting) when set, else $XDG_CACHE_HOME/jaxenc/xla,
    else ~/.cache/jaxenc/xla."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return os.environ["JAX_COMPILATION_CACHE_DIR"]
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(root) / "jaxenc" / "xla")


def _set_cache_dir(path: str | None) -> None:
    jax.config.update("jax_compilation_cache_dir", path)
    compilation_cache.reset_cache()  # the next compilation opens the cache at `path`


@contextlib.contextmanager
def persistent_cache(path: str) -> Iterator[None]:
    """JAX's persistent compilation cache in folder `path` ("" = off) inside the block, with
    CACHE_SETTINGS; the process's previous cache settings afterwards. A process whose cache is
    this folder already (JAX_COMPILATION_CACHE_DIR, or a caller's own setting) keeps its own
    settings."""
    previous = jax.config.jax_compilation_cache_dir
    wanted = os.path.expanduser(path) if path else None
    if wanted is not None and wanted == previous:
        yield
        return
    saved = {name: getattr(jax.config, name) for name in CACHE_SETTINGS}
    if wanted != previous:
        _set_cache_dir(wanted)
    for name, value in CACHE_SETTINGS.items():
        jax.config.update(name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            jax.config.update(name, value)
        if wanted != previous:
            _set_cache_dir(previous)


@dataclasses.dataclass
class CompileStats:
    """What JAX did: counts and seconds of traces, lowerings and XLA compilations (a compilation
    served by the persistent cache counts as a compilation and a cache hit; its seconds are
    the time to read the entry)."""

    traces: int = 0
    trace_s: float = 0.0
    lowerings: int = 0
    lower_s: float = 0.0
    compilations: int = 0
    compile_s: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0

    @property
    def compiled(self) -> int:
        """XLA compilations that the persistent cache did not serve."""
        return self.compilations - self.cache_hits


class CompileRecorder:
    """Collects `CompileStats` of the JAX work done inside `with recorder:` (any thread)."""

    _DURATIONS = {TRACE_EVENT: ("traces", "trace_s"), LOWER_EVENT: ("lowerings", "lower_s"),
                  COMPILE_EVENT: ("compilations", "compile_s")}
    _COUNTS = {CACHE_HIT_EVENT: "cache_hits", CACHE_MISS_EVENT: "cache_misses"}

    def __init__(self) -> None:
        self.stats = CompileStats()
        self._lock = threading.Lock()

    def _on_duration(self, event: str, seconds: float, **_) -> None:
        if event in self._DURATIONS:
            count, total = self._DURATIONS[event]
            with self._lock:
                setattr(self.stats, count, getattr(self.stats, count) + 1)
                setattr(self.stats, total, getattr(self.stats, total) + seconds)

    def _on_event(self, event: str, **_) -> None:
        if event in self._COUNTS:
            with self._lock:
                name = self._COUNTS[event]
                setattr(self.stats, name, getattr(self.stats, name) + 1)

    def __enter__(self) -> CompileRecorder:
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)
        jax.monitoring.register_event_listener(self._on_event)
        return self

    def __exit__(self, *exc_info) -> None:
        jax.monitoring.unregister_event_duration_listener(self._on_duration)
        jax.monitoring.unregister_event_listener(self._on_event)
