"""Cost figures of a trained run for its results row: the train step's compiled peak memory and
the encoder's throughput. Both reuse what training already compiled or cost one forward compile,
so every run reports them without a separate benchmark (bench/ has the careful measurements).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import flax.linen as nn
import jax
from jax.sharding import Mesh

from jaxenc.data.batching import Batcher, sentence_fields
from jaxenc.training.sharding import data_sharded, replicated, shard_batch
from jaxenc.training.state import TrainState

MIB = 2.0**20


def roles(batch: dict) -> list[str]:
    """The sentence roles of a batch that an encoder reads ("sentence", or "first" and "second";
    a seq2seq target is decoded, not encoded)."""
    return sorted({key.split("/", 1)[0] for key in batch
                   if key.endswith("/tokens") and not key.startswith("target/")})


def train_step_peak_mib(train_step: Callable, state: TrainState, batcher: Batcher,
                        mesh: Mesh) -> float:
    """The largest compiled footprint (arguments + outputs + temporaries - aliased buffers, XLA's
    memory analysis, per device) of `train_step` over the bucket shapes of one training epoch.
    Those shapes were compiled by training, so this looks them up rather than compiling again."""
    shapes = {}
    for batch in batcher.epoch(0):
        shapes.setdefault(tuple(sorted((k, v.shape) for k, v in batch.items())), batch)
    peak = 0.0
    for batch in shapes.values():
        stats = train_step.lower(state, shard_batch(batch, mesh)).compile().memory_analysis()
        if stats is None:  # a backend without memory analysis
            return float("nan")
        peak = max(peak, stats.argument_size_in_bytes + stats.output_size_in_bytes
                   + stats.temp_size_in_bytes - stats.alias_size_in_bytes)
    return peak / MIB


def encode_sentences_per_second(model: nn.Module, params: dict, batcher: Batcher,
                                mesh: Mesh) -> float:
    """Sentences per second through the task model's encoder (inference, `sentence` output) over
    every batch of `batcher`: one pass to compile the bucket shapes, a second one timed."""

    def encode(params: dict, batch: dict) -> list[jax.Array]:
        return [model.apply({"params": params}, sentence_fields(batch, role),
                            method=lambda module, fields: module.encoder(fields, train=False)
                            )["sentence"] for role in roles(batch)]

    encode = jax.jit(encode, in_shardings=(replicated(mesh), data_sharded(mesh)))
    batches = [shard_batch(batch, mesh) for batch in batcher.epoch(0)]
    if not batches:
        return float("nan")
    sentences = sum(float((batch["weight"] > 0).sum()) * len(roles(batch))
                    for batch in batcher.epoch(0))
    jax.block_until_ready([encode(params, batch) for batch in batches])
    start = time.perf_counter()
    jax.block_until_ready([encode(params, batch) for batch in batches])
    return sentences / (time.perf_counter() - start)
