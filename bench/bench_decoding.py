"""Decoded tokens/s of the key/value-cached decoders against the full-buffer reference: greedy and
beam search by `jaxenc.tasks.seq2seq.translate` with cached=True and cached=False, for the generic
Transformer decoder (on a Transformer encoder) and Mean-Max AAE's own decoder, at a few output
lengths, side by side.

Both models get the same widths (`--model-dim`, `--ff-dim`, `--heads`; `--layers` layers for the
Transformer decoder, Mean-Max AAE's one) and random parameters whose EOS logit is pushed to -1e9,
so every row decodes exactly `length` tokens and both variants do the same number of steps.
Decoded tokens/s = batch * length / the median wall seconds of one jitted `translate` call
(encoding `--batch` random sources of `--source` tokens included; beam search keeps `--beam`
hypotheses per row and returns one). The cached decoder costs O(length) decoder positions per
row, the reference O(length^2), so the ratio grows with the length. The two variants of a line
take turns (bench.common.time_in_turns, settled), so the load of a shared machine hits both
alike; the table also says whether they returned the same tokens.

    python -m bench.bench_decoding --lengths 16,64 --model-dim 64 --ff-dim 128 --repeats 3
    python -m bench.bench_decoding --budget 100 --out results/bench/decoding.md
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import jax
import numpy as np

from bench.common import measure_and_report, parse_ints, time_in_turns
from bench.machine import machine_words
from jaxenc import cli
from jaxenc.configs import model_config
from jaxenc.data.vocab import EOS, NUM_SPECIAL
from jaxenc.layers.transformer import TransformerDecoder
from jaxenc.models.registry import build_encoder, own_decoder
from jaxenc.tasks.seq2seq import Seq2Seq, translate

DECODERS = ("transformer", "meanmax")
SEARCHES = ("greedy", "beam")


def build(decoder: str, args: argparse.Namespace) -> Seq2Seq:
    """The seq2seq model of `decoder` at the widths of `args`, without dropout."""
    widths = dict(embed_dim=args.model_dim, model_dim=args.model_dim, ff_dim=args.ff_dim,
                  num_heads=args.heads, dropout_rate=0.0)
    if decoder == "transformer":
        encoder = build_encoder(model_config("transformer", num_layers=1, **widths), args.vocab)
        return Seq2Seq(encoder, TransformerDecoder(args.vocab, args.model_dim, args.layers,
                                                   args.heads, args.ff_dim, dropout_rate=0.0))
    encoder = build_encoder(model_config("meanmax_aae", **widths), args.vocab)
    return Seq2Seq(encoder, own_decoder(encoder, args.vocab), share_word_table=True)


def random_batch(args: argparse.Namespace) -> dict[str, np.ndarray]:
    """`--batch` full-length random sources of `--source` tokens (the target sizes the init)."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(NUM_SPECIAL, args.vocab, (args.batch, args.source)).astype(np.int32)
    lengths = np.full(args.batch, args.source, np.int32)
    return {"source/tokens": tokens, "source/lengths": lengths, "target/tokens": tokens,
            "target/lengths": lengths, "weight": np.ones(args.batch, np.float32)}


def never_ending(model: Seq2Seq, batch: dict[str, np.ndarray]) -> dict:
    """Random parameters of `model` whose decoder never emits EOS (logit bias -1e9)."""
    params = jax.jit(functools.partial(model.init, train=False))(jax.random.key(0),
                                                                  batch)["params"]
    params["decoder"]["logits"]["bias"] = params["decoder"]["logits"]["bias"].at[EOS].set(-1e9)
    return params


def measure(args: argparse.Namespace) -> list[dict]:
    """One row per (decoder, search, length): tokens/s of both variants and whether their
    tokens agree."""
    batch, rows = random_batch(args), []
    for decoder in args.decoders:
        model = build(decoder, args)
        params = never_ending(model, batch)
        for search in args.searches:
            beam_size = args.beam if search == "beam" else 1
            for length in args.lengths:
                variants = {cached: jax.jit(functools.partial(
                    translate, model, max_length=length, beam_size=beam_size, cached=cached))
                    for cached in (False, True)}
                # the first calls compile, so the timed budget counts calls, not compilation
                outputs = [np.asarray(fn(params, batch)) for fn in variants.values()]
                timings = time_in_turns({str(cached): (fn, (params, batch))
                                         for cached, fn in variants.items()}, args.repeats,
                                        budget_s=args.budget)
                rate = {cached: args.batch * length / timings[str(cached)].wall
                        for cached in variants}
                rows.append(dict(decoder=decoder, search=search, length=length,
                                 uncached=rate[False], cached=rate[True],
                                 ratio=rate[True] / rate[False],
                                 same=bool(np.array_equal(*outputs)),
                                 calls=min(t.calls for t in timings.values()),
                                 recompiles=sum(t.compiles for t in timings.values())))
                print(f"{decoder} {search} {length}: {rate[False]:,.0f} -> {rate[True]:,.0f} "
                      f"tokens/s", flush=True)
    return rows


def markdown(rows: list[dict], args: argparse.Namespace, load: tuple[float, float]) -> str:
    """The table: decoded tokens/s, uncached and cached, and their ratio, after a line that
    states the settings and the machine (CPU model, cores, load average, JAX version)."""
    lines = [f"Decoded tokens/s, batch {args.batch} (beam search: {args.beam} hypotheses per "
             f"row), source {args.source} tokens, d {args.model_dim}, ff {args.ff_dim}, "
             f"{args.heads} heads, Transformer decoder {args.layers} layers, vocabulary "
             f"{args.vocab}; {machine_words(load)}; median of up to "
             f"{args.repeats} calls per variant, the two taking turns "
             "(python -m bench.bench_decoding).", "",
             "| decoder | search | length | uncached tokens/s | cached tokens/s | "
             "cached / uncached | same tokens | timed calls | recompiles |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['decoder']} | {row['search']} | {row['length']} | "
                     f"{row['uncached']:,.0f} | {row['cached']:,.0f} | {row['ratio']:.2f} | "
                     f"{'yes' if row['same'] else 'NO'} | {row['calls']} | "
                     f"{row['recompiles']} |")
    return "\n".join(lines) + "\n"


def names(allowed: tuple[str, ...]):
    """argparse type: "a,b" -> ("a", "b"), each one of `allowed`."""

    def parse(text: str) -> tuple[str, ...]:
        chosen = tuple(name for name in text.split(",") if name)
        unknown = [name for name in chosen if name not in allowed]
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(f"{text!r} is not a list of {', '.join(allowed)} "
                                             f"(e.g. {','.join(allowed)})")
        return chosen

    return parse


@cli.reports_errors
def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_decoding",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--decoders", type=names(DECODERS), default=DECODERS,
                        help="comma-separated: transformer (TransformerDecoder on a Transformer "
                             "encoder), meanmax (Mean-Max AAE's own decoder)")
    parser.add_argument("--searches", type=names(SEARCHES), default=SEARCHES,
                        help="comma-separated: greedy, beam")
    parser.add_argument("--lengths", type=parse_ints, default=[16, 64],
                        help="decoded tokens per row, comma-separated")
    parser.add_argument("--batch", type=int, default=16, help="source sentences per call")
    parser.add_argument("--beam", type=int, default=4, help="hypotheses per row (beam search)")
    parser.add_argument("--source", type=int, default=16, help="tokens per source sentence")
    parser.add_argument("--model-dim", type=int, default=256, help="model width d")
    parser.add_argument("--ff-dim", type=int, default=512, help="feed-forward width")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument("--layers", type=int, default=2, help="Transformer decoder layers")
    parser.add_argument("--vocab", type=int, default=8000, help="output vocabulary size")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per variant")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds of timed calls per variant at most (fewer calls when "
                             "one is slow; at least one)")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the table to this markdown file")
    return measure_and_report(measure, markdown, parser.parse_args(argv))


if __name__ == "__main__":
    main()
