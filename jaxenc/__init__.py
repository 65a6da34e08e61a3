"""jaxenc: syntax-aware sentence encoders in JAX/Flax.

Parse trees are turned on the host, once, into fixed-shape integer arrays; the device sees only
padded tensors. See README.md and docs/ARCHITECTURE.md.

    jaxenc.export(workdir, out_dir)   # a trained run's encoder as a self-describing folder
    enc = jaxenc.load(out_dir)        # an Encoder: enc.encode(["a sentence", ...]) -> [N, D]
    jaxenc.load(out_dir, sha256=d)    # only the export whose manifest has that SHA-256, d
                                      # (`python -m jaxenc verify OUT` checks it and prints d)

An export is data, safe to load: it holds no code and both readers (`load`, the jax-only
`jaxenc.standalone.load`) read nothing outside it nor any file its manifest does not vouch for.

`export`, `load` and `Encoder` are imported on first use (they import JAX), so `import jaxenc`
stays cheap.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {"export": "jaxenc.exporting", "load": "jaxenc.loading", "Encoder": "jaxenc.encoding"}
__all__ = ["Encoder", "__version__", "export", "load"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'jaxenc' has no attribute {name!r}")
