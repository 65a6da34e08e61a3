"""Any text as an unlabelled corpus: task.dataset="corpus", data.corpus_files=A.txt[,B.txt].

The files hold one sentence a line (UTF-8; BOM, CRLF and blank lines are fine), streamed line by
line, twice, never read whole; each line is tokenised as raw text is (`text_io.tokenize`,
lower-cased with data.lowercase). Mean-Max AAE's data rules (the authors' data.py) then apply:

- sentences of `MIN_TOKENS`..`MAX_TOKENS` tokens are kept (4..32), the others are counted;
- each sentence goes to train, dev or test by a seeded hash of its place (file, line), with
  task.dev_fraction / task.test_fraction, so held-out sentences never shape the vocabulary;
- vocabulary = the training words seen at least data.min_count times that have a vector in
  data.embeddings (the most frequent data.max_vocab of them when > 0);
- pass 2 applies data.corpus_oov (`OOV_RULES`) to the words outside it: "drop_sentences"
  (default; the authors' `sent_judge`) drops the sentence; "drop_words" drops the words (as the
  authors' `prepare_data` and data.oov="drop" at encode time), and a sentence left empty;
  "unk" writes `UNK_TOKEN` (needs data.oov="random" or "hashed"). Held-out sentences get the
  same rule against the kept training sentences' words, which
  `jaxenc.training.input_pipeline.build_vocabularies` takes whole (`filtered`).

The kept sentences are returned as Examples ({"train", "dev", "test"}); `CorpusReport` counts
sentences and words read, kept and dropped per split.

`python -m jaxenc.data.corpus` writes the sentences of registered datasets as such a file. By
default (`--exclude transfer`) the sources (`DEFAULT_SOURCES`) are no transfer task, and every
line whose normalised form (`normalise`) is a sentence of a transfer task (`TRANSFER_DATASETS`,
any split the data root has) is left out and counted (`BuildReport`); `--exclude none` with
`--datasets` naming `TRANSFER_TRAIN_SOURCES` too builds a corpus with the transfer tasks'
training sentences (SST's Rotten Tomatoes snippets are MR's and SUBJ's).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxenc.data import named_vectors, paths, registry
from jaxenc.data.embeddings import load_vectors
from jaxenc.data.vocab import SPECIAL_TOKENS, UNK, Vocabulary
from jaxenc.errors import ConfigError, DataError
from jaxenc.records import Example, Sentence
from jaxenc.structures.trees import unescape_ptb
from jaxenc.text_io import Line, tokenize

NAME = registry.CORPUS  # the dataset name
MIN_TOKENS, MAX_TOKENS = 4, 32  # the authors' minlen / maxlen
SPLITS = registry.DATASETS[NAME].splits  # ("train", "dev", "test")
OOV_RULES = ("drop_sentences", "drop_words", "unk")  # data.corpus_oov (module docstring)
DEFAULT_OOV = "drop_sentences"  # the authors' data.py
UNK_TOKEN = SPECIAL_TOKENS[UNK]  # "<unk>", what "unk" writes for a word outside the vocabulary

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
    """How a corpus is read (module docstring); `of` takes them from a training run's sections.

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
      oov: what happens to a sentence with words outside the vocabulary, one of `OOV_RULES`
        (data.corpus_oov; module docstring).
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
    oov: str = DEFAULT_OOV

    def __post_init__(self):
        if self.oov not in OOV_RULES:
            raise ConfigError(f"data.corpus_oov={self.oov!r} is not one of {', '.join(OOV_RULES)} "
                              f"(fix: --config.data.corpus_oov={DEFAULT_OOV})")
        if not self.vectors:
            raise ConfigError("the corpus vocabulary is the frequent words that have a vector, "
                              f"and data.embeddings is empty (fix: {named_vectors.vectors_fix()})")
        fractions = (self.dev_fraction, self.test_fraction)
        if min(fractions) <= 0.0 or sum(fractions) >= 1.0:
            raise ConfigError(f"task.dev_fraction={self.dev_fraction} and task.test_fraction="
                              f"{self.test_fraction} must be positive and sum below 1 (fix: "
                              "--config.task.dev_fraction=0.01 --config.task.test_fraction=0.01)")

    @classmethod
    def of(cls, data: Mapping[str, Any], *, dev_fraction: float, test_fraction: float,
           seed: int) -> CorpusOptions:
        """The options a training run's data section names (its corpus_files, embeddings,
        lowercase, lowercase_fallback, min_count, max_vocab, corpus_oov), with the held-out
        shares (task.dev_fraction, test_fraction) and their seed (the run's split seed)."""
        oov = data.get("corpus_oov", DEFAULT_OOV)  # a config without the key: the default
        if oov == "unk" and data["oov"] == "drop":
            raise ConfigError("data.corpus_oov='unk' writes <unk>, which data.oov='drop' removes "
                              "from the encoder's input (fix: --config.data.oov=random, or "
                              "--config.data.corpus_oov=drop_words)")
        return cls(files=tuple(corpus_paths(data["corpus_files"])), vectors=data["embeddings"],
                   lowercase=data["lowercase"], lowercase_fallback=data["lowercase_fallback"],
                   min_count=data["min_count"], max_vocab=data["max_vocab"],
                   dev_fraction=dev_fraction, test_fraction=test_fraction, seed=seed, oov=oov)


@dataclasses.dataclass(frozen=True)
class CorpusReport:
    """What reading a corpus kept and dropped; `print(report)` shows it (one line).

    Attributes:
      lines: non-blank lines read; too_short / too_long: of those, outside the token range.
      candidates: training words seen at least min_count times; without_vector: of those, not
        in the vectors file; vocabulary: the final vocabulary's words (the kept training
        sentences' words).
      oov: the rule applied to words outside the vocabulary (data.corpus_oov).
      kept, dropped_oov: sentences per split kept, and dropped for words outside the
        vocabulary (every such sentence under "drop_sentences"; under "drop_words" those left
        without a word; none under "unk").
      words: tokens per split of the sentences in the token range; oov_words: of those, outside
        the vocabulary (dropped with their sentence, dropped from it, or written as <unk>).
    """

    lines: int
    too_short: int
    too_long: int
    candidates: int
    without_vector: int
    vocabulary: int
    kept: dict[str, int]
    dropped_oov: dict[str, int]
    oov: str = DEFAULT_OOV
    words: dict[str, int] = dataclasses.field(default_factory=dict)
    oov_words: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def kept_fraction(self) -> float:
        """The kept sentences (all splits) over the lines read."""
        return sum(self.kept.values()) / max(self.lines, 1)

    def __str__(self) -> str:
        fate = {"drop_sentences": "their sentences dropped", "drop_words": "dropped from their "
                "sentences", "unk": "written as <unk>"}[self.oov]
        sentences = ", ".join(f"{split} {self.kept[split]:,} kept / {self.dropped_oov[split]:,} "
                              "dropped" for split in SPLITS)
        words = ", ".join(f"{split} {self.oov_words.get(split, 0):,} of "
                          f"{self.words.get(split, 0):,}" for split in SPLITS)
        return (f"corpus: {self.lines:,} lines, {self.too_short:,} shorter and {self.too_long:,} "
                f"longer than the token range; vocabulary {self.vocabulary:,} words "
                f"({self.candidates:,} frequent, {self.without_vector:,} of them without a "
                f"vector); data.corpus_oov={self.oov}: words outside it ({fate}): {words}; "
                f"sentences: {sentences}; {sum(self.kept.values()):,} of {self.lines:,} lines "
                f"kept ({100 * self.kept_fraction:.1f}%)")


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


def apply_oov_rule(tokens: tuple[str, ...], known: set[str] | frozenset[str],
                   rule: str) -> tuple[tuple[str, ...] | None, int]:
    """(the sentence's tokens as trained, or None when `rule` drops the sentence; how many of
    `tokens` are outside `known`) under one of `OOV_RULES`."""
    outside = sum(token not in known for token in tokens)
    if not outside:
        return tokens, 0
    if rule == "drop_sentences":
        return None, outside
    if rule == "drop_words":
        return tuple(token for token in tokens if token in known) or None, outside
    return tuple(token if token in known else UNK_TOKEN for token in tokens), outside


def _example(line: Line, tokens: tuple[str, ...]) -> Example:
    return Example(sentences=(Sentence(tokens=tokens, text=line.text),), uid=line.uid)


def load_corpus(options: CorpusOptions) -> tuple[dict[str, list[Example]], CorpusReport]:
    """The kept sentences of the corpus per split, and the report (module docstring)."""
    candidates, with_vector = _vocabulary_candidates(options)
    vocabulary = set(with_vector[:options.max_vocab] if options.max_vocab > 0 else with_vector)
    read: collections.Counter[str] = collections.Counter()
    dropped: collections.Counter[str] = collections.Counter()
    words: collections.Counter[str] = collections.Counter()
    outside: collections.Counter[str] = collections.Counter()
    splits: dict[str, list[Example]] = {split: [] for split in SPLITS}
    held_out: list[tuple[str, Line, tuple[str, ...]]] = []
    for split, line, tokens in _sentences(options, read):  # pass 2
        words[split] += len(tokens)
        if split != "train":  # judged against the kept training sentences' words, below
            held_out.append((split, line, tokens))
            continue
        kept, unknown = apply_oov_rule(tokens, vocabulary, options.oov)
        outside[split] += unknown
        if kept is None:
            dropped[split] += 1
        else:
            splits[split].append(_example(line, kept))
    trained = {token for example in splits["train"] for token in example.sentences[0].tokens}
    known = trained - {UNK_TOKEN}
    for split, line, tokens in held_out:
        kept, unknown = apply_oov_rule(tokens, known, options.oov)
        outside[split] += unknown
        if kept is None:
            dropped[split] += 1
        else:
            splits[split].append(_example(line, kept))
    for split, examples in splits.items():
        if not examples:
            raise DataError(f"no {split} sentence of {options.min_tokens}..{options.max_tokens} "
                            f"tokens is left under data.corpus_oov={options.oov}",
                            path=",".join(map(str, options.files)),
                            fix="give a larger corpus, word vectors that cover it, "
                                "--config.data.corpus_oov=drop_words, or larger "
                                "--config.task.dev_fraction / test_fraction")
    report = CorpusReport(
        lines=read["lines"], too_short=read["too_short"], too_long=read["too_long"],
        candidates=len(candidates), without_vector=len(candidates) - len(with_vector),
        vocabulary=len(trained), kept={s: len(splits[s]) for s in SPLITS},
        dropped_oov={s: dropped[s] for s in SPLITS}, oov=options.oov,
        words={s: words[s] for s in SPLITS}, oov_words={s: outside[s] for s in SPLITS})
    return splits, report


def load_splits(options: CorpusOptions) -> dict[str, list[Example]]:
    """train / dev / test of the corpus `options` name; the report is logged."""
    splits, report = load_corpus(options)
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


def normalise(line: str) -> str:
    """The form two sentences are compared in: lower-cased, whitespace collapsed to one space."""
    return " ".join(line.lower().split())


# The datasets of jaxenc.evaluation.transfer.TASKS (tests keep the two in step).
TRANSFER_DATASETS = ("mr", "cr", "subj", "mpqa", "sst2", "sst5", "trec", "mrpc", "sick_e",
                     "sick_r", "sts12", "sts13", "sts14", "sts15", "sts16", "stsb")


@dataclasses.dataclass(frozen=True)
class TransferSentences:
    """The normalised sentences of the transfer tasks a data root has.

    Attributes:
      normalised: `normalise`d sentences of every split of every dataset read.
      checked: the datasets read; missing: those without a data folder under the root (or a
        split that could not be read: "name:split").
    """

    normalised: frozenset[str]
    checked: tuple[str, ...]
    missing: tuple[str, ...]


def transfer_sentences(data_dir: str | os.PathLike | None = None,
                       datasets: Sequence[str] = TRANSFER_DATASETS) -> TransferSentences:
    """Every sentence of every split of `datasets` (transfer tasks) under the data root,
    normalised; a dataset whose folder is absent is listed as missing, not an error."""
    root = paths.data_dir(data_dir)
    found: set[str] = set()
    checked, missing = [], []
    for name in datasets:
        info = registry.DATASETS[name]
        if info.folder is None or not (root / info.folder).is_dir():
            missing.append(name)
            continue
        for split in info.splits:
            try:
                examples = registry.load(name, split, root)
            except DataError as error:
                log.warning("transfer task %s:%s not read: %s", name, split, error)
                missing.append(f"{name}:{split}")
                continue
            found.update(map(normalise, dataset_sentences(examples)))
        checked.append(name)
    return TransferSentences(frozenset(found), tuple(checked), tuple(missing))


@dataclasses.dataclass(frozen=True)
class BuildReport:
    """What `build_corpus` wrote; `print(report)` shows it (one line).

    Attributes:
      out: the corpus file. written: the lines written (distinct). repeats: lines not written
        because the same line was seen before.
      overlap: the distinct normalised source sentences that are transfer-task sentences, not
        written (= |normalise(sources) & transfer sentences|); overlap_by_source: per source,
        the ones first seen there.
      checked, missing: the transfer datasets compared against / absent (None: no comparison).
    """

    out: str
    written: int
    repeats: int
    overlap: int
    overlap_by_source: dict[str, int]
    checked: tuple[str, ...] | None
    missing: tuple[str, ...] | None

    def __str__(self) -> str:
        if self.checked is None:
            excluded = "transfer-task sentences not excluded (--exclude none)"
        else:
            by_source = ", ".join(f"{name} {count:,}" for name, count in
                                  self.overlap_by_source.items() if count) or "none"
            excluded = (f"left out {self.overlap:,} transfer-task sentences (lower-cased, "
                        f"whitespace collapsed; by source: {by_source}); transfer datasets "
                        f"compared: {', '.join(self.checked) or 'none'}")
            if self.missing:
                excluded += f"; without data here: {', '.join(self.missing)}"
        return (f"wrote {self.written:,} sentences to {self.out} ({self.repeats:,} repeated "
                f"lines skipped); {excluded}")


def build_corpus(sources: Iterable[tuple[str, Iterable[str]]], out: str | os.PathLike,
                 transfer: TransferSentences | None = None) -> BuildReport:
    """Writes the distinct lines of the (name, lines) `sources` in first-seen order, UTF-8, one
    a line, leaving out those whose normalised form is in `transfer` (None: none left out)."""
    seen: set[str] = set()
    overlap: set[str] = set()
    by_source: dict[str, int] = {}
    written = repeats = 0
    with Path(out).open("w", encoding="utf-8") as file:
        for name, lines in sources:
            by_source.setdefault(name, 0)
            for line in lines:
                if not line:
                    continue
                if line in seen:
                    repeats += 1
                    continue
                seen.add(line)
                key = normalise(line)
                if transfer is not None and key in transfer.normalised:
                    if key not in overlap:
                        overlap.add(key)
                        by_source[name] += 1
                    continue
                file.write(line + "\n")
                written += 1
    return BuildReport(out=str(out), written=written, repeats=repeats, overlap=len(overlap),
                       overlap_by_source=by_source,
                       checked=None if transfer is None else transfer.checked,
                       missing=None if transfer is None else transfer.missing)


def write_corpus(lines: Iterable[str], out: str | os.PathLike) -> int:
    """Writes the distinct `lines` in first-seen order, UTF-8, one a line; returns how many."""
    return build_corpus([("lines", lines)], out).written


# Registered datasets that are no transfer task (eval/transfer.py), any split.
DEFAULT_SOURCES = ("multi30k:train,multi30k:dev,multi30k:test,ud_ewt:train,ud_ewt:dev,ud_ewt:test,"
                   "ptb_sample:all,snli:dev")
# The transfer tasks' training splits (`--exclude none --datasets ...` adds them).
TRANSFER_TRAIN_SOURCES = "sst2:train,sick_r:train,trec:train,mrpc:train"
EXCLUDE = ("transfer", "none")


def main(argv: Sequence[str] | None = None) -> BuildReport:
    """`python -m jaxenc.data.corpus`: writes the sentences of registered datasets as a corpus
    file, without the transfer tasks' sentences unless --exclude none."""
    parser = argparse.ArgumentParser(
        description="Write the sentences of registered datasets as a corpus file (one sentence "
                    "a line, duplicates removed) for task.dataset=corpus.")
    parser.add_argument("--out", required=True, help="the corpus file to write")
    parser.add_argument("--datasets", default=DEFAULT_SOURCES,
                        help="comma-separated DATASET:SPLIT (default: datasets that are no "
                             f"transfer task; {TRANSFER_TRAIN_SOURCES} adds the transfer tasks' "
                             "training splits, whose sentences --exclude transfer leaves out)")
    parser.add_argument("--exclude", choices=EXCLUDE, default="transfer",
                        help="transfer (default): leave out every line that is a sentence of a "
                             "transfer task (lower-cased, whitespace collapsed), as far as the "
                             "data root has the task; none: keep them")
    parser.add_argument("--data_dir", default=None, help="the data root ($JAXENC_DATA_DIR)")
    args = parser.parse_args(argv)
    sources = [item.split(":") for item in args.datasets.split(",") if item]
    transfer = transfer_sentences(args.data_dir) if args.exclude == "transfer" else None
    report = build_corpus(((f"{name}:{split}",
                            dataset_sentences(registry.load(name, split, args.data_dir)))
                           for name, split in sources), args.out, transfer)
    print(report)
    return report


if __name__ == "__main__":
    main()
