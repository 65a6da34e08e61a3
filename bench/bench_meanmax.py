"""Mean-Max AAE training throughput (sentences/s) of a config's real train step, and what one
epoch of the paper's 70M Toronto Books sentences would take at that rate.

The step is the training loop's (`jaxenc.training.steps.make_train_step`: encoder + the model's
own decoder, label-smoothed loss, Adam, clipping) on one device. Batches are `batch_size`
sentences padded to the config's bucket lengths, their lengths drawn from a corpus file's
sentences of 4..32 tokens (the word ids are random: the cost does not depend on them); every
bucket is compiled before the clock starts, then `steps` steps run with buckets in the corpus's
proportions. Reported: sentences/s (wall), process CPU seconds per sentence (less sensitive to
a shared machine) and the load average, to judge the wall rate by; `--out` also writes them as a
one-row markdown table (results/meanmax_aae/bench_{small,paper}.md, read by reports.meanmax_aae).

    python -m bench.bench_meanmax --config=small --corpus=corpus.txt --steps=60
    python -m bench.bench_meanmax --config=paper --corpus=corpus.txt --steps=3 --vocab=21583 \
        --bucket=16
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
from pathlib import Path

import jax
import numpy as np

from bench.common import timed
from jaxenc.data import corpus
from jaxenc.data.batching import bucket_lengths, bucket_of
from jaxenc.data.vocab import BOS, EOS, NUM_SPECIAL
from jaxenc.models.registry import build_encoder
from jaxenc.tasks.factory import build_task
from jaxenc.text_io import tokenize
from jaxenc.training.optim import build_optimizer
from jaxenc.training.run_report import markdown_table
from jaxenc.training.sharding import make_mesh, replicated, shard_batch
from jaxenc.training.state import create_train_state, init_params
from jaxenc.training.steps import make_train_step

PAPER_SENTENCES = 70_000_000
# The output vocabulary that train/configs/meanmax_aae_small.py builds from the default corpus
# (`python -m jaxenc.data.corpus`) with glove-6b-50d: the corpus report that training logs.
SMALL_CORPUS_VOCAB = 22_019


def corpus_lengths(path: str, lowercase: bool) -> np.ndarray:
    """int[N] token counts of the corpus's sentences of MIN_TOKENS..MAX_TOKENS tokens."""
    counts = np.array([len(tokenize(line.text.lower() if lowercase else line.text))
                       for line in corpus.read_corpus(corpus.corpus_paths(path))])
    return counts[(counts >= corpus.MIN_TOKENS) & (counts <= corpus.MAX_TOKENS)]


def batch_of(lengths: np.ndarray, bucket: int, vocab: int, rng: np.random.Generator) -> dict:
    """An autoencoding batch of sentences of `lengths` in a bucket of `bucket` tokens."""
    rows = len(lengths)
    words = rng.integers(NUM_SPECIAL, vocab, size=(rows, bucket - 2)).astype(np.int32)
    real = np.arange(bucket - 2) < lengths[:, None]
    source = np.where(real, words, 0)
    target = np.zeros((rows, bucket), np.int32)
    target[:, 1:-1] = source
    target[:, 0] = BOS
    target[np.arange(rows), lengths + 1] = EOS
    return {"source/tokens": np.pad(source, ((0, 0), (0, 2))), "source/lengths": lengths,
            "target/tokens": target, "target/lengths": lengths + 2,
            "weight": np.ones(rows, np.float32)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="small", choices=("small", "paper"))
    parser.add_argument("--corpus", required=True, help="a corpus file (sentence lengths)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--vocab", type=int, default=0,
                        help="output vocabulary (default: the small config's on the default "
                             "corpus with glove-6b-50d, 22019)")
    parser.add_argument("--bucket", type=int, default=0,
                        help="time this bucket only, with the corpus's sentences that fit it "
                             "(one compilation: for big configs); default: every bucket")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the measurement as a one-row markdown table here")
    args = parser.parse_args(argv)
    config = importlib.import_module(f"train.configs.meanmax_aae_{args.config}").get_config()
    vocab = args.vocab or SMALL_CORPUS_VOCAB
    data = config.data
    lengths = corpus_lengths(args.corpus, data.lowercase)
    buckets = np.array(bucket_lengths(data.max_length, data.bucket_step))
    which = bucket_of(lengths + 2, buckets)  # the target (BOS w EOS) is the longest role
    share = np.bincount(which, minlength=len(buckets)) / len(which)
    if args.bucket:
        share = (buckets == args.bucket).astype(float)
        which = np.where(lengths + 2 <= args.bucket, np.flatnonzero(share)[0], -1)
    rng = np.random.default_rng(0)
    batches = {b: batch_of(rng.choice(lengths[which == i], data.batch_size), int(b), vocab, rng)
               for i, b in enumerate(buckets) if share[i] > 0}

    mesh = make_mesh(jax.devices()[:1])
    task = build_task("unlabelled", config.task, target_vocab_size=vocab)
    model = task.build_model(build_encoder(config.model, vocab))
    params = init_params(model, next(iter(batches.values())), seed=0)
    tx = build_optimizer(config.optim, params, data.freeze_embeddings)
    state = create_train_state(params, tx, seed=0, sharding=replicated(mesh))
    step = make_train_step(model, task, tx, mesh)
    placed = {b: shard_batch(batch, mesh) for b, batch in batches.items()}
    for batch in placed.values():  # compile every bucket first
        state, _ = step(state, batch)
    order = rng.choice(buckets, size=args.steps, p=share)

    def run():
        nonlocal state
        for bucket in order:
            state, stats = step(state, placed[bucket])
        return stats

    wall, cpu = timed(run)
    sentences = args.steps * data.batch_size
    rate = sentences / wall
    load = os.getloadavg()[0]
    shares = {int(b): round(float(s), 3) for b, s in zip(buckets, share, strict=True)}
    print(f"meanmax_aae {args.config}: d_m {config.model.model_dim}, d_f {config.model.ff_dim}, "
          f"{config.model.num_heads} heads, embed {config.model.embed_dim}, vocabulary {vocab}, "
          f"batch {data.batch_size}; bucket shares {shares}")
    print(f"{args.steps} steps in {wall:.1f} s: {rate:.1f} sentences/s, "
          f"{cpu / sentences * 1000:.1f} CPU ms per sentence (load average "
          f"{load:.1f} on {os.cpu_count()} cores, {jax.devices()[0].platform})")
    hours = PAPER_SENTENCES / rate / 3600
    print(f"70M sentences (one epoch of the paper's corpus) at this rate: {hours:.0f} hours")
    if args.out:
        used = [bucket for bucket, part in shares.items() if part > 0]
        lengths_cell = (f"all {used[0]} tokens" if len(used) == 1
                        else f"the corpus's bucket mix ({used[0]}-{used[-1]})")
        report = {
            "config": f"`meanmax_aae_{args.config}.py`",
            "d_m / d_f / heads, embeddings, vocabulary":
                f"{config.model.model_dim} / {config.model.ff_dim} / {config.model.num_heads}, "
                f"{config.model.embed_dim}-d, {vocab:,}",
            "batch lengths": lengths_cell, "steps": str(args.steps),
            "sentences/s (wall)": f"{rate:.1f}",
            "CPU ms per sentence": f"{cpu / sentences * 1000:.1f}",
            "load average, cores": f"{load:.1f}, {os.cpu_count()} {jax.devices()[0].platform}",
            "date": datetime.date.today().isoformat(),
            "one epoch of 70M sentences at this wall rate":
                f"{hours:,.0f} hours ({hours / 24:,.0f} days)",
        }
        args.out.write_text(markdown_table([report]) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
