"""Vocabulary: fixed special ids, deterministic build, encode/decode, save/load and its errors."""

import random

import chex
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenc.data import vocab as vocab_lib
from jaxenc.data.vocab import BOS, CLS, EOS, PAD, ROOT, UNK, Vocabulary
from jaxenc.errors import DataError

SPECIALS = ["<pad>", "<unk>", "[root]", "[cls]", "<s>", "</s>"]


def reference_words(sentences, min_count, max_size=None, lowercase=False):
    """Regular words the slow way: count, keep >= min_count, sort by (-count, token)."""
    counts = {}
    for sentence in sentences:
        for token in sentence:
            token = token.lower() if lowercase else token
            counts[token] = counts.get(token, 0) + 1
    words = [w for w, c in counts.items() if c >= min_count and w not in SPECIALS]
    words.sort(key=lambda w: (-counts[w], w))
    return words if max_size is None else words[:max_size]


def test_special_ids_are_fixed():
    assert (PAD, UNK, ROOT, CLS, BOS, EOS) == (0, 1, 2, 3, 4, 5)
    vocab = Vocabulary.build([["b", "a", "b"]])
    assert list(vocab.tokens[:6]) == SPECIALS
    assert [vocab.id(t) for t in SPECIALS] == [PAD, UNK, ROOT, CLS, BOS, EOS]
    assert vocab.tokens[6:] == ("b", "a")


tokens = st.text(alphabet="abcABC<>/", min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(tokens, max_size=8), max_size=12), st.integers(1, 3),
       st.one_of(st.none(), st.integers(0, 5)), st.booleans())
def test_build_matches_reference(sentences, min_count, max_size, lowercase):
    vocab = Vocabulary.build(sentences, min_count=min_count, max_size=max_size,
                             lowercase=lowercase)
    expected = reference_words(sentences, min_count, max_size, lowercase)
    assert list(vocab.tokens) == SPECIALS + expected
    assert len(vocab) == len(SPECIALS) + len(expected)
    for word in expected:
        assert vocab.counts[word] == sum(
            (t.lower() if lowercase else t) == word for s in sentences for t in s)


def test_build_ignores_sentence_order():
    sentences = [["x", "y"], ["y", "z", "z"], ["w"], ["z", "y"]]
    shuffled = sentences[:]
    random.Random(0).shuffle(shuffled)
    assert Vocabulary.build(sentences).tokens == Vocabulary.build(shuffled).tokens


def test_encode_decode():
    vocab = Vocabulary.build([["the", "cat", "the"], ["sat"]])
    ids = vocab.encode(["the", "dog", "The", "sat"])
    chex.assert_type(ids, np.int32)
    chex.assert_shape(ids, (4,))
    the, sat = vocab.tokens.index("the"), vocab.tokens.index("sat")
    np.testing.assert_array_equal(ids, [the, UNK, UNK, sat])
    np.testing.assert_array_equal(vocab.encode(["The"], lowercase_fallback=True), [the])
    assert vocab.decode(ids) == ["the", "<unk>", "<unk>", "sat"]
    chex.assert_shape(vocab.encode([]), (0,))


def test_lowercase_vocabulary_lowercases_at_encode_time():
    vocab = Vocabulary.build([["The", "THE", "cat"]], lowercase=True)
    assert "The" not in vocab.tokens and vocab.counts["the"] == 2
    assert "THE" in vocab
    np.testing.assert_array_equal(vocab.encode(["tHe", "CAT"]),
                                  [vocab.tokens.index("the"), vocab.tokens.index("cat")])


def test_save_load_roundtrip(tmp_path):
    vocab = Vocabulary.build([["é", "b", "a", "b"], ["[cls]", "c"]], min_count=1)
    path = tmp_path / "vocab.txt"
    vocab.save(path)
    assert path.read_text(encoding="utf-8").split("\n")[:-1] == list(vocab.tokens)
    loaded = Vocabulary.load(path)
    assert loaded.tokens == vocab.tokens
    np.testing.assert_array_equal(loaded.encode(["a", "é", "zz"]), vocab.encode(["a", "é", "zz"]))


@pytest.mark.parametrize("content, line, problem", [
    ("<pad>\n<unk>\n[root]\n[cls]\n</s>\n<s>\nword\n", 5, "expected special token"),
    ("<pad>\n<unk>\n[root]\n[cls]\n<s>\n</s>\nword\n\nother\n", 8, "blank"),
    ("<pad>\n<unk>\n[root]\n[cls]\n<s>\n</s>\nword\nword\n", 8, "repeats line 7"),
    ("<pad>\n<unk>\n[root]\n[cls]\n<s>\n</s>\nword\r\n", 7, "padded token"),
])
def test_load_rejects_corrupt_files(tmp_path, content, line, problem):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content.encode("utf-8"))
    with pytest.raises(DataError, match=problem) as error:
        Vocabulary.load(path)
    assert str(error.value).startswith(f"{path}:{line}: ")
    assert "fix:" in str(error.value)


def test_load_rejects_missing_short_and_non_utf8_files(tmp_path):
    with pytest.raises(DataError, match="not found"):
        Vocabulary.load(tmp_path / "absent.txt")
    short = tmp_path / "short.txt"
    short.write_text("<pad>\n<unk>\n", encoding="utf-8")
    with pytest.raises(DataError, match="only 2 lines"):
        Vocabulary.load(short)
    latin = tmp_path / "latin.txt"
    latin.write_bytes(("\n".join(SPECIALS) + "\ncaf\xe9\n").encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8"):
        Vocabulary.load(latin)


def test_save_rejects_tokens_that_do_not_fit_one_line(tmp_path):
    vocab = Vocabulary(SPECIALS + ["two words ", "ok"])
    with pytest.raises(DataError, match="one per line"):
        vocab.save(tmp_path / "vocab.txt")


def test_constructor_checks_specials_and_duplicates():
    with pytest.raises(ValueError, match="must start with"):
        Vocabulary(["a", "b"])
    with pytest.raises(ValueError, match="twice"):
        Vocabulary(SPECIALS + ["a", "a"])
    assert vocab_lib.NUM_SPECIAL == len(SPECIALS)


def test_real_sst_vocabulary(data_root):
    lines = (data_root / "sst5_sentences" / "stsa.fine.train").read_text("utf-8").splitlines()
    sentences = [line.split()[1:] for line in lines]
    vocab = Vocabulary.build(sentences, min_count=2)
    assert list(vocab.tokens) == SPECIALS + reference_words(sentences, 2)
    ids = vocab.encode(sentences[0])
    kept = [t if vocab.counts.get(t, 0) >= 2 else "<unk>" for t in sentences[0]]
    assert vocab.decode(ids) == kept
