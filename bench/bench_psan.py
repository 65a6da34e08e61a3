"""PSAN's Table 5 comparison on TREC: peak train-step memory (compiled memory analysis) and step
time of PSAN (packed, dense and streaming phrase attention), DiSAN (dense and blocked) and the
multi-head Transformer, 300-d sentence vectors each, on the SAME real TREC batch and bucket,
measured side by side in one run; plus the data's own bound sum_t sum_p l_p^2 / (2 L^2).

TREC questions get phrase trees from the `spacy-constituency` parser (cached in --cache_dir).
The batch is the training batch of the chosen bucket with the most tokens (batch 64, TREC's
longest questions pad to 40): the paper's numbers (PSAN 1192 MB, DiSAN 2943 MB, multi-head 1508
MB) are GPU process peaks of whole training runs, so only the ratios compare.

    python -m bench.bench_psan --bucket 24 --batch 64
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import numpy as np

from bench.common import memory_mib, phrase_data_bound, time_in_turns, train_step
from jaxenc import cli
from jaxenc.data import registry
from jaxenc.data.batching import Batcher, sentence_fields
from jaxenc.data.featurize import Featurizer
from jaxenc.data.paths import data_dir
from jaxenc.data.vocab import Vocabulary
from jaxenc.models.registry import build_encoder, structure_spec
from train.configs import base

MODELS = {  # label -> (model, overrides): 300-d sentence vectors each (Table 5)
    "PSAN packed": ("psan", dict(psa_impl="packed")),
    "PSAN packed, chunk 16": ("psan", dict(psa_impl="packed", packed_chunk=16)),
    "PSAN packed, chunk 1": ("psan", dict(psa_impl="packed", packed_chunk=1)),
    "PSAN dense": ("psan", dict(psa_impl="dense")),
    "PSAN streaming": ("psan", dict(psa_impl="streaming")),
    "DiSAN dense": ("disan", dict(hidden=150, attention_impl="dense")),
    "DiSAN blocked": ("disan", dict(hidden=150, attention_impl="blocked")),
    "Transformer": ("transformer", {}),
}


def trec_batch(model_cfg, examples, vocab, args) -> dict[str, np.ndarray]:
    """The sentence fields of the fullest training batch of bucket `args.bucket`."""
    needs = structure_spec(model_cfg)
    featurizer = Featurizer(kind="single", vocab=vocab, model_cfg=model_cfg,
                            structure_fields=needs.fields, prefix=needs.prefix_tokens,
                            parse_cache_dir=args.cache_dir)
    features = [f for f in featurizer.many(examples)
                if args.bucket - 8 < len(f["sentence/tokens"]) <= args.bucket]
    packing = needs.packing and dataclasses.replace(needs.packing, epochs=1)
    batches = Batcher(features, batch_size=args.batch, buckets=(args.bucket,), shuffle=True,
                      seed=0, packing=packing).epoch(0)
    return sentence_fields(max(batches, key=lambda b: b["sentence/lengths"].sum()), "sentence")


@cli.reports_errors
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bucket", type=int, default=24, help="bucket length (tokens)")
    parser.add_argument("--batch", type=int, default=64, help="sentences per batch")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per model")
    parser.add_argument("--data_dir", default=None, help="shared/data ($JAXENC_DATA_DIR)")
    parser.add_argument("--cache_dir", default="/tmp/jaxenc_parse_cache",
                        help="spaCy parse cache")
    args = parser.parse_args()
    examples = registry.load("trec", "train", data_dir=str(data_dir(args.data_dir)))
    vocab = Vocabulary.build(e.sentences[0].tokens for e in examples)
    steps, batches = {}, {}
    for label, (name, overrides) in MODELS.items():
        model_cfg = base.get_config(f"{name},trec").model
        model_cfg.update(overrides)
        batches[label] = batch = trec_batch(model_cfg, examples, vocab, args)
        encoder = build_encoder(model_cfg, len(vocab))
        params = jax.jit(lambda key, e=encoder, b=batch: e.init(key, b, train=False))(
            jax.random.key(0))
        steps[label] = train_step(encoder, params, batch)
    timings = time_in_turns(steps, args.repeats)
    dense_peak = memory_mib(steps["DiSAN dense"][0])[1]
    psan_batch = batches["PSAN dense"]
    bound = phrase_data_bound(psan_batch["segments"], psan_batch["lengths"], args.bucket)
    print(f"TREC, batch {args.batch}, bucket {args.bucket}; data bound sum l^2 / 2 L^2 = "
          f"{bound:.3f}")
    print(f"{'model':>22} {'temp MiB':>9} {'peak MiB':>9} {'/ DiSAN dense':>13} {'step ms':>8}")
    for label, (compiled, _) in steps.items():
        temp, peak = memory_mib(compiled)
        print(f"{label:>22} {temp:9.1f} {peak:9.1f} {peak / dense_peak:13.2f} "
              f"{1e3 * timings[label][0]:8.1f}")


if __name__ == "__main__":
    main()
