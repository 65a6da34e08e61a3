"""Encoders by name.

Each model module defines `SPEC = EncoderSpec(config=..., module=..., structure_spec=...)`;
modules are imported on first use, so a model with heavy or optional dependencies costs nothing
until a config names it. Every encoder is a flax module called as
`encoder(sentence, *, train) -> {"tokens", "sentence", "memory", "memory_mask"}`
(docs/ARCHITECTURE.md, "Encoders"), built by `encoder_outputs`.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.errors import ConfigError
from jaxenc.models.config import AUTO, EncoderConfig, StructureNeeds

ENCODERS: dict[str, str] = {
    "bag": "jaxenc.models.bag",
    "transformer": "jaxenc.models.transformer",
    "disan": "jaxenc.models.disan",
    "dependency_transformer": "jaxenc.models.dependency_transformer",
    "psan": "jaxenc.models.psan",
    "tree_lstm": "jaxenc.models.tree_lstm",
    "phrase_transformer": "jaxenc.models.phrase_transformer",
    "meanmax_aae": "jaxenc.models.meanmax_aae",
}


def encoder_outputs(*, tokens: jax.Array, sentence: jax.Array, memory: jax.Array,
                    memory_mask: jax.Array) -> dict[str, jax.Array]:
    """The output contract's dict, its float arrays in float32 whatever the encoder computed in
    (`EncoderConfig.dtype`): heads, losses and evaluation always read float32."""
    return {"tokens": tokens.astype(jnp.float32), "sentence": sentence.astype(jnp.float32),
            "memory": memory.astype(jnp.float32), "memory_mask": memory_mask}


def _no_structures(config: EncoderConfig) -> StructureNeeds:
    del config
    return StructureNeeds()


@dataclasses.dataclass(frozen=True)
class EncoderSpec:
    """One registered encoder.

    Attributes:
      config: its frozen config class (jaxenc.models.config.EncoderConfig).
      module: its flax module class, built as `module(vocab_size=V, config=config)`.
      structure_spec: config -> the structure fields and prefix tokens it needs.
      decoder: the model's own seq2seq decoder class (Mean-Max AAE), None for most: built as
        `decoder(vocab_size=V, config=config)` and called as `decoder(inputs, input_lengths,
        memory, memory_mask, *, train, word_table)` with the encoder's word table (its output
        vocabulary is the input vocabulary). Chosen by task.head.decoder.name="model".
    """

    config: type[EncoderConfig]
    module: type[nn.Module]
    structure_spec: Callable[[Any], StructureNeeds] = _no_structures
    decoder: type[nn.Module] | None = None


def available(name: str) -> bool:
    """Whether encoder `name` is registered and its module can be found."""
    return name in ENCODERS and importlib.util.find_spec(ENCODERS[name]) is not None


def encoder_spec(name: str) -> EncoderSpec:
    """The EncoderSpec of model `name`."""
    if name not in ENCODERS:
        raise ConfigError(f"unknown model {name!r} (fix: set --config.model.name to one of "
                          f"{', '.join(sorted(ENCODERS))})")
    if not available(name):
        raise ConfigError(f"model {name!r} is registered but {ENCODERS[name]} is not installed")
    return importlib.import_module(ENCODERS[name]).SPEC


def encoder_config(model_cfg: Mapping[str, Any]) -> EncoderConfig:
    """The typed, validated config of a model section (`name` + the config's fields), its
    "auto" options resolved (`EncoderConfig.resolved`)."""
    values = dict(model_cfg)
    return encoder_spec(values.pop("name")).config.from_mapping(values).resolved()


def resolved_auto(model_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """{field: value} of the options that `model_cfg` leaves "auto" and that resolve to a value
    when its encoder is built (what a run records in its config.json)."""
    resolved = encoder_config(model_cfg).to_dict()
    return {field: resolved[field] for field, value in model_cfg.items()
            if isinstance(value, str) and value == AUTO and resolved.get(field, AUTO) != AUTO}


def preset(name: str, **overrides: Any) -> dict[str, Any]:
    """The model section of encoder `name`: its config's defaults (the paper's values) with
    `overrides`. Values are validated, and "auto" options resolved, when the encoder is built
    (after command-line overrides); an unknown key is an error here already."""
    defaults = encoder_spec(name).config().to_dict()
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise ConfigError(f"model option(s) {unknown} are not options of {name!r} (fix: use "
                          f"{', '.join(sorted(defaults))})")
    return {"name": name, **defaults, **overrides}


def build_encoder(model_cfg: Mapping[str, Any], vocab_size: int) -> nn.Module:
    """The (unbound) encoder module that `model_cfg.name` names."""
    config = encoder_config(model_cfg)
    return encoder_spec(model_cfg["name"]).module(vocab_size=vocab_size, config=config)


def own_decoder(encoder: nn.Module, vocab_size: int) -> nn.Module:
    """The decoder that the model of the built `encoder` brings (EncoderSpec.decoder), with the
    encoder's config; ConfigError when it has none."""
    spec = importlib.import_module(type(encoder).__module__).SPEC
    if spec.decoder is None:
        raise ConfigError(f"{type(encoder).__name__} has no decoder of its own (fix: "
                          "--config.task.head.decoder.name=transformer)")
    return spec.decoder(vocab_size=vocab_size, config=encoder.config)


def structure_spec(model_cfg: Mapping[str, Any]) -> StructureNeeds:
    """The structure fields and prefix tokens the encoder of `model_cfg` needs."""
    return encoder_spec(model_cfg["name"]).structure_spec(encoder_config(model_cfg))
