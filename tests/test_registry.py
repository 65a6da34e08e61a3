"""The dataset registry: metadata, the exact counts of shared/data/README.md for every dataset
present, labels and scores within range, and the errors for unknown or missing data."""

import collections
import re

import pytest

from jaxenc.data import registry
from jaxenc.data.paths import DATA_DIR_ENV
from jaxenc.errors import DataError

# (name, split) -> number of examples, from shared/data/README.md (SNLI: 1289 minus 16 '-').
README_COUNTS = {
    ("sick_e", "train"): 4500, ("sick_e", "dev"): 500, ("sick_e", "test"): 4927,
    ("sick_r", "train"): 4500, ("sick_r", "dev"): 500, ("sick_r", "test"): 4927,
    ("trec", "train"): 5452, ("trec", "test"): 500,
    ("trec_fine", "train"): 5452, ("trec_fine", "test"): 500,
    ("mrpc", "train"): 4076, ("mrpc", "test"): 1725,
    ("sst2", "train"): 6920, ("sst2", "dev"): 872, ("sst2", "test"): 1821,
    ("sst5", "train"): 8544, ("sst5", "dev"): 1101, ("sst5", "test"): 2210,
    ("sst5_trees", "train"): 8544, ("sst5_trees", "dev"): 1101, ("sst5_trees", "test"): 2210,
    ("sst5_phrases", "dev"): 1101, ("sst5_phrases", "test"): 2210,
    # SST-2 = the SST-5 trees without a neutral root: the same sentences as stsa.binary.*.
    ("sst2_trees", "train"): 6920, ("sst2_trees", "dev"): 872, ("sst2_trees", "test"): 1821,
    ("mr", "all"): 5331 + 5331, ("cr", "all"): 2407 + 1368, ("subj", "all"): 5000 + 5000,
    ("mpqa", "all"): 3312 + 7294,
    ("snli", "dev"): 1289 - 16,
    ("multi30k", "train"): 29000, ("multi30k", "dev"): 1014, ("multi30k", "test"): 1000,
    ("ud_ewt", "train"): 12544, ("ud_ewt", "dev"): 2001, ("ud_ewt", "test"): 2077,
    ("ptb_sample", "all"): 3914,
}
# Class counts the README states (label index -> count).
README_CLASS_COUNTS = {
    "mr": {0: 5331, 1: 5331}, "cr": {0: 1368, 1: 2407}, "subj": {0: 5000, 1: 5000},
    "mpqa": {0: 7294, 1: 3312},
}


@pytest.fixture(scope="module")
def load(data_root):
    """registry.load with the real data root, each split read once per module."""
    cache = {}

    def cached(name, split):
        if (name, split) not in cache:
            cache[name, split] = registry.load(name, split, data_root)
        return cache[name, split]

    return cached


def test_metadata_is_consistent():
    assert set(registry.DATASETS) >= {
        "sick_e", "sick_r", "trec", "trec_fine", "mrpc", "sst2", "sst5", "sst5_trees",
        "sst5_phrases", "sst2_trees", "mr", "cr", "subj", "mpqa", "snli", "multi30k", "ud_ewt",
        "ptb_sample", "sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "synthetic"}
    for name, info in registry.DATASETS.items():
        assert info.name == name and info.kind in registry.KINDS
        assert info.splits or name == "files", name  # the files of a training config
        if info.label_names is not None:
            assert info.num_classes == len(info.label_names)
            assert len(set(info.label_names)) == len(info.label_names)
        assert (info.score_range is not None) == (info.kind == "relatedness"), name
        if info.kind == "relatedness" and info.num_classes is not None:
            low, high = info.score_range
            assert info.num_classes == high - low + 1, name
    assert registry.DATASETS["sick_r"].num_classes == 5
    assert registry.DATASETS["synthetic"].folder is None


@pytest.mark.parametrize("name, split", sorted(README_COUNTS))
def test_counts_and_targets(load, name, split):
    info = registry.DATASETS[name]
    examples = load(name, split)
    assert len(examples) == README_COUNTS[name, split]
    assert len({example.uid for example in examples}) == len(examples)
    expected_sentences = 2 if info.kind in ("pair", "relatedness") else 1
    assert all(len(example.sentences) == expected_sentences for example in examples)
    if info.num_classes is not None and info.kind != "relatedness":
        counts = collections.Counter(example.label for example in examples)
        assert set(counts) == set(range(info.num_classes)) or split == "test", counts
        assert set(counts) <= set(range(info.num_classes))
        if name in README_CLASS_COUNTS:
            assert counts == README_CLASS_COUNTS[name]
    if info.kind == "relatedness":
        low, high = info.score_range
        assert all(low <= example.score <= high for example in examples)
    if info.kind == "translation":
        assert all(example.target is not None and len(example.target) for example in examples)
    if info.kind == "tagging":
        for example in examples:
            (sentence,) = example.sentences
            assert len(sentence.tags) == len(sentence.heads) == len(sentence) > 0


def test_ptb_sample_token_count(load):
    assert sum(len(example.sentences[0]) for example in load("ptb_sample", "all")) == 94084


def test_ud_ewt_train_shards_in_order(load):
    examples = load("ud_ewt", "train")
    shards = [example.uid.split(":")[0] for example in examples]
    assert list(dict.fromkeys(shards)) == [
        f"en_ewt-ud-train.part{part}of4.conllu" for part in range(1, 5)]


def test_trec_fine_labels_are_the_fine_classes(load):
    coarse, fine = load("trec", "train"), load("trec_fine", "train")
    names = registry.DATASETS["trec_fine"].label_names
    assert [example.label for example in fine] == [example.fine_label for example in coarse]
    assert all(names[example.label].startswith(registry.DATASETS["trec"].label_names[
        coarse_example.label] + ":") for example, coarse_example in zip(fine, coarse, strict=True))


def test_sst_tree_and_sentence_datasets_agree(load):
    for split in ("dev", "test"):
        trees, sentences = load("sst2_trees", split), load("sst2", split)
        assert collections.Counter(example.label for example in trees) == collections.Counter(
            example.label for example in sentences)


def test_sst5_phrases_train_is_every_labelled_node(data_root, tmp_path):
    # The first 300 real train trees (the whole file gives ~320k phrases: too slow for a test).
    lines = (data_root / "sst_ptb_trees" / "train.txt").read_text(encoding="utf-8").split("\n")
    (tmp_path / "sst_ptb_trees").mkdir()
    (tmp_path / "sst_ptb_trees" / "train.txt").write_text("\n".join(lines[:300]) + "\n")
    phrases = registry.load("sst5_phrases", "train", tmp_path)
    trees = registry.load("sst5_trees", "train", tmp_path)
    assert len(phrases) == sum(len(re.findall(r"\(\d", line)) for line in lines[:300])
    roots = [phrase for phrase in phrases if phrase.uid.endswith("#0")]
    assert [(root.sentences[0], root.label) for root in roots] == [
        (tree.sentences[0], tree.label) for tree in trees]
    assert collections.Counter(phrase.label for phrase in phrases).most_common(1)[0][0] == 2


def test_absent_splits_and_datasets_raise(data_root):
    with pytest.raises(DataError, match="no file matching snli_1.0_train"):
        registry.load("snli", "train", data_root)
    with pytest.raises(DataError, match=r"STS/STSBenchmark: folder of dataset 'stsb' not found"):
        registry.load("stsb", "train", data_root)


def test_unknown_name_and_split_list_the_valid_ones(tmp_path):
    with pytest.raises(DataError, match="unknown dataset 'sick'.*sick_e, sick_r"):
        registry.load("sick", "train", tmp_path)
    with pytest.raises(DataError, match="'trec' has no split 'dev'.*use one of train, test"):
        registry.load("trec", "dev", tmp_path)


def test_missing_folder_and_file_name_the_path(tmp_path, monkeypatch):
    with pytest.raises(DataError, match=f"{tmp_path / 'trec'}: folder of dataset 'trec'"):
        registry.load("trec", "train", tmp_path)
    (tmp_path / "trec").mkdir()
    with pytest.raises(DataError, match=f"{tmp_path / 'trec' / 'TREC.train'}: file not found"):
        registry.load("trec", "train", tmp_path)
    for name, split, folder, file_name in (
            ("ud_ewt", "dev", "ud_english_ewt", "en_ewt-ud-dev.conllu"),
            ("ptb_sample", "all", "nltk_treebank", "treebank.zip")):
        (tmp_path / folder).mkdir()
        with pytest.raises(DataError, match=f"{tmp_path / folder / file_name}: file not found"):
            registry.load(name, split, tmp_path)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    with pytest.raises(DataError, match="no data folder given"):
        registry.load("trec", "train")


def test_data_root_from_environment(tmp_path, monkeypatch):
    (tmp_path / "mpqa").mkdir()
    (tmp_path / "mpqa" / "mpqa.pos").write_text("good\n")
    (tmp_path / "mpqa" / "mpqa.neg").write_text("bad\nworse\n")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert [example.label for example in registry.load("mpqa", "all")] == [0, 0, 1]


def test_sts_datasets_in_senteval_layout(tmp_path):
    year = tmp_path / "STS" / "STS12-en-test"
    year.mkdir(parents=True)
    (year / "STS.input.MSRpar.txt").write_text("A b.\tA c.\nD e.\tF g.\n")
    (year / "STS.gs.MSRpar.txt").write_text("\n4.2\n")
    (example,) = registry.load("sts12", "MSRpar", tmp_path)
    assert (example.score, example.sentences[0].text) == (4.2, "D e.")
    bench = tmp_path / "STS" / "STSBenchmark"
    bench.mkdir()
    (bench / "sts-test.csv").write_text("main\tnews\t2016\t1\t2.5\tA b.\tA c.\n")
    assert [example.score for example in registry.load("stsb", "test", tmp_path)] == [2.5]
    assert registry.DATASETS["sts16"].splits[0] == "answer-answer"


def test_snli_prefers_the_full_file_and_rejects_ambiguity(tmp_path):
    folder = tmp_path / "snli"
    folder.mkdir()
    record = ('{"gold_label": "%s", "sentence1": "A.", "sentence2": "B.", "sentence1_parse": '
              '"(S (NN A))", "sentence2_parse": "(S (NN B))", "sentence1_binary_parse": "( A )", '
              '"sentence2_binary_parse": "( B )"}\n')
    (folder / "snli_1.0_dev.sample.jsonl").write_text(record % "neutral")
    (folder / "snli_1.0_dev.other.jsonl").write_text(record % "neutral")
    with pytest.raises(DataError, match="2 files matching snli_1.0_dev"):
        registry.load("snli", "dev", tmp_path)
    (folder / "snli_1.0_dev.jsonl").write_text(record % "contradiction")
    assert [example.label for example in registry.load("snli", "dev", tmp_path)] == [2]


def test_synthetic_needs_no_data_folder(monkeypatch):
    from jaxenc.data import synthetic

    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    info = registry.DATASETS["synthetic"]
    assert info.label_names == synthetic.LABEL_NAMES
    assert info.splits == tuple(synthetic.SPLIT_SIZES)
    examples = registry.load("synthetic", "dev")
    assert len(examples) == synthetic.SPLIT_SIZES["dev"]
    assert {example.label for example in examples} == set(range(info.num_classes))
