"""Tree files: CoNLL-U, the NLTK Penn Treebank sample zips, and bracket-per-line files.

CoNLL-U multi-word lines (`3-4`) and empty nodes (`8.1`) are skipped; NLTK `.dp` files have no arc
labels, so every label is `dep`; `.mrg` trees lose their `-NONE-` traces and function tags
(`Tree.strip_ptb`). Text files are read by `text_io.read_lines`, so bad UTF-8, an empty file and
every malformed tree are DataErrors naming the file and line.
"""

from __future__ import annotations

import os
import re
import struct
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from jaxenc.errors import DataError, StructureError
from jaxenc.records import Sentence
from jaxenc.structures.trees import DependencyTree, Tree, parse_bracketed, parse_bracketed_all
from jaxenc.text_io import read_lines

CONLLU_COLUMNS = 10  # ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC
EMPTY = "_"
DP_LABEL = "dep"  # the label of every arc of an NLTK .dp file (it has none)
_TEXT_COMMENT = re.compile(r"#\s*text\s*=(.*)")
_MULTIWORD_OR_EMPTY_NODE = re.compile(r"\d+[-.]\d+")


def _existing(path: str | os.PathLike) -> Path:
    """`path` as a Path; DataError naming it when the file is missing."""
    path = Path(path)
    if not path.is_file():
        raise DataError("file not found", path=path,
                        fix="check the path (datasets: --config.data.data_dir / $JAXENC_DATA_DIR)")
    return path


def read_conllu(path: str | os.PathLike) -> list[Sentence]:
    """The sentences of a CoNLL-U file: tokens (FORM), heads, deprels, tags (XPOS), `# text`.

    A column that is `_` for every word of a sentence becomes None (e.g. no XPOS). Raises DataError
    naming the file and line for a row without 10 columns, a bad ID sequence or a non-integer head,
    and StructureError naming the file and the sentence's first word line for heads that do not
    form a tree (out of range, no single root, a cycle).
    """
    return [sentence for _, sentence in numbered_conllu(path)]


def numbered_conllu(path: str | os.PathLike) -> list[tuple[int, Sentence]]:
    """(line number of its first word, sentence) of every sentence of a CoNLL-U file
    (`read_conllu`)."""
    sentences, rows, text = [], [], None
    for line in read_lines(path):
        if not line.text.strip():
            if rows:
                sentences.append(_conllu_sentence(rows, text, line.path))
            rows, text = [], None
        elif line.text.startswith("#"):
            match = _TEXT_COMMENT.fullmatch(line.text)
            if match:
                text = match.group(1).strip()
        else:
            columns = line.text.split("\t")
            if len(columns) != CONLLU_COLUMNS:
                raise line.error(f"{len(columns)} tab-separated columns, CoNLL-U has 10",
                                 fix="separate the columns with single tabs")
            if _MULTIWORD_OR_EMPTY_NODE.fullmatch(columns[0]):
                continue
            if columns[0] != str(len(rows) + 1):
                raise line.error(f"word ID {columns[0]!r}, expected {len(rows) + 1}",
                                 fix="number the words of each sentence 1, 2, 3, ...")
            rows.append((line.number, columns))
    if rows:
        sentences.append(_conllu_sentence(rows, text, Path(path)))
    return sentences


def _conllu_sentence(rows: list[tuple[int, list[str]]], text: str | None,
                     path: Path) -> tuple[int, Sentence]:
    tokens = tuple(columns[1] for _, columns in rows)
    heads = None
    if _column_or_none([columns[6] for _, columns in rows]) is not None:
        heads = tuple(_conllu_head(columns, path, line_number) for line_number, columns in rows)
    sentence = Sentence(tokens=tokens, text=" ".join(tokens) if text is None else text,
                        heads=heads, deprels=_column_or_none([columns[7] for _, columns in rows]),
                        tags=_column_or_none([columns[4] for _, columns in rows]))
    first_line = rows[0][0]
    if heads is not None:
        DependencyTree.from_sentence(sentence, source=f"{path}:{first_line}")
    return first_line, sentence


def _conllu_head(columns: list[str], path: Path, line_number: int) -> int:
    if not columns[6].isdigit():
        raise DataError(f"HEAD {columns[6]!r} of word {columns[0]} is not an integer",
                        path=path, line=line_number,
                        fix="HEAD is the ID of the head word, 0 for the root")
    return int(columns[6])


def _column_or_none(values: list[str]) -> tuple[str, ...] | None:
    return None if all(value == EMPTY for value in values) else tuple(values)


def format_conllu(sentence: Sentence) -> str:
    """One sentence as CoNLL-U text (`# text` line, 10 columns; unknown columns `_`), no blank
    line after it. `read_conllu` of it gives back tokens, text, heads, deprels and tags."""
    n = len(sentence.tokens)
    tags = sentence.tags or (EMPTY,) * n
    deprels = sentence.deprels or (EMPTY,) * n
    heads = [str(head) for head in sentence.heads] if sentence.heads else [EMPTY] * n
    if not len(tags) == len(deprels) == len(heads) == n:
        raise StructureError(f"{n} tokens but {len(heads)} heads, {len(deprels)} deprels and "
                             f"{len(tags)} tags", fix="give every token one of each")
    lines = [f"# text = {sentence.text}"]
    for index, (token, tag, head, deprel) in enumerate(
            zip(sentence.tokens, tags, heads, deprels, strict=True), start=1):
        lines.append("\t".join((str(index), token, EMPTY, EMPTY, tag, EMPTY, head, deprel,
                                EMPTY, EMPTY)))
    return "\n".join(lines) + "\n"


def write_conllu(sentences: Iterable[Sentence], path: str | os.PathLike) -> None:
    """Writes `sentences` as a CoNLL-U file (see `format_conllu`), a blank line after each."""
    with open(path, "w", encoding="utf-8") as out:
        for sentence in sentences:
            out.write(format_conllu(sentence) + "\n")


def read_bracketed(path: str | os.PathLike) -> list[Tree]:
    """The trees of a one-tree-per-line file (SST `train.txt`); blank lines are skipped.

    Errors name the file, line and character position.
    """
    return [parse_bracketed(line.text, source=f"{line.path}:{line.number}")
            for line in read_lines(path) if line.text.strip()]


def write_bracketed(trees: Iterable[Tree], path: str | os.PathLike) -> None:
    """Writes one tree per line (`Tree.to_bracketed`); `read_bracketed` reads them back equal."""
    with open(path, "w", encoding="utf-8") as out:
        for tree in trees:
            out.write(tree.to_bracketed() + "\n")


def read_treebank_zip(mrg_zip: str | os.PathLike, dp_zip: str | os.PathLike) -> list[Sentence]:
    """The NLTK Penn Treebank sample, constituency and dependency trees aligned per sentence.

    Reads `treebank/combined/wsj_*.mrg` from `mrg_zip` (NLTK's treebank.zip) and the `wsj_*.dp` of
    the same name from `dp_zip` (dependency_treebank.zip), straight from the archives. Each
    sentence gets tokens (the leaves, PTB escapes kept), `tree` (cleaned by `Tree.strip_ptb`),
    heads and tags (POS) from the `.dp` file and the label `dep` on every arc. Raises
    StructureError naming the file and sentence when the two disagree, DataError naming the
    archive (and member) when it is damaged.
    """
    sentences = []
    with _open_zip(mrg_zip) as mrg_archive, _open_zip(dp_zip) as dp_archive:
        dp_names = {PurePosixPath(name).stem: name for name in dp_archive.namelist()
                    if name.endswith(".dp")}
        mrg_names = sorted(name for name in mrg_archive.namelist()
                           if name.startswith("treebank/combined/") and name.endswith(".mrg"))
        if not mrg_names:
            raise DataError("no treebank/combined/*.mrg files in the archive", path=mrg_zip,
                            fix="pass NLTK's treebank.zip")
        for mrg_name in mrg_names:
            stem = PurePosixPath(mrg_name).stem
            if stem not in dp_names:
                raise DataError(f"no {stem}.dp beside {mrg_name}", path=dp_zip,
                                fix="pass NLTK's dependency_treebank.zip for the same sample")
            mrg_source = f"{mrg_zip}/{mrg_name}"
            trees = parse_bracketed_all(_member_text(mrg_archive, mrg_name, mrg_zip),
                                        source=mrg_source)
            dp_rows = _read_dp(_member_text(dp_archive, dp_names[stem], dp_zip),
                               f"{dp_zip}/{dp_names[stem]}")
            if len(trees) != len(dp_rows):
                raise StructureError(f"{len(trees)} trees but {len(dp_rows)} .dp sentences",
                                     path=mrg_source, fix="pair files of the same sample")
            for number, (tree, rows) in enumerate(zip(trees, dp_rows, strict=True), start=1):
                sentences.append(_aligned_sentence(tree.strip_ptb(), rows,
                                                   f"{mrg_source} sentence {number}"))
    return sentences


# What zipfile raises for a damaged archive: bad headers, CRC or deflate data, offsets past the
# end (OSError from seek), bad UTF-8 in a member (ValueError).
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, ValueError,
               struct.error)
_ZIP_FIX = "the archive is damaged; download NLTK's treebank.zip / dependency_treebank.zip again"


def _open_zip(path: str | os.PathLike) -> zipfile.ZipFile:
    """The archive at `path`; DataError naming it when it is missing or not a readable zip."""
    try:
        return zipfile.ZipFile(_existing(path))
    except _ZIP_ERRORS as error:
        raise DataError(f"not a readable zip archive ({error})", path=path, fix=_ZIP_FIX) from None


def _member_text(archive: zipfile.ZipFile, name: str, path: str | os.PathLike) -> str:
    """The UTF-8 text of member `name`; DataError naming the archive and member when damaged."""
    try:
        return archive.read(name).decode("utf-8")
    except _ZIP_ERRORS as error:
        raise DataError(f"member {name} cannot be read ({error})", path=path,
                        fix=_ZIP_FIX) from None


def _read_dp(text: str, source: str) -> list[list[tuple[str, str, int]]]:
    """`word TAB POS TAB head` rows of an NLTK .dp file, sentences separated by blank lines."""
    sentences, rows = [], []
    for line_number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            if rows:
                sentences.append(rows)
            rows = []
            continue
        columns = line.split("\t")
        if len(columns) != 3 or not columns[2].isdigit():
            raise DataError("expected 'word TAB POS TAB head'", path=source, line=line_number,
                            fix="use NLTK's dependency_treebank .dp files")
        rows.append((columns[0], columns[1], int(columns[2])))
    if rows:
        sentences.append(rows)
    return sentences


def _aligned_sentence(tree: Tree, rows: list[tuple[str, str, int]], source: str) -> Sentence:
    tokens = tuple(tree.leaves())
    if tokens != tuple(word for word, _, _ in rows):
        raise StructureError(f"tree leaves ({len(tokens)}) differ from the .dp words "
                             f"({len(rows)})", path=source, fix="pair files of the same sample")
    return Sentence(tokens=tokens, text=" ".join(tokens), tree=tree.to_bracketed(),
                    heads=tuple(head for _, _, head in rows),
                    deprels=(DP_LABEL,) * len(rows), tags=tuple(tag for _, tag, _ in rows))
