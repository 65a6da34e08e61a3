"""reports.cut_vectors: a named vector package cut to some rows reads as the whole package for
the words it keeps, in the package's order."""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jaxenc.data import named_vectors
from jaxenc.data.embeddings import load_vectors
from jaxenc.data.vocab import Vocabulary
from jaxenc.records import Example, Sentence
from reports import cut_vectors

WORDS = ["the", "of", "cat", "The", "zebra", "dog", "Paris", "paris", "cat"]
MODULE = "fake_vectors_for_cut"


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A named source "fake" of 9 rows (the word "cat" twice), installed under tmp_path/site."""
    site = tmp_path / "site"
    data = site / MODULE / "data"
    data.mkdir(parents=True)
    (site / MODULE / "__init__.py").write_text(
        "from pathlib import Path\nROOT = str(Path(__file__).parent / 'data')\n", encoding="utf-8")
    matrix = np.arange(len(WORDS) * 3, dtype=np.float32).reshape(len(WORDS), 3)
    np.save(data / "emb.npy", matrix)
    pq.write_table(pa.table({"word": WORDS}), data / "index.parquet")
    info = site / "fake_vectors_for_cut-1.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-vectors-for-cut\n"
                                   "Version: 1.2.0\n", encoding="utf-8")
    source = named_vectors.NamedSource(
        name="fake", module=MODULE, distribution="fake-vectors-for-cut", extra="fake",
        matrix_file="emb.npy", index_file="index.parquet", index_column="word")
    monkeypatch.setitem(named_vectors.NAMED_VECTORS, "fake", source)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    return matrix


def test_rows_to_keep_takes_the_first_rows_and_the_needed_words_in_order():
    assert cut_vectors.rows_to_keep(WORDS, 2, {"zebra", "cat", "nowhere"}) == [0, 1, 2, 4, 8]
    assert cut_vectors.rows_to_keep(WORDS, 0, set()) == []


def test_words_of_reads_every_sentence_and_target_with_lower_case_forms():
    examples = [Example(sentences=(Sentence(("The", "Cat")), Sentence(("runs",)))),
                Example(sentences=(Sentence(("Paris",)),), target=Sentence(("Zebra",)))]
    assert cut_vectors.words_of(examples) == {"The", "the", "Cat", "cat", "runs", "Paris",
                                              "paris", "Zebra", "zebra"}


def test_the_cut_package_reads_as_the_whole_one_for_its_words(package, tmp_path,
                                                              monkeypatch):
    vocab = Vocabulary.build([["The", "cat", "zebra", "Paris", "unseen"]], min_count=1,
                             max_size=None, lowercase=False)
    full = load_vectors("fake", vocab, seed=3, lowercase_fallback=True)
    needed = cut_vectors.words_of([Example(sentences=(Sentence(tuple(vocab.tokens)),))])
    rows = cut_vectors.rows_to_keep(WORDS, 1, needed)
    assert rows == [0, 2, 3, 4, 6, 7, 8]  # "of" and "dog" are neither first nor needed
    out = tmp_path / "cut"
    cut_vectors.write_cut("fake", rows, out)

    monkeypatch.delitem(sys.modules, MODULE)
    monkeypatch.syspath_prepend(str(out))
    opened = named_vectors.open_named("fake")
    assert opened.identity == "fake@1.2.0"
    assert list(opened.words) == [WORDS[row] for row in rows]
    np.testing.assert_array_equal(opened.matrix, package[rows])
    cut = load_vectors("fake", vocab, seed=3, lowercase_fallback=True)
    np.testing.assert_array_equal(cut.matrix, full.matrix)


def test_an_unknown_dataset_is_one_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cut_vectors.main(["--datasets", "no_such_set", "--out", str(tmp_path)])
    assert "--datasets: unknown dataset 'no_such_set'" in capsys.readouterr().err
