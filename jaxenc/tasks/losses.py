"""Per-example losses (device side). Batch means weighted by `weight` are taken in tasks.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def classification_losses(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Softmax cross-entropy: logits [..., K], labels int[...] -> [...]."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


def relatedness_target(scores: jax.Array, num_classes: int, min_score: float = 1.0) -> jax.Array:
    """Tai et al. sparse target: scores [B] in [min_score, min_score + K - 1] -> p [B, K].

    Class k stands for the score min_score + k (SICK: 1..5). With y the score's offset from
    min_score, p_floor(y) = floor(y) - y + 1 and p_floor(y)+1 = y - floor(y): an integer score puts
    all its mass on its class and E_p[score] = the score.
    """
    offset = scores - min_score
    floor = jnp.floor(offset)
    index = floor.astype(jnp.int32)
    lower = jax.nn.one_hot(index, num_classes) * (floor - offset + 1)[:, None]
    upper = jax.nn.one_hot(index + 1, num_classes) * (offset - floor)[:, None]
    return lower + upper


def kl_divergences(target: jax.Array, log_probs: jax.Array) -> jax.Array:
    """KL(target || p) per row: target, log p [B, K] -> [B] (0 log 0 = 0)."""
    return jnp.sum(jax.scipy.special.xlogy(target, target) - target * log_probs, axis=-1)


def squared_errors(target: jax.Array, log_probs: jax.Array) -> jax.Array:
    """sum_k (p_k - target_k)^2 per row: target, log p [B, K] -> [B] (SentEval's relatedness
    loss, `nn.MSELoss` summed, on the probabilities)."""
    return jnp.sum(jnp.square(jnp.exp(log_probs) - target), axis=-1)


def token_losses(logits: jax.Array, targets: jax.Array, label_smoothing: float = 0.0) -> jax.Array:
    """Cross-entropy against targets smoothed by `label_smoothing`: logits [B, T, V],
    targets int[B, T] -> [B, T].

    The smoothed target q puts 1 - eps on the gold token y and eps / V on every token, so
    -sum_k q_k log p_k = logsumexp(x) - (1 - eps) x_y - eps mean_k(x_k), which needs no
    [B, T, V] one-hot target (bench/bench_token_loss.py times both forms).
    """
    gold = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    losses = jax.nn.logsumexp(logits, axis=-1) - (1.0 - label_smoothing) * gold
    if label_smoothing:
        losses = losses - label_smoothing * jnp.mean(logits, axis=-1)
    return losses
