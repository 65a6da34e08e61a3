"""Encoder configs: one frozen dataclass per model family (as flax/examples/wmt's
TransformerConfig), and what an encoder needs from the featurizer.

Each hyperparameter is written once, as a field of its model's config class with the paper's
value as default; `train/configs/base.py` takes its presets from these defaults. A config
validates itself on construction (`validate`, one-line ConfigError naming the field and a fix),
so a bad value fails before anything is traced. An encoder module is built as
`Model(vocab_size=V, config=ModelConfig(**config.model minus its name).resolved())`.

An option whose valid values depend on other options defaults to `AUTO` ("auto"), which
`resolved()` replaces by the value that works with the others (e.g. the PhraseTransformer's
`phase2`: sparse where n-gram hypernodes and the additive mask allow it, else dense), so no
default fails in combination with another option; an explicit value that contradicts another
option stays a one-line ConfigError. Encoders are built from resolved configs
(`jaxenc.models.registry.encoder_config`), and a training run writes the resolved values into
its config before saving it (`jaxenc.training.validation.check_config`), so config.json records
what was trained. (DiSAN's `attention_impl="auto"` is another kind: it picks a kernel per bucket
length at trace time and stays "auto" in the config.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import jax.numpy as jnp

from jaxenc.data.packing import PackingConfig
from jaxenc.errors import ConfigError

DTYPES: dict[str, jnp.dtype] = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
AUTO = "auto"  # an option resolved from the other options when the encoder is built

ConfigT = TypeVar("ConfigT", bound="EncoderConfig")


def require(condition: bool, field: str, value: Any, problem: str, fix: Any) -> None:
    """Raises `model.<field>=<value> <problem> (fix: --config.model.<field>=<fix>)` unless
    `condition`."""
    if not condition:
        raise ConfigError(f"model.{field}={value!r} {problem} (fix: --config.model.{field}={fix})")


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Fields every encoder has.

    Attributes:
      embed_dim: width of the word table (pretrained vectors must match it).
      freeze_embeddings: keep the word table fixed (gradients stop at it).
      dtype: computation dtype, "float32" or "bfloat16" (parameters stay float32; softmax and
        other normalisers run in float32).
    """

    # {field: the value a saved model config that lacks the field is read with}
    # (jaxenc.training.run_files.saved_config): the value that computes what such a config
    # computes, so the run resumes, encodes and exports as it was trained. Only options whose
    # default computes something else are listed.
    BEFORE_OPTION: ClassVar[Mapping[str, Any]] = {}

    embed_dim: int = 300
    freeze_embeddings: bool = False
    dtype: str = "float32"

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """One-line ConfigError for the first invalid field; subclasses extend it."""
        require(isinstance(self.embed_dim, int) and self.embed_dim >= 1, "embed_dim",
                self.embed_dim, "is not a positive integer", 300)
        require(self.dtype in DTYPES, "dtype", self.dtype, f"is not one of {', '.join(DTYPES)}",
                "float32")
        parent = super()
        if hasattr(parent, "validate"):  # another config base (e.g. Token2TokenOptions)
            parent.validate()

    def resolved(self: ConfigT) -> ConfigT:
        """This config with every `AUTO` option replaced by the value the other options call
        for; subclasses with such options override it (the base has none)."""
        return self

    @property
    def compute_dtype(self) -> jnp.dtype:
        """The jnp dtype of `dtype`."""
        return DTYPES[self.dtype]

    @classmethod
    def from_mapping(cls: type[ConfigT], values: Mapping[str, Any]) -> ConfigT:
        """The config of `values` (e.g. config.model without "name"); unknown keys are an error,
        missing ones take the defaults. Sequences become tuples (configs are hashable)."""
        names = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigError(f"model option(s) {unknown} are not fields of {cls.__name__} "
                              f"(fix: remove them; the options are {', '.join(sorted(names))})")
        return cls(**{key: tuple(value) if isinstance(value, list) else value
                      for key, value in values.items()})

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (a model section of a training config, without "name")."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class StructureNeeds:
    """What an encoder needs from the featurizer besides tokens and lengths.

    Attributes:
      fields: structure fields (jaxenc.structures.arrays.FIELD_TREES), e.g. ("segments",).
      prefix_tokens: special token ids put before every sentence, e.g. (ROOT,).
      packing: the phrase packing plan the batcher must add (PSAN), or None. Its `groups` and
        `epochs` are the training loop's (data shards, epochs), filled in there.
    Structure options (parser, num_levels, max_distance, ...) are fields of the model's config
    named as jaxenc.structures.arrays.StructureSpec's attributes.
    """

    fields: tuple[str, ...] = ()
    prefix_tokens: tuple[int, ...] = ()
    packing: PackingConfig | None = None
