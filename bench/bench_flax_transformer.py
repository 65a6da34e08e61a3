"""jaxenc's Transformer against a plain flax.linen encoder of the same sizes: the train step
(forward, backward, Adam update) timed in turns in one process, and the ratio plain / jaxenc
(above 1: jaxenc is faster).

Both encoders: a trainable 10,000 x 300 word table, sinusoidal positions, 2 post-LayerNorm layers
of 6-head self-attention and a 600-wide ReLU feed-forward, dropout (0.1, `--dropout`) on the
inputs, the sublayer outputs and the feed-forward's hidden layer (as flax's wmt example),
mean pooling over the words, a linear classifier over 6 classes, softmax cross-entropy, Adam
(optax) with the update inside the jitted step; batch 64 of full-length random sentences. The
plain encoder builds its attention from `nn.MultiHeadDotProductAttention` with a padding mask;
jaxenc's is `model.name=transformer` (`attention="auto"`: `jax.nn.dot_product_attention`;
`--attention=einsum` times the explicit-score path instead).

    python -m bench.bench_flax_transformer --lengths=16,32,64 --repeats=10 \\
        --out=results/bench/transformer_vs_flax.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from bench.common import measure_and_report, parse_ints, time_in_turns
from jaxenc import cli
from jaxenc.configs import model_config
from jaxenc.layers.masks import length_mask, masked_mean
from jaxenc.layers.transformer import sinusoidal_positions
from jaxenc.models import registry

VOCAB, WIDTH, LAYERS, HEADS, FFN, CLASSES = 10_000, 300, 2, 6, 600, 6


class PlainEncoder(nn.Module):
    """tokens int32[B, L], lengths int32[B] -> class logits [B, CLASSES], from flax's own layers."""

    dropout: float = 0.1

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array, *, train: bool) -> jax.Array:
        valid = length_mask(lengths, tokens.shape[1])
        x = nn.Embed(VOCAB, WIDTH)(tokens) + sinusoidal_positions(tokens.shape[1], WIDTH)
        x = nn.Dropout(self.dropout)(x, deterministic=not train)
        mask = nn.make_attention_mask(valid, valid)
        for _ in range(LAYERS):
            attended = nn.MultiHeadDotProductAttention(num_heads=HEADS, qkv_features=WIDTH)(
                x, x, mask=mask, deterministic=True)
            x = nn.LayerNorm()(x + nn.Dropout(self.dropout)(attended, deterministic=not train))
            hidden = nn.Dropout(self.dropout)(nn.relu(nn.Dense(FFN)(x)), deterministic=not train)
            hidden = nn.Dense(WIDTH)(hidden)
            x = nn.LayerNorm()(x + nn.Dropout(self.dropout)(hidden, deterministic=not train))
        return nn.Dense(CLASSES)(masked_mean(x, valid))


class JaxencClassifier(nn.Module):
    """jaxenc's Transformer encoder (`attention` as given) and the same linear classifier."""

    attention: str = "auto"
    dropout: float = 0.1

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array, *, train: bool) -> jax.Array:
        config = model_config("transformer", embed_dim=WIDTH, model_dim=WIDTH, num_layers=LAYERS,
                              num_heads=HEADS, ff_dim=FFN, dropout_rate=self.dropout,
                              attention=self.attention)
        encoder = registry.build_encoder(config, VOCAB)
        sentence = encoder(dict(tokens=tokens, lengths=lengths), train=train)["sentence"]
        return nn.Dense(CLASSES)(sentence)


def train_step(model: nn.Module, batch: tuple[jax.Array, jax.Array, jax.Array]):
    """(jitted step, its arguments): one Adam step of softmax cross-entropy on `batch`."""
    tokens, lengths, labels = batch
    params = model.init(jax.random.key(0), tokens, lengths, train=False)["params"]
    optimizer = optax.adam(1e-3)

    @jax.jit
    def step(params, opt_state, key):
        def loss(params):
            logits = model.apply({"params": params}, tokens, lengths, train=True,
                                 rngs={"dropout": key})
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step, (params, optimizer.init(params), jax.random.key(1))


def measure(args) -> list[dict]:
    rows = []
    for length in args.lengths:
        rng = np.random.default_rng(length)
        batch = (jnp.asarray(rng.integers(4, VOCAB, (args.batch, length)), jnp.int32),
                 jnp.full((args.batch,), length, jnp.int32),
                 jnp.asarray(rng.integers(0, CLASSES, args.batch), jnp.int32))
        steps = {"jaxenc": train_step(JaxencClassifier(args.attention, args.dropout), batch),
                 "plain flax": train_step(PlainEncoder(args.dropout), batch)}
        timings = time_in_turns(steps, args.repeats)
        jaxenc_ms, plain_ms = (1e3 * timings[name].wall for name in ("jaxenc", "plain flax"))
        rows.append(dict(length=length, jaxenc_ms=jaxenc_ms, plain_ms=plain_ms,
                         ratio=plain_ms / jaxenc_ms))
        print(f"L {length}: jaxenc {jaxenc_ms:.1f} ms, plain flax {plain_ms:.1f} ms", flush=True)
    return rows


def markdown(rows: list[dict], args, load: tuple[float, float]) -> str:
    device = jax.devices()[0]
    lines = [
        "# jaxenc's Transformer vs a plain flax encoder: train step",
        "",
        f"`python -m bench.bench_flax_transformer --lengths={','.join(map(str, args.lengths))} "
        f"--batch={args.batch} --repeats={args.repeats} --attention={args.attention} "
        f"--dropout={args.dropout}` on "
        f"{datetime.date.today()}: {device.platform} ({device.device_kind}), "
        f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), JAX "
        f"{jax.__version__}; load average {load[0]:.2f} at the start, {load[1]:.2f} at the end. "
        "Median wall ms of a train step, the two steps timed in turns "
        "(bench/bench_flax_transformer.py gives the sizes).",
        "",
        "| L | jaxenc ms | plain flax ms | plain / jaxenc |",
        "|---|---|---|---|",
        *(f"| {row['length']} | {row['jaxenc_ms']:.1f} | {row['plain_ms']:.1f} | "
          f"{row['ratio']:.2f} |" for row in rows),
    ]
    return "\n".join(lines) + "\n"


def parameter_count(model: nn.Module, length: int = 4) -> int:
    """The number of trainable parameters of `model` (sizes of a like-for-like comparison)."""
    tokens, lengths = jnp.zeros((1, length), jnp.int32), jnp.full((1,), length, jnp.int32)
    params = jax.eval_shape(lambda: model.init(jax.random.key(0), tokens, lengths, train=False))
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(params))


@cli.reports_errors
def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=parse_ints, default=[16, 32, 64],
                        help="sentence lengths (comma-separated)")
    parser.add_argument("--batch", type=int, default=64, help="sentences per step")
    parser.add_argument("--repeats", type=int, default=10, help="timed steps per variant")
    parser.add_argument("--attention", choices=("auto", "einsum", "fused"), default="auto",
                        help="jaxenc's model.attention")
    parser.add_argument("--dropout", type=float, default=0.1,
                        help="dropout on the inputs and sublayer outputs of both encoders")
    parser.add_argument("--out", type=Path, help="also write the markdown report here")
    return measure_and_report(measure, markdown, parser.parse_args(argv))


if __name__ == "__main__":
    main()
