"""Any text as an unlabelled corpus: task.dataset="corpus", data.corpus_files=A.txt[,B.txt].

The files hold one sentence a line (UTF-8; a BOM and CRLF line ends are fine, blank lines are
skipped) and can be of any size: they are streamed line by line, twice, and never read whole.
Each line is tokenised as the rest of the library tokenises raw text (`text_io.tokenize`,
lower-cased with data.lowercase). Mean-Max AAE's data rules (spec meanmax_aae.md, the authors'
data.py) then apply:

- sentences of `MIN_TOKENS`..`MAX_TOKENS` tokens are kept (4..32), the others are counted;
- every sentence goes to train, dev or test by a seeded hash of its place (file, line), with
  task.dev_fraction / task.test_fraction, so the held-out sentences never shape the vocabulary;
- vocabulary = the training words seen at least data.min_count times that have a vector in
  data.embeddings (the most frequent data.max_vocab of them when > 0): pass 1 counts, the
  vectors file is read once for the candidates;
- pass 2 keeps the sentences all of whose words are in it and drops the others (OOV sentences,
  counted per split); held-out sentences with a word that no kept training sentence has are
  dropped too. The training vocabulary is then the words of the kept training sentences, which
  `jaxenc.training.loop.build_vocabularies` takes whole (`filtered`), as the counts and the
  vectors were applied here.

The kept sentences are returned as Examples ({"train", "dev", "test"}); `CorpusReport` says what
was read, kept and dropped. `python -m jaxenc.data.corpus` writes the sentences of registered
datasets as such a file (the small Mean-Max AAE config trains on one).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import ml_collections

from jaxenc.data import registry
from jaxenc.data.embeddings import load_vectors
from jaxenc.data.records import Example, Sentence
from jaxenc.data.text_io import Line, tokenize
from jaxenc.data.vocab import SPECIAL_TOKENS, Vocabulary
from jaxenc.errors import ConfigError, DataError
from jaxenc.structures.trees import unescape_ptb

NAME = registry.CORPUS  # the dataset name
MIN_TOKENS, MAX_TOKENS = 4, 32  # the authors' minlen / maxlen
SPLITS = registry.DATASETS[NAME].splits  # ("train", "dev", "test")

log = logging.getLogger(__name__)

_BOM = b"\xef\xbb\xbf"


def corpus_paths(files: str | Sequence[str | os.PathLike]) -> list[Path]:
    """The corpus files of "A.txt[,B.txt]" (or a sequence), each checked to exist."""
    names = [name for name in files.split(",") if name] if isinstance(files, str) else files
    if not names:
        raise ConfigError("task.dataset='corpus' reads the files of data.corpus_files, which is "
                          "empty (fix: --config.data.corpus_files=A.txt[,B.txt], one sentence a "
                          "line)")
    paths = [Path(name) for name in names]
    for path in paths:
        if not path.is_file():
            raise DataError("corpus file not found", path=path,
                            fix="set --config.data.corpus_files to existing text files, "
                                "comma-separated")
    return paths


def read_corpus(paths: Sequence[Path]) -> Iterator[Line]:
    """The non-blank lines of the files, in order, streamed (one line in memory at a time).

    Raises:
      DataError: a line that is not UTF-8 (file:line), a file without any non-blank line.
    """
    for path in paths:
        found = False
        with path.open("rb") as file:
            for number, raw in enumerate(file, start=1):
                if number == 1:
                    raw = raw.removeprefix(_BOM)
                try:
                    text = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as error:
                    raise DataError(f"byte 0x{raw[error.start]:02x} is not valid UTF-8",
                                    path=path, line=number,
                                    fix="convert the file to UTF-8 (e.g. iconv -f latin1 -t "
                                        "utf-8)") from None
                if text.strip():
                    found = True
                    yield Line(path, number, text)
        if not found:
            raise DataError("the corpus file has no sentence", path=path,
                            fix="give it one sentence a line, or leave it out of "
                                "data.corpus_files")


def split_of(file_index: int, line: int, seed: int, dev_fraction: float,
             test_fraction: float) -> str:
    """"train", "dev" or "test" for line `line` of the `file_index`-th corpus file: a seeded hash
    of the place, so the assignment is the same in both passes and every run with that seed."""
    digest = hashlib.blake2b(f"{seed}:{file_index}:{line}".encode(), digest_size=8).digest()
    draw = int.from_bytes(digest, "little") / 2.0**64
    if draw < dev_fraction:
        return "dev"
    return "test" if draw < dev_fraction + test_fraction else "train"


@dataclasses.dataclass(frozen=True)
class CorpusOptions:
    """How a corpus is read (module docstring); `from_config` takes them from a training config.

    Attributes:
      files: the text files.
      vectors: the word vectors file(s) or named sources (data.embeddings); vocabulary words
        must have a vector.
      lowercase: lower-case every token (data.lowercase).
      lowercase_fallback: a word without a vector of its own may take its lower-cased form's.
      min_count: vocabulary words occur at least this often in the training sentences of the
        token range (the authors count the whole corpus, not the sentences kept).
      max_vocab: keep the most frequent words only (0: all).
      dev_fraction, test_fraction: the held-out shares; seed: their draw.
      min_tokens, max_tokens: the sentence lengths kept.
    """

    files: tuple[Path, ...]
    vectors: str
    lowercase: bool = False
    lowercase_fallback: bool = True
    min_count: int = 1
    max_vocab: int = 0
    dev_fraction: float = 0.01
    test_fraction: float = 0.01
    seed: int = 0
    min_tokens: int = MIN_TOKENS
    max_tokens: int = MAX_TOKENS

    def __post_init__(self):
        if not self.vectors:
            raise ConfigError("the corpus vocabulary is the frequent words that have a vector, "
                              "and data.embeddings is empty (fix: --config.data.embeddings="
                              "glove.840B.300d.txt)")
        fractions = (self.dev_fraction, self.test_fraction)
        if min(fractions) <= 0.0 or sum(fractions) >= 1.0:
            raise ConfigError(f"task.dev_fraction={self.dev_fraction} and task.test_fraction="
                              f"{self.test_fraction} must be positive and sum below 1 (fix: "
                              "--config.task.dev_fraction=0.01 --config.task.test_fraction=0.01)")

    @classmethod
    def from_config(cls, config: ml_collections.ConfigDict) -> CorpusOptions:
        data = config.data
        return cls(files=tuple(corpus_paths(data.corpus_files)), vectors=data.embeddings,
                   lowercase=data.lowercase, lowercase_fallback=data.lowercase_fallback,
                   min_count=data.min_count, max_vocab=data.max_vocab,
                   dev_fraction=config.task.dev_fraction, test_fraction=config.task.test_fraction,
                   seed=config.train.seed)


@dataclasses.dataclass(frozen=True)
class CorpusReport:
    """What reading a corpus kept and dropped; `print(report)` shows it.

    Attributes:
      lines: non-blank lines read; too_short / too_long: of those, outside the token range.
      candidates: training words seen at least min_count times; without_vector: of those, not
        in the vectors file; vocabulary: the final vocabulary's words.
      kept, dropped_oov: sentences per split kept, and dropped for a word outside the vocabulary.
    """

    lines: int
    too_short: int
    too_long: int
    candidates: int
    without_vector: int
    vocabulary: int
    kept: dict[str, int]
    dropped_oov: dict[str, int]

    def __str__(self) -> str:
        per_split = ", ".join(f"{split} {self.kept[split]:,} kept / {self.dropped_oov[split]:,} "
                              "dropped" for split in SPLITS)
        return (f"corpus: {self.lines:,} lines, {self.too_short:,} shorter and {self.too_long:,} "
                f"longer than the token range; vocabulary {self.vocabulary:,} words "
                f"({self.candidates:,} frequent, {self.without_vector:,} of them without a "
                f"vector); sentences with a word outside it dropped: {per_split}")


def _sentences(options: CorpusOptions, counts: collections.Counter[str]
               ) -> Iterator[tuple[str, Line, tuple[str, ...]]]:
    """(split, line, tokens) of every sentence in the token range, streamed; `counts` gets the
    lines read ("lines") and the ones out of range ("too_short", "too_long")."""
    for index, path in enumerate(options.files):
        for line in read_corpus([path]):
            counts["lines"] += 1
            tokens = tokenize(line.text.lower() if options.lowercase else line.text)
            if len(tokens) < options.min_tokens:
                counts["too_short"] += 1
            elif len(tokens) > options.max_tokens:
                counts["too_long"] += 1
            else:
                yield split_of(index, line.number, options.seed, options.dev_fraction,
                               options.test_fraction), line, tokens


def _vocabulary_candidates(options: CorpusOptions) -> tuple[list[str], list[str]]:
    """Pass 1: (the training words seen at least min_count times, most frequent first; those of
    them that have a vector, in the same order)."""
    word_counts: collections.Counter[str] = collections.Counter()
    for split, _, tokens in _sentences(options, collections.Counter()):
        if split == "train":
            word_counts.update(tokens)
    for special in SPECIAL_TOKENS:
        word_counts.pop(special, None)
    candidates = sorted((w for w, c in word_counts.items() if c >= options.min_count),
                        key=lambda w: (-word_counts[w], w))
    if not candidates:
        raise DataError(f"no training word of {options.min_tokens}..{options.max_tokens}-token "
                        f"sentences occurs {options.min_count} times",
                        path=",".join(map(str, options.files)),
                        fix="give a larger corpus or a lower --config.data.min_count")
    vectors = load_vectors(options.vectors, Vocabulary(SPECIAL_TOKENS + tuple(candidates)),
                           oov="drop", lowercase_fallback=options.lowercase_fallback)
    found = vectors.found[len(SPECIAL_TOKENS):]
    return candidates, [word for word, has in zip(candidates, found, strict=True) if has]


def _keep_trained_words(splits: dict[str, list[Example]],
                        dropped: collections.Counter[str]) -> set[str]:
    """The words of the kept training sentences (the vocabulary); held-out sentences with
    another word are dropped (it would be unknown)."""
    words = {token for example in splits["train"] for token in example.sentences[0].tokens}
    for split in ("dev", "test"):
        kept = [e for e in splits[split] if words.issuperset(e.sentences[0].tokens)]
        dropped[split] += len(splits[split]) - len(kept)
        splits[split] = kept
    return words


def load_corpus(options: CorpusOptions) -> tuple[dict[str, list[Example]], CorpusReport]:
    """The kept sentences of the corpus per split, and the report (module docstring)."""
    candidates, with_vector = _vocabulary_candidates(options)
    vocabulary = set(with_vector[:options.max_vocab] if options.max_vocab > 0 else with_vector)
    read: collections.Counter[str] = collections.Counter()
    dropped: collections.Counter[str] = collections.Counter()
    splits: dict[str, list[Example]] = {split: [] for split in SPLITS}
    for split, line, tokens in _sentences(options, read):  # pass 2
        if vocabulary.issuperset(tokens):
            splits[split].append(Example(sentences=(Sentence(tokens=tokens, text=line.text),),
                                         uid=line.uid))
        else:
            dropped[split] += 1
    words = _keep_trained_words(splits, dropped)
    for split, examples in splits.items():
        if not examples:
            raise DataError(f"no {split} sentence of {options.min_tokens}..{options.max_tokens} "
                            "tokens has all its words in the vocabulary",
                            path=",".join(map(str, options.files)),
                            fix="give a larger corpus, word vectors that cover it, or larger "
                                "--config.task.dev_fraction / test_fraction")
    report = CorpusReport(
        lines=read["lines"], too_short=read["too_short"], too_long=read["too_long"],
        candidates=len(candidates), without_vector=len(candidates) - len(with_vector),
        vocabulary=len(words), kept={s: len(splits[s]) for s in SPLITS},
        dropped_oov={s: dropped[s] for s in SPLITS})
    return splits, report


def load_splits(config: ml_collections.ConfigDict) -> dict[str, list[Example]]:
    """train / dev / test of the corpus a training config names (data.corpus_files); the
    report is logged."""
    splits, report = load_corpus(CorpusOptions.from_config(config))
    log.info("%s", report)
    return splits


# ----------------------------------------------------------------------------- building a corpus


def dataset_sentences(examples: Iterable[Example]) -> Iterator[str]:
    """The sentences of a dataset's examples as lines of space-separated tokens (PTB escapes
    such as -LRB- undone): every sentence of an example, and a translation's target (Multi30k's
    English side)."""
    for example in examples:
        sentences = example.sentences if example.target is None else (example.target,)
        for sentence in sentences:
            yield " ".join(map(unescape_ptb, sentence.tokens))


def write_corpus(lines: Iterable[str], out: str | os.PathLike) -> int:
    """Writes the distinct `lines` in first-seen order, UTF-8, one a line; returns how many."""
    seen: set[str] = set()
    with Path(out).open("w", encoding="utf-8") as file:
        for line in lines:
            if line and line not in seen:
                seen.add(line)
                file.write(line + "\n")
    return len(seen)


# The sentences of shared/data that no transfer evaluation (eval/transfer.py) tests on.
DEFAULT_SOURCES = ("multi30k:train,multi30k:dev,multi30k:test,ud_ewt:train,ud_ewt:dev,ud_ewt:test,"
                   "ptb_sample:all,snli:dev,sst2:train,sick_r:train,trec:train,mrpc:train")


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m jaxenc.data.corpus`: writes the sentences of registered datasets as a corpus
    file."""
    parser = argparse.ArgumentParser(
        description="Write the sentences of registered datasets as a corpus file (one sentence "
                    "a line, duplicates removed) for task.dataset=corpus.")
    parser.add_argument("--out", required=True, help="the corpus file to write")
    parser.add_argument("--datasets", default=DEFAULT_SOURCES,
                        help="comma-separated DATASET:SPLIT (default: no test sentence of a "
                             "transfer task: their training splits, and whole datasets that are "
                             "no transfer task)")
    parser.add_argument("--data_dir", default=None, help="the data root ($JAXENC_DATA_DIR)")
    args = parser.parse_args(argv)
    sources = [item.split(":") for item in args.datasets.split(",") if item]
    count = write_corpus((line for name, split in sources
                          for line in dataset_sentences(registry.load(name, split, args.data_dir))),
                         args.out)
    print(f"wrote {count} sentences to {args.out}")


if __name__ == "__main__":
    main()
