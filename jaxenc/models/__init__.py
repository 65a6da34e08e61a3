"""Sentence encoders: flax modules `(sentence, *, train) -> {"tokens", "sentence"}`.

`jaxenc.models.registry.build_encoder(model_cfg, vocab_size)` builds one by name.
"""

from jaxenc.models.registry import ENCODERS, build_encoder

__all__ = ["ENCODERS", "build_encoder"]
