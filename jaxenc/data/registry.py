"""Every dataset by name: what it is (`DATASETS`) and how to read one split of it (`load`).

Folders are relative to the data root (`jaxenc.data.paths.data_dir`: an explicit folder, else
$JAXENC_DATA_DIR), one folder per dataset (`DatasetInfo.folder`); STS12-16 and STS-B use SentEval's
own layout (`STS/STS12-en-test/`, `STS/STSBenchmark/`). The embedded `synthetic` dataset needs no
folder. Readers of other packages (tree formats, the synthetic generator) are imported when first
used.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jaxenc.data import (
    labelled_files,
    multi30k,
    paths,
    senteval_binary,
    sick,
    snli,
    sst,
    sts,
    trec,
)
from jaxenc.data.mrpc import PARAPHRASE_LABELS, read_mrpc
from jaxenc.errors import DataError
from jaxenc.records import Example

KINDS = ("single", "pair", "relatedness", "tagging", "translation", "unlabelled")


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What a dataset is.

    Attributes:
      name: the registry key.
      kind: one of KINDS: "single" (one sentence -> class), "pair" (two sentences -> class),
        "relatedness" (two sentences -> score), "tagging", "translation", "unlabelled".
      num_classes: classes of `Example.label`; for "relatedness" the K of the Tai et al. head
        (score_range spans K integer points); None where there is no fixed label set.
      label_names: the name of each class index, or None.
      splits: the split names `load` accepts (STS12-16: the subset names).
      folder: the folder under the data root, or None for embedded data.
      score_range: (low, high) of `Example.score` for "relatedness" datasets, else None.
      tokenizer: how the reader turns text into `Sentence.tokens` (a key of
        `jaxenc.text_io.TOKENIZERS`): "whitespace" for files already tokenised (the tokens
        are the text split on whitespace),
        "text" for untokenised text (`text_io.tokenize`); an exported encoder tokenises a plain
        string the same way.
    """

    name: str
    kind: str
    num_classes: int | None
    label_names: tuple[str, ...] | None
    splits: tuple[str, ...]
    folder: str | None
    score_range: tuple[float, float] | None = None
    tokenizer: str = "whitespace"


# Reads one split: (dataset folder, or None for embedded data; split name) -> examples.
Reader = Callable[[Path | None, str], list[Example]]

DATASETS: dict[str, DatasetInfo] = {}
_READERS: dict[str, Reader] = {}


def load(name: str, split: str, data_dir: str | os.PathLike | None = None) -> list[Example]:
    """The examples of one split of dataset `name`.

    Args:
      name: a key of DATASETS.
      split: one of `DATASETS[name].splits`.
      data_dir: the data root; None means $JAXENC_DATA_DIR (not needed for embedded data).

    Raises:
      DataError: unknown name or split (listing the valid ones), missing folder or file, a split
        without any example.
    """
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}", fix=f"use one of {', '.join(DATASETS)}")
    info = DATASETS[name]
    if split not in info.splits:
        if not info.splits:  # "files": its splits are a training config's files
            _READERS[name](None, split)  # raises, naming the flags that give them
        raise DataError(f"dataset {name!r} has no split {split!r}",
                        fix=f"use one of {', '.join(info.splits)}")
    folder = None
    if info.folder is not None:
        folder = paths.data_dir(data_dir) / info.folder
        if not folder.is_dir():
            raise DataError(f"folder of dataset {name!r} not found", path=folder,
                            fix=f"put the {name} files in <data root>/{info.folder} "
                                "(layout: docs/data.md)")
    examples = _READERS[name](folder, split)
    if not examples:
        raise DataError(f"dataset {name!r} has no {split} examples", path=folder,
                        fix="every record of the split's file(s) was skipped (see the log); "
                            "check that they are the right, complete files")
    return examples


def _register(info: DatasetInfo, reader: Reader) -> None:
    if info.kind not in KINDS:
        raise ValueError(f"dataset {info.name!r}: kind {info.kind!r} is not one of {KINDS}")
    DATASETS[info.name] = info
    _READERS[info.name] = reader


def _file_per_split(read: Callable[[Path], list[Example]], files: dict[str, str]) -> Reader:
    """A Reader that reads `folder / files[split]` with `read`."""
    return lambda folder, split: read(folder / files[split])


def _binary_corpus(name: str) -> Reader:
    """A Reader of SentEval binary corpus `name` (its only split is "all")."""
    return lambda folder, split: senteval_binary.read_binary_corpus(folder, name)


def _existing(path: Path) -> Path:
    """`path`, or a DataError naming it when it is not a file."""
    if not path.is_file():
        raise DataError("file not found", path=path,
                        fix="check the data folder holds this file (layout: docs/data.md)")
    return path


# ---------------------------------------------------------------------------------------------
# Readers that need more than one file per split.

def _read_sst5_phrases(folder: Path, split: str) -> list[Example]:
    """Train: every labelled phrase of every train tree; dev/test: whole sentences only."""
    trees = sst.read_sst_trees(folder / f"{split}.txt")
    if split != "train":
        return trees
    return [phrase for tree in trees for phrase in sst.expand_phrases(tree)]


def _read_sst2_phrases(folder: Path, split: str) -> list[Example]:
    """Train: every non-neutral phrase, labelled 0/1, of every SST-2 train tree (the trees
    without a neutral root, `sst.binary_phrases`); dev/test: the SST-2 sentences (= sst2_trees)."""
    trees = sst.read_sst_trees(folder / f"{split}.txt", binary=True)
    if split != "train":
        return trees
    return [phrase for tree in trees for phrase in sst.binary_phrases(tree)]


def _read_snli(folder: Path, split: str) -> list[Example]:
    """`snli_1.0_<split>.jsonl`, else the one `snli_1.0_<split>*.jsonl` (e.g. a sample)."""
    exact = folder / f"snli_1.0_{split}.jsonl"
    if exact.is_file():
        return snli.read_snli(exact)
    matches = sorted(folder.glob(f"snli_1.0_{split}*.jsonl"))
    if len(matches) != 1:
        problem = "no file" if not matches else f"{len(matches)} files"
        raise DataError(f"{problem} matching snli_1.0_{split}*.jsonl", path=folder,
                        fix=f"put exactly one snli_1.0_{split}.jsonl from SNLI 1.0 in the folder")
    return snli.read_snli(matches[0])


def _read_ud_ewt(folder: Path, split: str) -> list[Example]:
    """`en_ewt-ud-<split>.conllu`; train may instead be shards `...train.partKofN.conllu`. The
    uid of a sentence is "<file>:<line of its first word>"."""
    from jaxenc.structures.formats import numbered_conllu

    whole = folder / f"en_ewt-ud-{split}.conllu"
    shards = sorted(folder.glob(f"en_ewt-ud-{split}.part*of*.conllu"), key=_shard_number)
    if whole.is_file() or not shards:
        shards = [_existing(whole)]
    return [Example(sentences=(sentence,), uid=f"{shard.name}:{line}")
            for shard in shards for line, sentence in numbered_conllu(shard)]


def _shard_number(path: Path) -> int:
    match = re.search(r"\.part(\d+)of\d+\.", path.name)
    return int(match.group(1)) if match else 0


def _read_ptb_sample(folder: Path, split: str) -> list[Example]:
    from jaxenc.structures.formats import read_treebank_zip

    sentences = read_treebank_zip(_existing(folder / "treebank.zip"),
                                  _existing(folder / "dependency_treebank.zip"))
    return [Example(sentences=(sentence,), uid=f"treebank.zip#{number}")
            for number, sentence in enumerate(sentences, start=1)]


def _read_synthetic(folder: None, split: str) -> list[Example]:
    from jaxenc.data.synthetic import generate_split

    return generate_split(split)


# ---------------------------------------------------------------------------------------------
# The datasets.

_TRAIN_DEV_TEST = ("train", "dev", "test")

_SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt",
               "test": "SICK_test_annotated.txt"}
_register(DatasetInfo("sick_e", "pair", len(sick.ENTAILMENT_LABELS), sick.ENTAILMENT_LABELS,
                      _TRAIN_DEV_TEST, "sick", tokenizer="text"),
          _file_per_split(sick.read_sick, _SICK_FILES))
_register(DatasetInfo("sick_r", "relatedness", 5, None, _TRAIN_DEV_TEST, "sick",
                      score_range=sick.RELATEDNESS_RANGE, tokenizer="text"),
          _file_per_split(sick.read_sick, _SICK_FILES))

_TREC_FILES = {"train": "TREC.train", "test": "TREC.test"}
_register(DatasetInfo("trec", "single", len(trec.COARSE_LABELS), trec.COARSE_LABELS,
                      tuple(_TREC_FILES), "trec"),
          _file_per_split(trec.read_trec, _TREC_FILES))
_register(DatasetInfo("trec_fine", "single", len(trec.FINE_LABELS), trec.FINE_LABELS,
                      tuple(_TREC_FILES), "trec"),
          _file_per_split(functools.partial(trec.read_trec, fine=True), _TREC_FILES))

_MRPC_FILES = {"train": "msr_paraphrase_train.txt", "test": "msr_paraphrase_test.txt"}
_register(DatasetInfo("mrpc", "pair", len(PARAPHRASE_LABELS), PARAPHRASE_LABELS,
                      tuple(_MRPC_FILES), "mrpc", tokenizer="text"),
          _file_per_split(read_mrpc, _MRPC_FILES))

for _name, _labels, _stem in (("sst2", sst.SST2_LABELS, "stsa.binary"),
                              ("sst5", sst.SST5_LABELS, "stsa.fine")):
    _register(DatasetInfo(_name, "single", len(_labels), _labels, _TRAIN_DEV_TEST,
                          f"{_name}_sentences"),
              _file_per_split(functools.partial(sst.read_sst_sentences, num_classes=len(_labels)),
                              {split: f"{_stem}.{split}" for split in _TRAIN_DEV_TEST}))

_SST_TREE_FILES = {split: f"{split}.txt" for split in _TRAIN_DEV_TEST}
_register(DatasetInfo("sst5_trees", "single", len(sst.SST5_LABELS), sst.SST5_LABELS,
                      _TRAIN_DEV_TEST, "sst_ptb_trees"),
          _file_per_split(sst.read_sst_trees, _SST_TREE_FILES))
_register(DatasetInfo("sst5_phrases", "single", len(sst.SST5_LABELS), sst.SST5_LABELS,
                      _TRAIN_DEV_TEST, "sst_ptb_trees"),
          _read_sst5_phrases)
_register(DatasetInfo("sst2_trees", "single", len(sst.SST2_LABELS), sst.SST2_LABELS,
                      _TRAIN_DEV_TEST, "sst_ptb_trees"),
          _file_per_split(functools.partial(sst.read_sst_trees, binary=True), _SST_TREE_FILES))
_register(DatasetInfo("sst2_phrases", "single", len(sst.SST2_LABELS), sst.SST2_LABELS,
                      _TRAIN_DEV_TEST, "sst_ptb_trees"),
          _read_sst2_phrases)

for _name, _corpus in senteval_binary.CORPORA.items():
    _register(DatasetInfo(_name, "single", len(_corpus.label_names), _corpus.label_names,
                          ("all",), _name),
              _binary_corpus(_name))

_register(DatasetInfo("snli", "pair", len(snli.NLI_LABELS), snli.NLI_LABELS, _TRAIN_DEV_TEST,
                      "snli", tokenizer="text"),  # tokens from the parses, of untokenised text
          _read_snli)
_register(DatasetInfo("multi30k", "translation", None, None, _TRAIN_DEV_TEST, "multi30k"),
          multi30k.read_multi30k)
_register(DatasetInfo("ud_ewt", "tagging", None, None, _TRAIN_DEV_TEST, "ud_english_ewt",
                      tokenizer="text"),  # CoNLL-U words of untokenised text
          _read_ud_ewt)
_register(DatasetInfo("ptb_sample", "tagging", None, None, ("all",), "nltk_treebank"),
          _read_ptb_sample)

for _year, _subsets in sts.SUBSETS.items():
    _register(DatasetInfo(f"sts{_year % 100}", "relatedness", None, None, _subsets,
                          sts.YEAR_FOLDERS[_year], score_range=sts.SCORE_RANGE,
                          tokenizer="text"),
              sts.read_sts_subset)
_register(DatasetInfo("stsb", "relatedness", 6, None, sts.STSB_SPLITS, sts.STSB_FOLDER,
                      score_range=sts.SCORE_RANGE, tokenizer="text"),
          _file_per_split(sts.read_stsb, {split: f"sts-{split}.csv" for split in sts.STSB_SPLITS}))

_register(DatasetInfo("synthetic", "single", 2, ("negative", "positive"), _TRAIN_DEV_TEST, None),
          _read_synthetic)


def _read_corpus(folder: None, split: str) -> list[Example]:
    raise DataError("dataset 'corpus' is the text files of a training config's "
                    "data.corpus_files, read by jaxenc.data.corpus.load_splits",
                    fix="train with --config.task.dataset=corpus "
                        "--config.data.corpus_files=A.txt[,B.txt]")


# Any text: jaxenc.data.corpus reads the files of data.corpus_files (and, as a command, writes
# such a file from the datasets registered here, so it imports this module, not the reverse).
CORPUS = "corpus"
_register(DatasetInfo(CORPUS, "unlabelled", None, None, _TRAIN_DEV_TEST, None, tokenizer="text"),
          _read_corpus)


def _read_files(folder: None, split: str) -> list[Example]:
    raise DataError("dataset 'files' is the files of a training config's data.train_file, "
                    "dev_file and test_file, read by jaxenc.data.labelled_files.load_splits",
                    fix="train with --config.task.dataset=files --config.data.train_file=PATH")


# Your own labelled files (jaxenc.data.labelled_files): what they hold (the task's kind, its
# labels, its splits) is known once data.train_file is read (`dataset_info`).
_register(DatasetInfo(labelled_files.NAME, "single", None, None, (), None, tokenizer="text"),
          _read_files)


def dataset_info(dataset: str, data: Mapping[str, Any]) -> DatasetInfo:
    """The dataset a training run trains on: DATASETS[dataset] (task.dataset), and for "files"
    what the data section's train_file holds (`files_info`)."""
    info = DATASETS[dataset]
    if info.name != labelled_files.NAME:
        return info
    return files_info(labelled_files.describe(data))


def files_info(described: labelled_files.Description) -> DatasetInfo:
    """The "files" dataset as `described`: its kind, and its label names or its score range and
    that range's integer points (the relatedness head's classes)."""
    info = DATASETS[labelled_files.NAME]
    if described.score_range is not None:
        low, high = described.score_range
        return dataclasses.replace(info, kind=described.columns.kind,
                                   num_classes=int(high - low) + 1,
                                   score_range=described.score_range)
    return dataclasses.replace(info, kind=described.columns.kind,
                               num_classes=len(described.label_names),
                               label_names=described.label_names)
