"""The label-smoothed token loss in closed form (`jaxenc.tasks.losses.token_losses`) against
the one-hot form it replaces: forward + backward with respect to the logits, side by side.

The one-hot form builds the smoothed target q = (1 - eps) one_hot(y) + eps / V as a [B, T, V]
array and takes -sum_k q_k log softmax(x)_k (optax.smooth_labels, optax.softmax_cross_entropy);
the closed form computes logsumexp(x) - (1 - eps) x_y - eps mean_k(x_k). Each call takes random
logits float32[batch, length, vocab] and targets, and returns the mean loss over the valid
positions and its gradient, as the decoder's training loss does (jaxenc.tasks.seq2seq.Seq2SeqTask).
The two forms take turns (bench.common.time_in_turns, settled). Reported per length: ms per call
of each, their ratio, XLA's temp memory of each, and the largest difference of their losses and
gradients. The default vocabulary is Mean-Max AAE's small config's (22,019 ids).

    python -m bench.bench_token_loss --lengths 16,32 --repeats 5
    python -m bench.bench_token_loss --out results/bench/token_loss.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bench.bench_meanmax import SMALL_CORPUS_VOCAB
from bench.common import compile_timed, measure_and_report, memory_mib, parse_ints, time_in_turns
from bench.machine import machine_words
from jaxenc import cli
from jaxenc.tasks.losses import token_losses


def one_hot_losses(logits: jax.Array, targets: jax.Array, label_smoothing: float) -> jax.Array:
    """The reference: logits [B, T, V], targets int[B, T] -> [B, T] through a [B, T, V] target."""
    smoothed = optax.smooth_labels(jax.nn.one_hot(targets, logits.shape[-1]), label_smoothing)
    return optax.softmax_cross_entropy(logits, smoothed)


def loss_and_gradient(per_token, label_smoothing: float):
    """Jitted (logits, targets, valid) -> (mean loss over valid positions, d loss / d logits)."""

    def mean_loss(logits, targets, valid):
        losses = per_token(logits, targets, label_smoothing)
        return jnp.sum(losses * valid) / jnp.maximum(jnp.sum(valid), 1.0)

    return jax.jit(jax.value_and_grad(mean_loss))


def random_arguments(args: argparse.Namespace, length: int) -> tuple[jax.Array, ...]:
    """Logits float32[batch, length, vocab], targets int32[batch, length], and a valid mask whose
    rows hold 4..length tokens."""
    rng = np.random.default_rng(length)
    logits = rng.normal(size=(args.batch, length, args.vocab)).astype(np.float32)
    targets = rng.integers(0, args.vocab, (args.batch, length)).astype(np.int32)
    lengths = rng.integers(min(4, length), length + 1, args.batch)
    valid = (np.arange(length) < lengths[:, None]).astype(np.float32)
    return jnp.asarray(logits), jnp.asarray(targets), jnp.asarray(valid)


def measure(args: argparse.Namespace) -> list[dict]:
    """One row per length: ms per call and temp MiB of each form, and their differences."""
    rows = []
    for length in args.lengths:
        arguments = random_arguments(args, length)
        steps = {"one-hot": loss_and_gradient(one_hot_losses, args.label_smoothing),
                 "closed form": loss_and_gradient(token_losses, args.label_smoothing)}
        temp = {name: memory_mib(compile_timed(step, *arguments)[0])[0]
                for name, step in steps.items()}
        (loss_a, grad_a), (loss_b, grad_b) = (step(*arguments) for step in steps.values())
        timings = time_in_turns({name: (step, arguments) for name, step in steps.items()},
                                args.repeats, budget_s=args.budget)
        ms = {name: 1000 * timing.wall for name, timing in timings.items()}
        rows.append(dict(length=length, one_hot_ms=ms["one-hot"], closed_ms=ms["closed form"],
                         ratio=ms["one-hot"] / ms["closed form"],
                         one_hot_mib=temp["one-hot"], closed_mib=temp["closed form"],
                         loss_difference=float(abs(loss_a - loss_b)),
                         grad_difference=float(jnp.max(jnp.abs(grad_a - grad_b))),
                         calls=min(t.calls for t in timings.values()),
                         recompiles=sum(t.compiles for t in timings.values())))
        print(f"length {length}: one-hot {ms['one-hot']:.1f} ms, closed form "
              f"{ms['closed form']:.1f} ms", flush=True)
    return rows


def markdown(rows: list[dict], args: argparse.Namespace, load: tuple[float, float]) -> str:
    """The table, after a line that states the settings and the machine."""
    lines = [f"Label-smoothed token loss (eps {args.label_smoothing}), forward + backward with "
             f"respect to the logits, batch {args.batch}, vocabulary {args.vocab:,}; "
             f"{machine_words(load)}; median of up to {args.repeats} calls per form, the two "
             "taking turns "
             "(python -m bench.bench_token_loss).", "",
             "| length | one-hot ms | closed form ms | one-hot / closed form | one-hot temp MiB | "
             "closed form temp MiB | max loss difference | max gradient difference | "
             "timed calls | recompiles |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['length']} | {row['one_hot_ms']:.1f} | {row['closed_ms']:.1f} | "
                     f"{row['ratio']:.2f} | {row['one_hot_mib']:.1f} | {row['closed_mib']:.1f} | "
                     f"{row['loss_difference']:.1e} | {row['grad_difference']:.1e} | "
                     f"{row['calls']} | {row['recompiles']} |")
    return "\n".join(lines) + "\n"


@cli.reports_errors
def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_token_loss",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=parse_ints, default=[16, 32],
                        help="target tokens per row, comma-separated")
    parser.add_argument("--batch", type=int, default=64, help="rows per call")
    parser.add_argument("--vocab", type=int, default=SMALL_CORPUS_VOCAB,
                        help="output vocabulary size")
    parser.add_argument("--label-smoothing", type=float, default=0.1,
                        help="eps of the smoothed target")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per form")
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds of timed calls per form at most (at least one call)")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the table to this markdown file")
    return measure_and_report(measure, markdown, parser.parse_args(argv))


if __name__ == "__main__":
    main()
