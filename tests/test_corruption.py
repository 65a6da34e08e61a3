"""Property: every reader, given a corrupted copy of a real shared/data file (cut short, random
bytes written in, separators deleted or doubled), returns records or raises a one-line DataError
naming the file, never any other exception.

Each file is cut to its first lines (zips: to their first members) so that an example costs
milliseconds; a file read with a partner (a parallel corpus side, a binary corpus class, the
other treebank zip) gets its partner cut the same way."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxenc.data import mrpc, multi30k, senteval_binary, sick, snli, sst, trec
from jaxenc.data.embeddings import load_vectors
from jaxenc.data.vocab import Vocabulary
from jaxenc.errors import DataError
from jaxenc.structures.formats import read_bracketed, read_conllu, read_treebank_zip

PREFIX_LINES = 40
WORDS_FILE = "words.txt"
ZIP_MEMBERS = 2
SEPARATORS = (b"\n", b"\r\n", b"\t", b" ", b"(", b")", b"{", b"}", b'"', b":", b",", b"-")

Reader = Callable[[Path], object]


def _parallel(path: Path) -> object:
    source, target = sorted(path.parent.glob(path.name.rsplit(".", 1)[0] + ".*"))
    return multi30k.read_parallel(source, target, moses_tokenized=".tok." in path.name)


def _binary_corpus(name: str) -> Reader:
    return lambda path: senteval_binary.read_binary_corpus(path.parent, name)


def _treebank(path: Path) -> object:
    return read_treebank_zip(path.parent / "treebank.zip", path.parent / "dependency_treebank.zip")


def _vectors(path: Path) -> object:
    """The vectors of the words of the uncorrupted file (WORDS_FILE), so that lines are parsed."""
    return load_vectors(path, Vocabulary.build([(path.parent / WORDS_FILE).read_text().split()]))


# (file under shared/data, the reader, its partner files under shared/data)
FILES: list[tuple[str, Reader, tuple[str, ...]]] = [
    *[(f"sick/{name}", sick.read_sick, ()) for name in
      ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")],
    ("sick/SICK_full_12col.txt", lambda path: sick.read_sick(path, split="train"), ()),
    *[(f"trec/TREC.{split}", trec.read_trec, ()) for split in ("train", "test")],
    *[(f"mrpc/msr_paraphrase_{split}.txt", mrpc.read_mrpc, ()) for split in ("train", "test")],
    *[(f"sst2_sentences/stsa.binary.{split}",
       lambda path: sst.read_sst_sentences(path, num_classes=2), ())
      for split in ("train", "dev", "test")],
    *[(f"sst5_sentences/stsa.fine.{split}",
       lambda path: sst.read_sst_sentences(path, num_classes=5), ())
      for split in ("train", "dev", "test")],
    *[(f"sst_ptb_trees/{split}.txt", sst.read_sst_trees, ()) for split in ("train", "dev")],
    ("sst_ptb_trees/test.txt", read_bracketed, ()),
    *[(f"{name}/{file}", _binary_corpus(name), tuple(f"{name}/{other}" for other in corpus.files
                                                     if other != file))
      for name, corpus in senteval_binary.CORPORA.items() for file in corpus.files],
    ("snli/snli_1.0_dev.first1289.jsonl", snli.read_snli, ()),
    *[(f"multi30k/{stem}.{side}", _parallel, (f"multi30k/{stem}.{other}",))
      for stem in ("train", "val", "test_2016_flickr", "train.lc.norm.tok", "val.lc.norm.tok",
                   "test_2016_flickr.lc.norm.tok")
      for side, other in (("de", "en"), ("en", "de"))],
    *[(f"ud_english_ewt/{name}", read_conllu, ()) for name in
      ["en_ewt-ud-dev.conllu", "en_ewt-ud-test.conllu",
       *(f"en_ewt-ud-train.part{part}of4.conllu" for part in range(1, 5))]],
    ("nltk_treebank/treebank.zip", _treebank, ("nltk_treebank/dependency_treebank.zip",)),
    ("nltk_treebank/dependency_treebank.zip", _treebank, ("nltk_treebank/treebank.zip",)),
    *[(f"glove_subsets/{name}", _vectors, ()) for name in
      ("glove.6B.50d.first2446.txt", "glove.6B.50d.subset5403.txt",
       "glove.6B.100d.first2604.txt")],
]


def _zip_prefix(path: Path) -> bytes:
    """A zip of the first members of `path` (the .mrg ones for the constituency zip, their .dp
    namesakes for the dependency one)."""
    stems = ("wsj_0001", "wsj_0002")[:ZIP_MEMBERS]
    out = io.BytesIO()
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as kept:
        for name in source.namelist():
            if any(name.endswith(f"{stem}.mrg") or name.endswith(f"{stem}.dp")
                   for stem in stems):
                kept.writestr(name, source.read(name))
    return out.getvalue()


def _prefix(path: Path) -> bytes:
    """The first PREFIX_LINES lines of a text file (CoNLL-U: up to the end of that sentence),
    the first members of a zip."""
    if path.suffix == ".zip":
        return _zip_prefix(path)
    lines = path.read_bytes().split(b"\n")
    end = PREFIX_LINES
    if path.suffix == ".conllu":
        end = lines.index(b"", PREFIX_LINES)
    return b"\n".join(lines[:end]) + b"\n"


# One corruption: cut at a fraction of the length; write bytes at a fraction; delete or double
# the k-th occurrence of a separator.
_FRACTION = st.floats(0.0, 1.0)
CORRUPTION = st.one_of(
    st.tuples(st.just("cut"), _FRACTION),
    st.tuples(st.just("write"), _FRACTION, st.binary(min_size=1, max_size=6)),
    st.tuples(st.sampled_from(["delete", "double"]), st.sampled_from(SEPARATORS),
              st.integers(0, 10_000)),
)


def corrupt(data: bytes, corruptions: list[tuple]) -> bytes:
    """`data` with each corruption applied in turn."""
    for kind, *args in corruptions:
        if kind == "cut":
            data = data[:int(args[0] * len(data))]
        elif kind == "write":
            at = int(args[0] * len(data))
            data = data[:at] + args[1] + data[at + len(args[1]):]
        else:
            separator, k = args
            count = data.count(separator)
            if count:
                at = -1
                for _ in range(k % count + 1):
                    at = data.index(separator, at + 1)
                middle = b"" if kind == "delete" else separator * 2
                data = data[:at] + middle + data[at + len(separator):]
    return data


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corrupted")


@pytest.mark.parametrize("name, read, partners", FILES, ids=[name for name, _, _ in FILES])
def test_corrupted_real_files_give_records_or_a_data_error_naming_the_file(
        data_root, workspace, name, read, partners):
    folder = workspace / name.replace("/", "_")
    folder.mkdir()
    original = _prefix(data_root / name)
    for partner in partners:
        (folder / Path(partner).name).write_bytes(_prefix(data_root / partner))
    if read is _vectors:
        (folder / WORDS_FILE).write_bytes(b"\n".join(line.split(b" ", 1)[0]
                                                     for line in original.split(b"\n")))
    path = folder / Path(name).name
    path.write_bytes(original)
    read(path)  # the uncorrupted prefix reads

    @settings(max_examples=50, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(CORRUPTION, min_size=1, max_size=4))
    def check(corruptions):
        path.write_bytes(corrupt(original, corruptions))
        try:
            read(path)
        except DataError as error:
            assert path.name in str(error) and "\n" not in str(error), str(error)

    check()
