"""reports.mrpc_baselines: the word-overlap features against pairs worked by hand,
and the committed baseline numbers against a recomputation on the shared MRPC files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxenc.records import Sentence
from reports import encoder_tables
from reports import mrpc_baselines as baselines


def _sentence(text: str) -> Sentence:
    return Sentence(tokens=tuple(text.split()))


@pytest.mark.parametrize("first, second, expected", [
    # words: the cat sat on 3 mats / a cat sat on 4 mats; shared cat sat on mats (4 of 6 each);
    # bigrams: cat-sat, sat-on shared of 8 distinct; lengths 6 and 6; numbers {3} vs {4}
    ("The cat sat on 3 mats .", "A cat sat on 4 mats", [4 / 6, 4 / 6, 2 / 8, 1.0, 0.0]),
    # case folded, repeats counted once as words but in the length; no numbers on either side
    ("Dogs bark , dogs bark", "dogs", [1 / 2, 1.0, 0.0, 1 / 4, 1.0]),
    # punctuation only: no words, nothing shared, no division by zero
    (". ,", "Yes !", [0.0, 0.0, 0.0, 0.0, 1.0]),
    # the same numbers in a different order
    ("rose 5 % to 12", "12 and 5 %", [2 / 4, 2 / 3, 0.0, 3 / 4, 1.0]),
])
def test_overlap_features_match_pairs_counted_by_hand(first, second, expected):
    features = baselines.overlap_features(_sentence(first), _sentence(second))
    assert features.dtype == np.float32
    np.testing.assert_allclose(features, expected, rtol=1e-6)


def test_overlap_features_are_finite_for_two_empty_sentences():
    features = baselines.overlap_features(_sentence("."), _sentence("?"))
    assert np.all(np.isfinite(features)) and features.tolist() == [0, 0, 0, 0, 1]


def test_committed_overlap_baseline_is_recomputed_from_the_shared_files(data_root):
    committed = json.loads(baselines.OUT.read_text())
    fresh = baselines.evaluate(seeds=[0], data_dir=str(data_root), names=["overlap"])
    assert fresh["majority_test"] == committed["majority_test"]
    assert fresh["features"] == committed["features"]
    row, expected = fresh["baselines"]["overlap"]["0"], committed["baselines"]["overlap"]["0"]
    assert row["l2"] == expected["l2"]
    assert row["dev"] == pytest.approx(expected["dev"], abs=0.01)
    assert row["test"] == pytest.approx(expected["test"], abs=0.01)


def test_each_seed_carves_the_dev_split_of_the_table_runs(data_root):
    """The baselines' seed-s dev split is the one the table runs of seed s read: the same size
    for every seed, different pairs for different seeds, train and dev disjoint."""
    splits = [baselines.seed_splits(seed, str(data_root)) for seed in (0, 1)]
    uids = [{example.uid for example in split["dev"]} for split in splits]
    assert len(uids[0]) == len(uids[1]) == len(splits[0]["dev"]) > 0
    assert uids[0] != uids[1]
    assert not uids[0] & {example.uid for example in splits[0]["train"]}


def _results_md_test_accuracy(path) -> float:
    """Test accuracy (%) from a run's results.md row, read by column name."""
    header, row = ([cell.strip() for cell in line.strip().strip("|").split("|")]
                   for line in path.read_text().splitlines() if line.startswith("| "))
    return 100 * float(dict(zip(header, row, strict=True))["test accuracy"])


def test_trained_rows_are_the_committed_mrpc_runs_seed_by_seed():
    rows = {line.split(" | ")[0].lstrip("| "): line.strip("|").split(" | ")[1:]
            for line in encoder_tables.mrpc_baselines_table().splitlines()[2:]}
    runs_dir = encoder_tables.RUNS
    for label, model in (("Tree-LSTM (trained, word vectors fine-tuned)", "tree_lstm"),
                         ("bag of embeddings (trained, word vectors fine-tuned)", "bag")):
        cells = [cell.strip() for cell in rows[label]]
        folders = {seed: runs_dir / f"{model}_mrpc_s{seed}" for seed in range(5)}
        expected = {seed: _results_md_test_accuracy(folder / "results.md")
                    for seed, folder in folders.items() if folder.is_dir()}
        assert expected, f"no committed {model} MRPC run"
        for seed in range(5):
            assert cells[seed] == (f"{expected[seed]:.2f}" if seed in expected else "—")
        assert cells[5].startswith(f"{np.mean(list(expected.values())):.2f}")
    committed = json.loads(baselines.OUT.read_text())
    overlap = [cell.strip() for cell in
               rows["word overlap (5 numbers), logistic regression"]]
    assert overlap[:5] == [f"{committed['baselines']['overlap'][str(seed)]['test']:.2f}"
                           for seed in range(5)]
