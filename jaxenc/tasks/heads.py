"""Task heads on top of sentence / token encodings (docs/models.md, "Heads"). The seq2seq
decoder is `jaxenc.layers.transformer.TransformerDecoder`.

B batch, D sentence width, L token positions, K classes.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.errors import ConfigError
from jaxenc.layers.attention import DEFAULT_KERNEL_INIT
from jaxenc.layers.dense import get_activation

# Pair feature name -> f(u, v). SentEval: "|u-v|,u*v"; InferSent/SNLI: "u,v,|u-v|,u*v";
# DiSAN NLI: "u,v,u-v,u*v" (signed difference); PSAN NLI: "u,v,|u-v|,u*v".
PAIR_FEATURES = {
    "u": lambda u, v: u,
    "v": lambda u, v: v,
    "u-v": lambda u, v: u - v,
    "|u-v|": lambda u, v: jnp.abs(u - v),
    "u*v": lambda u, v: u * v,
}


def parse_pair_features(spec: str) -> tuple[str, ...]:
    """"u,v,|u-v|,u*v" -> ("u", "v", "|u-v|", "u*v"); ConfigError on an unknown name."""
    names = tuple(name.strip() for name in spec.split(",") if name.strip())
    unknown = [name for name in names if name not in PAIR_FEATURES]
    if unknown or not names:
        raise ConfigError(f"task.pair_features={spec!r}: unknown feature(s) {unknown} (fix: a "
                          f"comma-separated list of {', '.join(PAIR_FEATURES)})")
    return names


def pair_features(u: jax.Array, v: jax.Array, names: Sequence[str]) -> jax.Array:
    """u, v [B, D] -> [B, len(names) * D], the named features concatenated in order."""
    return jnp.concatenate([PAIR_FEATURES[name](u, v) for name in names], axis=-1)


class ClassifierHead(nn.Module):
    """features [..., F] -> logits [..., K]: (Dropout, Dense, activation)* then Dropout, Dense."""

    num_classes: int
    hidden_dims: Sequence[int] = (300,)
    activation: str = "elu"
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, features: jax.Array, *, train: bool) -> jax.Array:
        drop = nn.Dropout(self.dropout_rate, deterministic=not train)
        h = features
        for i, width in enumerate(self.hidden_dims):
            h = nn.Dense(width, kernel_init=DEFAULT_KERNEL_INIT, name=f"hidden_{i}")(drop(h))
            h = get_activation(self.activation)(h)
        return nn.Dense(self.num_classes, kernel_init=DEFAULT_KERNEL_INIT, name="logits")(drop(h))


class RelatednessHead(nn.Module):
    """Tai et al. (2015): u, v [B, D] -> log p [B, K] over the K score classes.

    h_x = u * v, h_+ = |u - v|, h_s = sigmoid(W_x h_x + W_+ h_+ + b), p = softmax(W_p h_s + b_p).
    The prediction is y^ = sum_k score_k p_k (`expected_score`).
    """

    num_classes: int = 5
    hidden_dim: int = 50

    @nn.compact
    def __call__(self, u: jax.Array, v: jax.Array) -> jax.Array:
        dense = lambda width, name, bias=True: nn.Dense(
            width, use_bias=bias, kernel_init=DEFAULT_KERNEL_INIT, name=name)
        h_s = nn.sigmoid(dense(self.hidden_dim, "product")(u * v)
                         + dense(self.hidden_dim, "distance", bias=False)(jnp.abs(u - v)))
        return jax.nn.log_softmax(dense(self.num_classes, "logits")(h_s))


class LinearRelatednessHead(nn.Module):
    """SentEval's `RelatednessPytorch` model: u, v [B, D] -> log p [B, K] over the K score
    classes, p = softmax(W [|u - v|, u * v] + b), W [2D, K]: one linear layer, no hidden one.

    Initialised as PyTorch's `nn.Linear` (its model): weights and bias uniform in
    +-1 / sqrt(2D).
    """

    num_classes: int = 5

    @nn.compact
    def __call__(self, u: jax.Array, v: jax.Array) -> jax.Array:
        features = jnp.concatenate([jnp.abs(u - v), u * v], axis=-1)
        bound = features.shape[-1] ** -0.5
        logits = nn.Dense(
            self.num_classes, name="logits",
            kernel_init=nn.initializers.variance_scaling(1 / 3, "fan_in", "uniform"),
            bias_init=lambda key, shape, dtype=jnp.float32: jax.random.uniform(
                key, shape, dtype, -bound, bound))(features)
        return jax.nn.log_softmax(logits)


def expected_score(log_probs: jax.Array, min_score: float = 1.0) -> jax.Array:
    """log p [B, K] -> y^ = sum_k (min_score + k) p_k [B] (SICK: classes are the scores 1..5)."""
    scores = min_score + jnp.arange(log_probs.shape[-1], dtype=log_probs.dtype)
    return jnp.exp(log_probs) @ scores
