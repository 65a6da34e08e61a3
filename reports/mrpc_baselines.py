"""Two MRPC baselines that learn nothing but a linear classifier: what the table's encoders are
measured against on MRPC.

- **word overlap**: five numbers per sentence pair (`overlap_features`: the shares of each
  sentence's distinct words found in the other, the share of shared word bigrams, the length
  ratio, whether the two sentences carry the same numbers), the classic lexical signal of
  paraphrase detection;
- **untrained bag**: the mean of the glove-6b-50d vectors of each sentence (`eval.transfer`'s
  `bag:glove-6b-50d` encoder, nothing fine-tuned), SentEval's pair features |u - v|, u * v (the
  table runs' MRPC head reads the same two).

Each is multinomial logistic regression (`jaxenc.evaluation.logreg.select_on_dev`: fitted on the
training pairs for each L2 of SentEval's grid, the L2 chosen on dev, test once) on the splits of
each table seed: MRPC ships no dev split, and each seed carves its own 10% of train (the table
runs' `load_splits` with `train.seed = seed`), so seed s here sees the train / dev split of the
table runs of seed s. Writes results/encoders/mrpc_baselines.json (dev and test accuracy and the
chosen L2 per seed); reports.encoder_tables builds the `mrpc_baselines` table from it and the
committed table runs.

  python -m reports.mrpc_baselines [--seeds 0,1,2,3,4] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxenc.evaluation import logreg
from jaxenc.evaluation.encoders import load_encoder
from jaxenc.records import Example, Sentence
from jaxenc.training import input_pipeline
from reports.encoder_tables import MRPC_BASELINES
from train.configs import base

OUT = MRPC_BASELINES
SEEDS = (0, 1, 2, 3, 4)
BAG = "bag:glove-6b-50d"
BASELINES = ("overlap", "untrained_bag")
FEATURES = ("share of sentence 1's words in sentence 2",
            "share of sentence 2's words in sentence 1",
            "shared bigrams / all distinct bigrams", "shorter length / longer length",
            "same numbers")


def _words(sentence: Sentence) -> list[str]:
    """Lower-cased tokens that hold a letter or a digit (punctuation does not count as overlap)."""
    return [token.lower() for token in sentence.tokens if any(c.isalnum() for c in token)]


def _is_number(word: str) -> bool:
    return any(c.isdigit() for c in word)


def overlap_features(first: Sentence, second: Sentence) -> np.ndarray:
    """float32[5]: the `FEATURES` of one pair, on `_words` (distinct words and bigrams; an empty
    set shares nothing)."""
    words = [_words(first), _words(second)]
    sets = [set(w) for w in words]
    bigrams = [set(zip(w[:-1], w[1:], strict=True)) for w in words]
    shared = len(sets[0] & sets[1])
    all_bigrams = len(bigrams[0] | bigrams[1])
    lengths = sorted(len(w) for w in words)
    numbers = [{w for w in s if _is_number(w)} for s in sets]
    return np.array([shared / max(len(sets[0]), 1), shared / max(len(sets[1]), 1),
                     len(bigrams[0] & bigrams[1]) / max(all_bigrams, 1),
                     lengths[0] / max(lengths[1], 1), float(numbers[0] == numbers[1])],
                    np.float32)


def overlap_inputs(examples: Sequence[Example]) -> np.ndarray:
    """float32[N, 5]: `overlap_features` of every pair."""
    return np.stack([overlap_features(*example.sentences) for example in examples])


def bag_inputs(examples: Sequence[Example], encoder) -> np.ndarray:
    """float32[N, 2D]: |u - v|, u * v of the bag's vectors u, v of each pair's two sentences."""
    u = encoder.encode([example.sentences[0] for example in examples])
    v = encoder.encode([example.sentences[1] for example in examples])
    return np.concatenate([np.abs(u - v), u * v], axis=1).astype(np.float32)


def seed_splits(seed: int, data_dir: str | None = None) -> dict[str, list[Example]]:
    """MRPC's train / dev / test as the table runs of `seed` read them."""
    config = base.get_config("bag,mrpc")
    config.train.seed = seed
    if data_dir:
        config.data.data_dir = data_dir
    return input_pipeline.load_splits(config)


def evaluate(seeds: Sequence[int] = SEEDS, data_dir: str | None = None,
             names: Sequence[str] = BASELINES) -> dict:
    """{"encoder", "features", "majority_test": the test share of the commoner class,
    "baselines": {name: {seed: {dev, test, l2}}}} for `names` of BASELINES (accuracies in
    percent)."""
    inputs = {"overlap": overlap_inputs}
    if "untrained_bag" in names:
        encoder = load_encoder(BAG)
        inputs["untrained_bag"] = lambda examples: bag_inputs(examples, encoder)
    baselines: dict[str, dict[str, dict]] = {name: {} for name in names}
    for seed in seeds:
        splits = seed_splits(seed, data_dir)
        labels = {name: np.array([e.label for e in examples], np.int32)
                  for name, examples in splits.items()}
        for name in names:
            score = logreg.select_on_dev(*((inputs[name](splits[split]), labels[split])
                                           for split in ("train", "dev", "test")),
                                         num_classes=2)
            baselines[name][str(seed)] = {"dev": round(score.dev_accuracy, 4),
                                          "test": round(score.test_accuracy, 4),
                                          "l2": score.l2[0]}
    majority = 100.0 * np.bincount(labels["test"]).max() / len(labels["test"])
    return {"encoder": BAG, "features": list(FEATURES), "majority_test": round(float(majority), 4),
            "baselines": baselines}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                        help="table seeds whose train / dev split to use (default: %(default)s)")
    parser.add_argument("--data_dir", default=None,
                        help="data root (default: $JAXENC_DATA_DIR, as training)")
    parser.add_argument("--out", type=Path, default=OUT, help="JSON file (default: %(default)s)")
    args = parser.parse_args(argv)
    results = evaluate([int(seed) for seed in args.seeds.split(",")], args.data_dir)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    for name, per_seed in results["baselines"].items():
        tests = [row["test"] for row in per_seed.values()]
        print(f"{name}: test accuracy {' '.join(f'{test:.2f}' for test in tests)} "
              f"(seeds {','.join(per_seed)}), mean {np.mean(tests):.2f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
