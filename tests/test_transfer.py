"""Transfer evaluation: encoders and their cache, the relatedness head, the report, the CLI."""

import json
import math

import jax
import numpy as np
import optax
import pytest

from jaxenc.errors import ConfigError, DataError
from jaxenc.evaluation import relatedness, transfer
from jaxenc.evaluation.encoders import (
    BagOfEmbeddings,
    CheckpointEncoder,
    EmbeddingCache,
    SentenceEncoder,
    load_encoder,
)
from jaxenc.evaluation.paper_results import PAPER_RESULTS, SENTEVAL_TEST_SIZES
from jaxenc.evaluation.relatedness import fit_relatedness, score_distribution
from jaxenc.evaluation.transfer_report import averages, render_markdown, write_report
from jaxenc.records import Sentence

GLOVE = ("glove_subsets/glove.6B.50d.first2446.txt", "glove_subsets/glove.6B.50d.subset5403.txt")


def sentence(text: str) -> Sentence:
    return Sentence(tokens=tuple(text.split()), text=text)


# ----------------------------------------------------------------------------- relatedness


@pytest.mark.parametrize("score_range", [(1.0, 5.0), (0.0, 5.0)])
def test_relatedness_target_follows_the_tai_formula(score_range):
    low, high = score_range
    scores = np.array([low, high, 2.0, 3.7, 1.25, 4.999, (low + high) / 2])
    target = np.asarray(score_distribution(scores, score_range))
    num_classes = int(high - low) + 1
    assert target.shape == (len(scores), num_classes)
    for row, y in zip(target, scores, strict=True):
        expected = np.zeros(num_classes)
        floor = math.floor(y)
        expected[floor - int(low)] = floor - y + 1  # class k holds the score low + k
        if floor < high:
            expected[floor - int(low) + 1] = y - floor
        np.testing.assert_allclose(row, expected, atol=1e-6)
        assert row @ (low + np.arange(num_classes)) == pytest.approx(y, abs=1e-5)


# SentEval's linear head ranks as well but calibrates the expected score more slowly
@pytest.mark.parametrize("head, max_mse", [("tai", 0.2), ("senteval", 0.4)])
def test_relatedness_head_learns_a_function_of_the_pair(head, max_mse):
    """Unit vectors scored 3 + 2 u.v (variance 2/3): the head sees u * v, so it can fit the
    score closely."""
    rng = np.random.default_rng(0)

    def split(n):
        u, v = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in rng.normal(size=(2, n, 6)))
        return u.astype(np.float32), v.astype(np.float32), 3 + 2 * np.sum(u * v, axis=1)

    sixty_epochs = relatedness.RelatednessSchedule(
        epochs_per_eval=1, max_epochs=60, patience=5, reset_on_improvement=True,
        last_block_may_pass_max=False)
    score = fit_relatedness(split(800), split(200), split(200), score_range=(1.0, 5.0),
                            schedule=sixty_epochs, head=head)
    assert score.pearson > 0.9 and score.spearman > 0.85 and score.dev_pearson > 0.9
    assert score.mse < max_mse and 1 <= score.best_epoch <= 60


def numpy_senteval_epochs(params, u, v, targets, plans, learning_rate=1e-3, b1=0.9, b2=0.999,
                          eps=1e-8):
    """SentEval's relatedness training written out in numpy: p = softmax(W [|u-v|, u*v] + b),
    loss sum over the batch and the classes of (p - target)^2, its gradient by hand, and
    PyTorch's Adam; `plans` the (rows, weights) of each epoch's batches."""
    kernel, bias = (np.array(params["logits"][k], np.float64) for k in ("kernel", "bias"))
    moments = [[np.zeros_like(kernel), np.zeros_like(bias)] for _ in range(2)]
    step = 0
    for rows, weights in plans:
        for batch_rows, weight in zip(rows, weights, strict=True):
            x = np.concatenate([np.abs(u[batch_rows] - v[batch_rows]),
                                u[batch_rows] * v[batch_rows]], axis=1).astype(np.float64)
            logits = x @ kernel + bias
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            d_p = 2 * weight[:, None] * (p - targets[batch_rows])
            d_logits = p * (d_p - np.sum(d_p * p, axis=1, keepdims=True))  # softmax's Jacobian
            step += 1
            for i, (param, grad) in enumerate([(kernel, x.T @ d_logits),
                                               (bias, d_logits.sum(axis=0))]):
                moments[0][i] = b1 * moments[0][i] + (1 - b1) * grad
                moments[1][i] = b2 * moments[1][i] + (1 - b2) * grad**2
                m_hat = moments[0][i] / (1 - b1**step)
                v_hat = moments[1][i] / (1 - b2**step)
                param -= learning_rate * m_hat / (np.sqrt(v_hat) + eps)
    return kernel, bias


def test_senteval_head_trains_as_senteval_s_linear_model():
    rng = np.random.default_rng(3)
    u, v = rng.normal(size=(2, 70, 4)).astype(np.float32)
    scores = rng.uniform(1, 5, size=70)
    targets = np.asarray(score_distribution(scores, (1.0, 5.0)))
    model = relatedness.HEADS["senteval"]
    head = model.build(5, 50)
    params = head.init(jax.random.key(0), u[:1], v[:1])["params"]
    kernel, bias = np.asarray(params["logits"]["kernel"]), np.asarray(params["logits"]["bias"])
    assert kernel.shape == (8, 5) and bias.shape == (5,)  # one layer on [|u-v|, u*v]
    bound = 8 ** -0.5  # PyTorch's nn.Linear: uniform in +-1/sqrt(fan_in)
    assert np.abs(kernel).max() <= bound and np.abs(bias).max() <= bound
    assert np.abs(kernel).max() > 0.8 * bound and np.abs(bias).max() > 0
    features = np.concatenate([np.abs(u - v), u * v], axis=1)
    logits = features @ kernel + bias
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(np.exp(head.apply({"params": params}, u, v)), softmax,
                               rtol=1e-5, atol=1e-6)
    optimizer = optax.adam(1e-3)
    run_epoch = relatedness._epoch_runner(head, model.loss, optimizer)
    plan_rng = np.random.default_rng(1111)
    plans = [relatedness._batch_plan(70, 16, plan_rng) for _ in range(3)]
    trained, opt_state = params, optimizer.init(params)
    for rows, weights in plans:
        trained, opt_state = run_epoch(trained, opt_state, u, v, targets, rows, weights)
    want_kernel, want_bias = numpy_senteval_epochs(params, u, v, targets, plans)
    assert not np.allclose(want_kernel, kernel, atol=1e-3)  # it moved
    np.testing.assert_allclose(trained["logits"]["kernel"], want_kernel, rtol=1e-4, atol=2e-6)
    np.testing.assert_allclose(trained["logits"]["bias"], want_bias, rtol=1e-4, atol=2e-6)


def test_an_unknown_relatedness_head_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError, match="relatedness head 'mlp' is not one of tai, senteval "
                                          r"\(fix: --relatedness_head tai\)"):
        transfer.run_transfer("bag:x.txt", ["SICKR"], tmp_path, relatedness_head="mlp")


def senteval_loop(dev_pearsons):
    """SentEval's RelatednessPytorch.run, its loop kept, training replaced by reading the next
    dev Pearson: (epochs trained, epoch of the kept model)."""
    nepoch, bestpr, early_stop_count, stop_train, best_epoch = 0, -1, 0, False, None
    scripted = iter(dev_pearsons)
    while not stop_train and nepoch <= 1000:
        nepoch += 50
        pr = next(scripted)
        if pr > bestpr:
            bestpr, best_epoch = pr, nepoch
        else:
            if early_stop_count >= 3:
                stop_train = True
            early_stop_count += 1
    return nepoch, best_epoch


def per_epoch_loop(dev_pearsons):
    """The per-epoch schedule written out: dev after each of at most 100 epochs, stop 5 epochs
    after the best."""
    best, best_epoch = -np.inf, 0
    for epoch, pr in enumerate(dev_pearsons[:100], start=1):
        if pr > best:
            best, best_epoch = pr, epoch
        elif epoch - best_epoch >= 5:
            return epoch, best_epoch
    return 100, best_epoch


@pytest.mark.parametrize("name, reference", [("senteval", senteval_loop),
                                             ("epoch", per_epoch_loop)])
@pytest.mark.parametrize("dev_pearsons", [
    [0.1, 0.2, 0.15, 0.3, 0.25, 0.2, 0.1, 0.35, 0.4, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0] + [0.0] * 90,
    [0.1 + 0.001 * i for i in range(120)],  # always improving: the cap stops it
    [0.5] + [0.4, 0.45, 0.6, 0.3, 0.61, 0.2, 0.1, 0.7, 0.8] + [0.0] * 100,
])
def test_relatedness_schedules_stop_and_keep_as_their_loops(monkeypatch, name, reference,
                                                           dev_pearsons):
    """Training replaced by a counter and dev Pearson by a script: the epochs trained and the
    epoch kept equal those of the loop each schedule names (SentEval's own loop for senteval)."""
    trained = []

    def counting_runner(*head_loss_and_optimizer):
        def run_epoch(params, opt_state, *arrays):
            trained.append(1)
            return params, opt_state
        return run_epoch

    readings = iter(dev_pearsons)
    monkeypatch.setattr(relatedness, "_epoch_runner", counting_runner)
    monkeypatch.setattr(relatedness, "pearson", lambda predictions, gold: next(readings))
    pair = (np.ones((4, 3), np.float32), np.ones((4, 3), np.float32), np.array([1., 2., 3., 4.]))
    score = fit_relatedness(pair, pair, pair, score_range=(1.0, 5.0), schedule=name)
    assert (len(trained), score.best_epoch) == reference(dev_pearsons)


def test_an_unknown_relatedness_schedule_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError, match="relatedness schedule 'weekly'.*--relatedness_schedule"):
        transfer.run_transfer("bag:x.txt", ["SICKR"], tmp_path, relatedness_schedule="weekly")


# ----------------------------------------------------------------------------- encoders


def write_glove(path, vectors):
    path.write_text("".join(f"{w} {' '.join(f'{x:g}' for x in v)}\n" for w, v in vectors.items()))
    return path


def test_bag_of_embeddings_merges_files_and_averages_known_words(tmp_path):
    first = {"the": [1, 0, 0], "cat": [0, 1, 0], "dog": [1, 1, 2]}
    second = {"the": [9, 9, 9], "sat": [2, 2, 0], "cat": [7, 7, 7], "mat": [0, 0, 4]}
    encoder = BagOfEmbeddings([write_glove(tmp_path / "a.txt", first),
                               write_glove(tmp_path / "b.txt", second)])
    assert isinstance(encoder, SentenceEncoder)
    sentences = [sentence("The cat sat on the mat"), sentence("zzz qqq"),
                 sentence("dog dog unknown"), sentence("cat")]
    got = encoder.encode(sentences)

    def vector(word):  # reference: first file first, then the lower-cased word
        for table in (first, second):
            for form in (word, word.lower()):
                if form in table:
                    return np.array(table[form], float)
        return None

    assert got.shape == (4, 3) and got.dtype == np.float32
    for row, s in zip(got, sentences, strict=True):
        known = [vector(t) for t in s.tokens if vector(t) is not None]
        np.testing.assert_allclose(row, np.mean(known, axis=0) if known else np.zeros(3))
    np.testing.assert_array_equal(encoder.encode(sentences[2:]), got[2:])  # remembered words


def test_bag_name_follows_the_files_and_dimensions_must_agree(tmp_path):
    path = write_glove(tmp_path / "a.txt", {"the": [1, 2]})
    name = BagOfEmbeddings([path]).name
    assert BagOfEmbeddings([path]).name == name
    write_glove(path, {"the": [1, 2], "cat": [3, 4]})
    assert BagOfEmbeddings([path]).name != name
    mixed = BagOfEmbeddings([path, write_glove(tmp_path / "b.txt", {"dog": [1, 2, 3]})])
    with pytest.raises(DataError, match="b.txt"):
        mixed.encode([sentence("dog")])
    with pytest.raises(DataError, match="not found"):
        load_encoder(f"bag:{tmp_path / 'missing.txt'}")
    with pytest.raises(ConfigError, match="neither"):
        load_encoder(str(tmp_path / "no_such_run"))


class CountingEncoder:
    """Vector = (number of tokens, length of the text); records every call."""

    name = "counting"

    def __init__(self):
        self.calls = []

    def encode(self, sentences):
        self.calls.append(list(sentences))
        return np.array([[len(s.tokens), len(s.text)] for s in sentences], np.float32)


def test_cache_encodes_distinct_sentences_once_and_reuses_the_file(tmp_path):
    encoder, cache = CountingEncoder(), EmbeddingCache(tmp_path)
    sentences = [sentence("a b"), sentence("c"), sentence("a b"), sentence("d e f")]
    first = cache.encode(encoder, sentences, "MR", "all")
    np.testing.assert_array_equal(first, [[2, 3], [1, 1], [2, 3], [3, 5]])
    assert encoder.calls == [[sentences[0], sentences[1], sentences[3]]]
    assert (tmp_path / "counting" / "MR.all.npz").is_file()
    np.testing.assert_array_equal(cache.encode(encoder, sentences, "MR", "all"), first)
    assert len(encoder.calls) == 1  # read back from disk
    changed = cache.encode(encoder, sentences[:2], "MR", "all")
    assert len(encoder.calls) == 2 and changed.shape == (2, 2)  # other sentences: recomputed


@pytest.fixture(scope="module")
def trained_bag_run(tmp_path_factory):
    """A few training steps of the bag-of-words encoder on the embedded synthetic data."""
    from jaxenc.training import experiment
    from train.configs import base

    config = base.get_config("bag,synthetic")
    config.model.embed_dim = 8
    config.task.head.hidden_dims = (8,)
    config.data.update(dict(batch_size=16, eval_batch_size=64, max_length=32, bucket_step=16))
    config.train.update(dict(num_steps=2, eval_every=2, log_every=2, progress_bar=False))
    workdir = tmp_path_factory.mktemp("bag_run")
    experiment.run(config, workdir)
    return workdir


def test_checkpoint_encoder_matches_the_trained_embeddings(trained_bag_run):
    from jaxenc.training.checkpointing import load_trained_encoder

    encoder = load_encoder(str(trained_bag_run))
    assert isinstance(encoder, CheckpointEncoder) and encoder.name.startswith("ckpt-")
    encoder.batch_size, encoder.progress = 8, False  # several batches and buckets
    words = ["the", "film", "is", "good", "not", "bad", "very", "."]
    rng = np.random.default_rng(0)
    sentences = [sentence(" ".join(rng.choice(words, size=n))) for n in (3, 30, 1, 17, 9, 5) * 3]
    got = encoder.encode(sentences)
    _, params, vocab, _ = load_trained_encoder(trained_bag_run)
    table = np.asarray(params["embed"]["embedding"])
    expected = [table[vocab.encode(s.tokens)].mean(axis=0) for s in sentences]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- report


def test_paper_averages_reproduce_the_mean_max_table():
    """Zhang et al. (2018) Table 2 prints (macro, micro): 84.7/85.6, 86.0/86.0, 85.0/85.9."""
    rows = PAPER_RESULTS["Mean-Max AAE"]
    got = averages({task: (rows[task]["accuracy"], SENTEVAL_TEST_SIZES[task])
                    for task in SENTEVAL_TEST_SIZES})
    printed = {"8 tasks": (84.7, 85.6), "7 tasks": (86.0, 86.0), "6 tasks": (85.0, 85.9)}
    for name, (macro, micro) in printed.items():
        assert got[name][0] == pytest.approx(macro, abs=0.051)
        assert got[name][1] == pytest.approx(micro, abs=0.051)  # the paper rounds per task first


def fake_results():
    accuracy = {"MR": 70.0, "CR": 75.0, "SUBJ": 88.0, "MPQA": 80.0, "SST2": 72.0, "TREC": 80.0,
                "MRPC": 70.0, "SICKE": 74.0}
    tasks = {task: {"status": "ok", "seconds": 1.0, "metrics": {
        "accuracy": value, "dev_accuracy": value - 1, "l2": [1e-3, 1e-4],
        "num_test": SENTEVAL_TEST_SIZES[task]}} for task, value in accuracy.items()}
    tasks["MRPC"]["metrics"]["f1"] = 81.25
    tasks["SICKR"] = {"status": "ok", "seconds": 2.0, "metrics": {
        "pearson": 0.7123, "spearman": 0.65, "mse": 0.5, "dev_pearson": 0.7, "best_epoch": 9,
        "schedule": "senteval", "num_test": 4927}}
    tasks["STS14"] = {"status": "ok", "seconds": 0.5, "metrics": {
        "pearson": 0.5049, "spearman": 0.4, "pearson_mean": 0.45, "spearman_mean": 0.41,
        "num_test": 3750, "subsets": {"images": {"pearson": 0.5, "spearman": 0.4, "size": 750}}}}
    tasks["SST5"] = {"status": "skipped", "reason": "no data (sst5_sentences not found)"}
    return {"encoder": "bag-test", "seed": 1111, "tasks": tasks}


def test_report_table_puts_paper_numbers_beside_ours(tmp_path):
    results = fake_results()
    text = render_markdown(results)
    assert ("| task | ours | PSAN (paper) | Mean-Max AAE (paper) | DiSAN (paper) | "
            "GloVe BOW (paper) |") in text
    assert "| MR | 70.0 | 80.0 | 78.7 | 79.7 | 78.7 |" in text
    assert "| MRPC | 70.0/81.2 | 74.9/82.1 | 75.5/82.6 | 75.1/81.8 | 72.1/80.9 |" in text
    assert "| SICKR | 0.712 | 0.891 | 0.854 | 0.860 | 0.800 |" in text
    assert ("| SICKR | 0.712 | dev Pearson 0.700 (epoch 9, senteval schedule); test Spearman "
            "0.650, MSE 0.500 | 4927 | 2.0 |") in text
    assert "| STS14 | 0.50/0.40 | 0.69/0.67 | 0.58/0.56 | 0.66/0.64 | 0.54/0.56 |" in text
    assert "| SST5 | skipped | — | — | — | — |" in text
    assert "The macro/micro rows of every column, the papers' included, are averaged here" in text
    tasks = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "SICKE")
    values = [results["tasks"][t]["metrics"]["accuracy"] for t in tasks]
    sizes = [SENTEVAL_TEST_SIZES[t] for t in tasks]
    micro = sum(v * n for v, n in zip(values, sizes, strict=True)) / sum(sizes)
    assert f"| macro/micro acc, 8 tasks | {np.mean(values):.1f}/{micro:.1f} | 85.1/86.3 |" in text
    paths = write_report(results, tmp_path)
    assert json.loads(paths["json"].read_text()) == results
    assert paths["markdown"].read_text() == text
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(
        f"{t}.png" for t, e in results["tasks"].items() if e["status"] == "ok")
    assert paths["MRPC"].read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------------- CLI


def test_task_names_are_normalised_and_checked():
    assert transfer.task_names("sick-r, mr,STS_14") == ["SICKR", "MR", "STS14"]
    with pytest.raises(ConfigError, match="choose from"):
        transfer.task_names("MR,IMDB")


def test_help_explains_the_encoder_argument(capsys):
    with pytest.raises(SystemExit) as exit_info:
        transfer.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "bag:GLOVE_FILE" in out and "--tasks" in out and "STSB" in out
    assert "--long_sentences {truncate,error}" in out


def test_cli_on_real_data_reports_and_skips(data_root, tmp_path, capsys):
    vectors = ",".join(str(data_root / path) for path in GLOVE)
    results = transfer.main(["--encoder", f"bag:{vectors}", "--tasks", "SICKE,SICKR,STS14",
                             "--data_dir", str(data_root), "--out", str(tmp_path),
                             "--skip_missing"])
    tasks = results["tasks"]
    assert tasks["SICKE"]["status"] == "ok" and tasks["SICKR"]["status"] == "ok"
    assert tasks["SICKE"]["metrics"]["num_test"] == 4927
    assert tasks["SICKE"]["metrics"]["accuracy"] > 65.0  # majority class (neutral): 56.7%
    assert 0.5 < tasks["SICKR"]["metrics"]["pearson"] < 1.0
    assert tasks["STS14"] == {"status": "skipped", "reason": tasks["STS14"]["reason"]}
    assert "not found" in tasks["STS14"]["reason"]
    assert json.loads((tmp_path / "results.json").read_text()) == results
    shown = capsys.readouterr().out
    assert "| SICKE |" in shown and "senteval schedule, tai head)" in shown  # the defaults
    cached = tmp_path / "cache" / results["encoder"]
    assert sorted(p.name for p in cached.iterdir()) == sorted(
        f"{task}.{split}.npz" for task in ("SICKE", "SICKR") for split in ("train", "dev", "test"))


# ----------------------------------------------------------------------------- SentEval layouts


def write_sts(root, year, subsets, rows=12, last_pair=None):
    """SentEval's STS layout, `STS/STS<year>-en-test/STS.{input,gs}.<subset>.txt`, with pairs of
    random words and gold scores, then `last_pair` ("sentence1\tsentence2") scored 2.5."""
    rng = np.random.default_rng(year)
    words = ["a", "cat", "dog", "sat", "on", "the", "mat", "ran", "far", "away"]
    folder = root / "STS" / f"STS{year}-en-test"
    folder.mkdir(parents=True)
    for subset in subsets:
        pairs = [" ".join(rng.choice(words, 4)) + "\t" + " ".join(rng.choice(words, 4))
                 for _ in range(rows)] + ([last_pair] if last_pair else [])
        scores = [f"{x:.2f}" for x in rng.uniform(0, 5, rows)] + (["2.5"] if last_pair else [])
        (folder / f"STS.input.{subset}.txt").write_text("\n".join(pairs) + "\n")
        (folder / f"STS.gs.{subset}.txt").write_text("\n".join(scores) + "\n")


class WordCountEncoder:
    """Vector = counts of a few words; not finite for a sentence holding "poison", and a bug
    (RuntimeError) for one holding "boom"."""

    name = "word-count"
    words = ("a", "cat", "dog", "the", "mat", "ran")

    def encode(self, sentences):
        if any("boom" in s.tokens for s in sentences):
            raise RuntimeError("a bug in the encoder")
        vectors = np.array([[s.tokens.count(w) + 0.1 for w in self.words] for s in sentences],
                           np.float32)
        vectors[[i for i, s in enumerate(sentences) if "poison" in s.tokens]] = np.nan
        return vectors


def test_sts13_subsets_are_senteval_s_and_missing_subsets_give_a_partial_year(tmp_path):
    write_sts(tmp_path, 13, ["FNWN", "headlines"])  # OnWN absent, as licensed files often are
    write_sts(tmp_path, 12, ["MSRpar", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"])
    results = transfer.run_transfer(WordCountEncoder(), "STS13,STS12", tmp_path, tmp_path / "out")
    sts13, sts12 = results["tasks"]["STS13"], results["tasks"]["STS12"]
    assert sts13["status"] == sts12["status"] == "ok"
    assert set(sts13["metrics"]["subsets"]) == {"FNWN", "headlines"}
    assert sts13["metrics"]["missing"] == ["OnWN"] and sts12["metrics"]["missing"] == ["MSRvid"]
    assert sts13["metrics"]["num_test"] == 24
    text = render_markdown(results)
    assert "| STS13 | " in text and "partial (2 of 3 subsets)" in text
    assert "partial (4 of 5 subsets)" in text and "missing: MSRvid" in text


def test_a_failing_task_keeps_the_others_results(tmp_path, capsys, monkeypatch):
    write_sts(tmp_path, 13, ["FNWN", "headlines", "OnWN"])
    write_sts(tmp_path, 15, ["answers-forums"], last_pair="the poison\tthe cat")
    out = tmp_path / "out"
    monkeypatch.setattr(transfer, "load_encoder",
                        lambda spec, long_sentences: WordCountEncoder())
    with pytest.raises(SystemExit) as exit_info:
        transfer.main(["--encoder", "word-count", "--tasks", "STS15,STS13", "--data_dir",
                       str(tmp_path), "--out", str(out)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith("error: 1 of 2 tasks failed")
    assert "STS.input.answers-forums.txt:13" in error and "word-count" in error
    assert "STS15" in error and "not finite" in error
    saved = json.loads((out / "results.json").read_text())["tasks"]
    assert saved["STS15"]["status"] == "failed" and saved["STS13"]["status"] == "ok"
    assert "| STS15 | failed |" in (out / "results.md").read_text()


def test_results_are_written_as_each_task_finishes(tmp_path):
    write_sts(tmp_path, 13, ["FNWN", "headlines", "OnWN"])
    write_sts(tmp_path, 14, ["images"], last_pair="boom\tthe cat")
    with pytest.raises(RuntimeError, match="a bug"):
        transfer.run_transfer(WordCountEncoder(), "STS13,STS14", tmp_path, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert list(saved["tasks"]) == ["STS13"] and saved["tasks"]["STS13"]["status"] == "ok"


def test_a_named_task_without_data_is_refused_unless_skip_missing(tmp_path, capsys, monkeypatch):
    write_sts(tmp_path, 13, ["FNWN", "headlines", "OnWN"])  # the data root has no trec/ folder
    out = tmp_path / "out"
    monkeypatch.setattr(transfer, "load_encoder",
                        lambda spec, long_sentences: WordCountEncoder())
    args = ["--encoder", "word-count", "--tasks", "STS13,TREC", "--data_dir", str(tmp_path),
            "--out", str(out)]
    with pytest.raises(SystemExit) as exit_info:
        transfer.main(args)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"error: {tmp_path / 'trec'}: data folder of TREC not found (fix: put the "
                     "TREC data there, point --data_dir at a data root that has it, or pass "
                     "--skip_missing to skip it)")
    assert not out.exists()  # refused before anything ran

    results = transfer.main([*args, "--skip_missing"])
    assert results["tasks"]["STS13"]["status"] == "ok"
    assert results["tasks"]["TREC"] == {"status": "skipped",
                                        "reason": "no data (trec not found in the data root)"}
    assert "| TREC | skipped |" in capsys.readouterr().out
