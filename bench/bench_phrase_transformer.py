"""PhraseTransformer vs the plain Transformer as the encoder of the Multi30k seq2seq model:
train-step time and memory per bucket length, test decoding time, and the wall-clock estimate of
a training run of a config.

Every variant is one jitted training step of the translation model (encoder + Transformer
decoder, forward + backward, adam update) on random tokens of one bucket length, with the widths
of `--config` (default: train/configs/phrase_transformer_multi30k_small.py). Reported per
variant and length: median wall-clock and process-CPU ms per step over interleaved repeats, and
XLA's temporary buffer size of the compiled step. With the data folder, the estimate weighs the
step times by how many training batches fall in each bucket, times steps per epoch and epochs,
plus one beam-search decode of the test split (eval batch size, at its longest bucket).

    python -m bench.bench_phrase_transformer --lengths=16,32 --variants=pt_k2,pt_k3,transformer
"""

from __future__ import annotations

import argparse
import collections
import importlib
import statistics
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxenc.data import registry
from jaxenc.data.batching import bucket_lengths
from jaxenc.models.registry import build_encoder
from jaxenc.tasks.factory import build_task
from jaxenc.tasks.seq2seq import translate
from jaxenc.training.optim import build_optimizer

MIB = 2.0**20
VOCAB = 8000


def variants(config: ml_collections.ConfigDict) -> dict[str, ml_collections.ConfigDict]:
    """name -> model section: the config's PhraseTransformer at k=2/3 (sparse, and dense phase 2
    at k=2) and its Transformer twin."""
    model = config.model.to_dict()
    return {
        "pt_k2": ml_collections.ConfigDict(dict(model, k=2)),
        "pt_k2_dense": ml_collections.ConfigDict(dict(model, k=2, phase2="dense")),
        "pt_k3": ml_collections.ConfigDict(dict(model, k=3)),
        "transformer": config.baselines.transformer,
    }


def random_batch(batch_size: int, length: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A translation batch of full-length source and target sentences."""
    rng = np.random.default_rng(seed)
    tokens = lambda: rng.integers(6, VOCAB, (batch_size, length)).astype(np.int32)
    return {"source/tokens": tokens(), "source/lengths": np.full(batch_size, length, np.int32),
            "target/tokens": tokens(), "target/lengths": np.full(batch_size, length, np.int32),
            "weight": np.ones(batch_size, np.float32), "index": np.arange(batch_size)}


def train_step(config: ml_collections.ConfigDict, model_cfg: ml_collections.ConfigDict,
               batch: dict[str, np.ndarray]):
    """(compiled step, its arguments) of one adam step of the translation model."""
    task = build_task("translation", config.task, target_vocab_size=VOCAB)
    model = task.build_model(build_encoder(model_cfg, VOCAB))
    params = jax.jit(lambda b: model.init(jax.random.key(0), b, train=False))(batch)["params"]
    tx = build_optimizer(config.optim, params)

    def step(params, opt_state, batch):
        def loss_fn(params):
            outputs = model.apply({"params": params}, batch, train=True,
                                  rngs={"dropout": jax.random.key(1)})
            return task.loss(outputs, batch)

        grads = jax.grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return jax.tree.map(jnp.add, params, updates), opt_state

    args = (params, tx.init(params), batch)
    return jax.jit(step).lower(*args).compile(), args, model, params


def timed(fn, args, repeats: int) -> tuple[float, float]:
    """Median (wall ms, process-CPU ms) of `repeats` calls."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(*args))
        walls.append(1e3 * (time.perf_counter() - wall))
        cpus.append(1e3 * (time.process_time() - cpu))
    return statistics.median(walls), statistics.median(cpus)


def bucket_shares(config: ml_collections.ConfigDict) -> dict[int, float]:
    """Fraction of training examples per bucket length (longest role), as the batcher groups
    them; {} without the data folder."""
    try:
        train = registry.load(config.task.dataset, "train", config.data.data_dir or None)
    except Exception as error:  # noqa: BLE001 - the estimate is optional
        print(f"no bucket shares ({error}); the estimate is skipped")
        return {}
    buckets = bucket_lengths(config.data.max_length, config.data.bucket_step)
    lengths = [max(len(e.sentences[0].tokens), len(e.target.tokens) + 2) for e in train]
    counts = collections.Counter(next((b for b in buckets if b >= n), None) for n in lengths)
    counts.pop(None, None)  # longer than max_length: dropped from training
    total = sum(counts.values())
    return {bucket: count / total for bucket, count in sorted(counts.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="phrase_transformer_multi30k_small")
    parser.add_argument("--lengths", default="8,16,24,32")
    parser.add_argument("--variants", default="pt_k2,pt_k2_dense,pt_k3,transformer")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    config = importlib.import_module(f"train.configs.{args.config}").get_config()
    chosen = {name: cfg for name, cfg in variants(config).items()
              if name in args.variants.split(",")}
    lengths = [int(n) for n in args.lengths.split(",")]
    batch_size = config.data.batch_size
    print(f"{args.config}: batch {batch_size}, {jax.device_count()} device(s), "
          f"{jax.devices()[0].device_kind}")
    print("| variant | L | step ms | cpu ms | temp MiB |\n|---|---|---|---|---|")
    step_ms: dict[str, dict[int, float]] = {name: {} for name in chosen}
    decoders = {}
    for length in lengths:
        batch = random_batch(batch_size, length)
        compiled = {name: train_step(config, cfg, batch) for name, cfg in chosen.items()}
        for name, (step, step_args, model, params) in compiled.items():
            timed(step, step_args, 1)  # warm-up
            wall, cpu = timed(step, step_args, args.repeats)
            step_ms[name][length] = wall
            temp = step.memory_analysis().temp_size_in_bytes / MIB
            print(f"| {name} | {length} | {wall:.1f} | {cpu:.1f} | {temp:.1f} |", flush=True)
            decoders[name] = (model, params)
    shares = bucket_shares(config)
    if not shares:
        return
    cfg = config.task.head.decoder
    steps = config.train.epochs * round(len(registry.load(
        config.task.dataset, "train", config.data.data_dir or None)) / batch_size)
    test_batch = random_batch(config.data.eval_batch_size, max(lengths), seed=1)
    for name, (model, params) in decoders.items():
        per_step = sum(share * np.interp(bucket, lengths, [step_ms[name][n] for n in lengths])
                       for bucket, share in shares.items())
        decode = jax.jit(lambda p, b, m=model: translate(
            m, p, b, max_length=cfg.max_decode_length, beam_size=cfg.beam_size,
            length_penalty=cfg.length_penalty))
        decode_ms, _ = timed(decode, (params, test_batch), 1)  # compile
        decode_ms, _ = timed(decode, (params, test_batch), 1)
        batches = -(-1000 // config.data.eval_batch_size)
        print(f"{name}: {per_step:.0f} ms per step (bucket mix), {steps} steps = "
              f"{steps * per_step / 6e4:.1f} min; test decoding (untrained: full "
              f"{cfg.max_decode_length} steps) {batches} x {decode_ms / 1e3:.1f} s")


if __name__ == "__main__":
    main()
