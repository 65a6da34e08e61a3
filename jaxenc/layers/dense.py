"""Dense building blocks shared by the encoders: activations by name, input-dropout Dense."""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.errors import ConfigError
from jaxenc.layers.dropout import Dropout

GLOROT_UNIFORM = nn.initializers.glorot_uniform()

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "elu": nn.elu,
    "relu": nn.relu,
    "selu": nn.selu,
    "tanh": jnp.tanh,
    "sigmoid": nn.sigmoid,
    "linear": lambda x: x,
}


def get_activation(name: str) -> Callable[[jax.Array], jax.Array]:
    """The elementwise activation called `name` (one of ACTIVATIONS)."""
    if name not in ACTIVATIONS:
        raise ConfigError(f"unknown activation {name!r} (fix: use one of {', '.join(ACTIVATIONS)})")
    return ACTIVATIONS[name]


class DropoutDense(nn.Module):
    """Dense layer whose INPUT is dropped out during training (keep_prob), as in the DiSAN code.

    [..., d_in] -> [..., features]; Glorot-uniform kernel, zero bias. `dtype`: the computation
    dtype (input, kernel and bias are cast to it; the parameters stay float32). `dropout_bits`:
    random bits per dropout decision (jaxenc/layers/dropout.py; 32 = flax's nn.Dropout).
    """

    features: int
    use_bias: bool = True
    keep_prob: float = 1.0
    dropout_bits: int = 32
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        x = Dropout(rate=1.0 - self.keep_prob, mask_bits=self.dropout_bits,
                    deterministic=not train)(x)
        kernel = self.param("kernel", GLOROT_UNIFORM, (x.shape[-1], self.features))
        bias = (self.param("bias", nn.initializers.zeros, (self.features,)) if self.use_bias
                else None)
        x, kernel, bias = nn.dtypes.promote_dtype(x, kernel, bias, dtype=self.dtype)
        y = jnp.dot(x, kernel)
        return y if bias is None else y + bias


class Kernel(nn.Module):
    """A weight matrix float32[in_features, features] named "kernel" (L2-decayed like a Dense
    kernel), returned rather than applied: for products inside a jax loop body, which cannot call
    flax modules."""

    in_features: int
    features: int

    @nn.compact
    def __call__(self) -> jax.Array:
        return self.param("kernel", nn.initializers.lecun_normal(),
                          (self.in_features, self.features))
