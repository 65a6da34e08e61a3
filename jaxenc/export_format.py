"""The jaxenc encoder export format: its names, version, caps and errors.

An export (docs/ARCHITECTURE.md, "Export format") is a folder described by format.json and
pinned by jaxenc_manifest.json. This module imports the standard library and `jaxenc.errors`
only, so the jax-only reader (`jaxenc.standalone`) needs nothing else of jaxenc.
"""

from __future__ import annotations

from typing import Any

from jaxenc.errors import ConfigError, DataError

FORMAT_NAME = "jaxenc-encoder"
FORMAT_VERSION = 1
FORMAT_FILE = "format.json"
MANIFEST_FILE = "jaxenc_manifest.json"
PARAMS_NPZ = "params.npz"
SEPARATOR = "/"  # params.npz keys: the path of each leaf in the nested dicts, "embed/embedding"
EMBEDDING = "embed/embedding"  # the word table, float[vocabulary.size, d]

# Sane absolute caps on format.json's numbers (`export_checks.check_description`): a bucket's
# tokens, a batch's rows, a vector's or layer's width, the words of a vocabulary, a model's layer
# counts.
MAX_BUCKET_LENGTH = 4096
MAX_BATCH_SIZE = 4096
MAX_DIM = 1 << 16
MAX_VOCABULARY = 1 << 26
MAX_MODEL_NUMBER = 1 << 20
MAX_LAYERS = 256
RECOPY = "copy the export again from its source, or export the training run again"


class ExportError(DataError):
    """A missing, damaged, unsafe or incompatible export file (one line naming it)."""


class ExportVersionError(ExportError, ConfigError):
    """An export of another format version than this reader's (also a ConfigError)."""


def show(value: Any) -> str:
    """`value` as an error message shows it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


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


def unflatten(flat: dict[str, Any]) -> dict:
    """Nested dicts of params.npz's flat `a/b/c` keys."""
    tree: dict = {}
    for key, value in flat.items():
        *parents, leaf = key.split(SEPARATOR)
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return tree
