"""Encoders by name. Each entry is a module with `from_config(model_cfg, vocab_size) -> nn.Module`.

Modules are imported on first use, so a model with heavy or optional dependencies costs nothing
until a config names it. An encoder class may declare what the featurizer must provide:
`REQUIRED_FIELDS` (structure fields besides tokens/lengths, e.g. ("segments", "blocks")) and
`PREFIX_TOKENS` (special token ids prepended to every sentence, e.g. (ROOT,)).
"""

from __future__ import annotations

import importlib
import importlib.util

import flax.linen as nn
import ml_collections

from jaxenc.errors import ConfigError

ENCODERS: dict[str, str] = {
    "bag": "jaxenc.models.bag",
    "transformer": "jaxenc.models.transformer",
    "disan": "jaxenc.models.disan",
}


def available(name: str) -> bool:
    """Whether encoder `name` is registered and its module can be found."""
    return name in ENCODERS and importlib.util.find_spec(ENCODERS[name]) is not None


def build_encoder(model_cfg: ml_collections.ConfigDict, vocab_size: int) -> nn.Module:
    """Returns the (unbound) encoder module that `model_cfg.name` names."""
    name = model_cfg.name
    if name not in ENCODERS:
        raise ConfigError(f"unknown model {name!r} (fix: set --config.model.name to one of "
                          f"{', '.join(sorted(ENCODERS))})")
    if not available(name):
        raise ConfigError(f"model {name!r} is registered but {ENCODERS[name]} is not installed")
    module = importlib.import_module(ENCODERS[name])
    try:
        return module.from_config(model_cfg, vocab_size)
    except AttributeError as missing:  # a ConfigDict without a field the model needs
        raise ConfigError(f"model {name!r}: {missing} (fix: start from the model's preset, "
                          f"--config=train/configs/base.py:{name},<task>)") from None


def required_fields(encoder: nn.Module) -> tuple[str, ...]:
    """Structure fields the encoder reads besides tokens and lengths."""
    return tuple(getattr(encoder, "REQUIRED_FIELDS", ()))


def prefix_tokens(encoder: nn.Module) -> tuple[int, ...]:
    """Special token ids the featurizer prepends to every sentence of this encoder."""
    return tuple(getattr(encoder, "PREFIX_TOKENS", ()))
