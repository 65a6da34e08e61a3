"""STS12-16 metrics against scipy on SentEval-layout files written here (no STS data ships)."""

import numpy as np
import pytest
import scipy.stats

from jaxenc.data.sts import SUBSETS, YEAR_FOLDERS
from jaxenc.evaluation.encoders import BagOfEmbeddings
from jaxenc.evaluation.sts import cosine_similarity, score_subset, summarize
from jaxenc.evaluation.transfer import run_transfer

DIM = 4


def write_vectors(path, rng, num_words=12):
    """GloVe text file of words w0..w{n-1}; returns {word: vector}."""
    vectors = {f"w{i}": rng.normal(size=DIM).round(4) for i in range(num_words)}
    path.write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vectors.items()))
    return {w: v.astype(np.float32) for w, v in vectors.items()}


def write_sts_year(root, year, rng, vocabulary):
    """STS.input / STS.gs files for every subset of `year`: some gold lines empty, some tied,
    some sentences made only of unknown words. Returns {subset: (pairs, gold lines)}."""
    folder = root / YEAR_FOLDERS[year]
    folder.mkdir(parents=True)
    written = {}
    for index, subset in enumerate(SUBSETS[year]):
        num_pairs = 8 + index
        words = list(vocabulary) + ["unknownword"]
        pairs = [tuple(" ".join(rng.choice(words, size=rng.integers(1, 6))) for _ in range(2))
                 for _ in range(num_pairs)]
        pairs[0] = ("unknownword unknownword", pairs[0][1])
        gold = [f"{rng.integers(0, 11) / 2:g}" for _ in range(num_pairs)]  # ties on purpose
        gold[1] = gold[num_pairs // 2] = ""  # pairs that are not scored
        (folder / f"STS.input.{subset}.txt").write_text(
            "".join(f"{a}\t{b}\n" for a, b in pairs))
        (folder / f"STS.gs.{subset}.txt").write_text("".join(f"{g}\n" for g in gold))
        written[subset] = (pairs, gold)
    return written


def bag_vector(text, vectors):
    """Reference mean of the known words' vectors, by a loop."""
    total, count = np.zeros(DIM, np.float64), 0
    for word in text.split():
        if word in vectors:
            total += vectors[word]
            count += 1
    return total / max(count, 1)


def reference_correlations(pairs, gold, vectors):
    """Pearson / Spearman of the loop cosine over the scored pairs, via scipy; and the count."""
    cosines, scores = [], []
    for (first, second), score in zip(pairs, gold, strict=True):
        if not score:
            continue
        u, v = bag_vector(first, vectors), bag_vector(second, vectors)
        norm = np.linalg.norm(u) * np.linalg.norm(v)
        cosines.append(float(u @ v / norm) if norm else 0.0)
        scores.append(float(score))
    return (scipy.stats.pearsonr(cosines, scores)[0], scipy.stats.spearmanr(cosines, scores)[0],
            len(scores))


def test_sts_year_matches_scipy_on_written_files(tmp_path):
    rng = np.random.default_rng(0)
    vectors = write_vectors(tmp_path / "vectors.txt", rng)
    written = write_sts_year(tmp_path / "data", 2012, rng, vectors)
    results = run_transfer(BagOfEmbeddings([tmp_path / "vectors.txt"]), "sts12",
                           tmp_path / "data", tmp_path / "out")
    entry = results["tasks"]["STS12"]
    assert entry["status"] == "ok"
    metrics = entry["metrics"]
    expected = {subset: reference_correlations(*written[subset], vectors) for subset in written}
    assert set(metrics["subsets"]) == set(expected)
    for subset, (pearson, spearman, size) in expected.items():
        got = metrics["subsets"][subset]
        assert got["size"] == size == len(written[subset][1]) - 2
        assert got["pearson"] == pytest.approx(pearson, abs=1e-5)
        assert got["spearman"] == pytest.approx(spearman, abs=1e-5)
    sizes = np.array([size for _, _, size in expected.values()])
    for k, metric in enumerate(("pearson", "spearman")):
        values = np.array([e[k] for e in expected.values()])
        assert metrics[f"{metric}_mean"] == pytest.approx(values.mean(), abs=1e-5)
        assert metrics[metric] == pytest.approx(np.sum(values * sizes) / sizes.sum(), abs=1e-5)
    assert metrics["num_test"] == sizes.sum()
    assert "| STS12 |" in (tmp_path / "out" / "results.md").read_text()


def test_cosine_similarity_is_zero_for_zero_vectors_and_matches_a_loop():
    rng = np.random.default_rng(1)
    u, v = rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    u[2] = 0.0
    got = cosine_similarity(u, v)
    for i in range(6):
        norm = np.linalg.norm(u[i]) * np.linalg.norm(v[i])
        assert got[i] == pytest.approx(u[i] @ v[i] / norm if norm else 0.0)


def test_subset_scores_and_summary_match_scipy_with_ties():
    rng = np.random.default_rng(2)
    u, v = rng.normal(size=(30, 3)), rng.normal(size=(30, 3))
    gold = rng.integers(0, 3, size=30).astype(float)  # heavy ties
    score = score_subset(u, v, gold)
    cosines = cosine_similarity(u, v)
    assert score.pearson == pytest.approx(scipy.stats.pearsonr(cosines, gold)[0])
    assert score.spearman == pytest.approx(scipy.stats.spearmanr(cosines, gold)[0])
    other = score_subset(u[:10], v[:10], gold[:10])
    summary = summarize({"a": score, "b": other})
    assert summary["pearson"] == pytest.approx((30 * score.pearson + 10 * other.pearson) / 40)
    assert summary["spearman_mean"] == pytest.approx((score.spearman + other.spearman) / 2)
    assert summary["subsets"]["b"]["size"] == 10 and summary["num_test"] == 40
