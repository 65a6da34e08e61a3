"""PSAN's Table 1 (phrases per sentence and words per phrase at division levels 1-3) for every
dataset the project parses, from exactly the trees and division the project gives PSAN there.

For each row the model section is `jaxenc.configs.get_config("psan,<dataset>").model` after the
training config check (`jaxenc.training.validation.check_config`, which resolves an "auto"
parser), so the parser is the one a run of train/configs/psan_*.py or base.py:psan,<dataset>
uses: "gold" for the datasets that ship phrase trees (SST's trees, SNLI's `sentence*_parse`),
spaCy-derived phrase trees (`spacy-constituency`) everywhere else, also for the SentEval transfer
tasks, which `eval.transfer` parses with `spacy-constituency` for any PSAN. UD English-EWT, which
other models read with its gold dependency arcs or spaCy's, has a row for each: the gold row's
phrase trees are derived from the gold arcs, as `python -m jaxenc.structures.stats --conllu`
derives them. Multi30k has no row: its source side is German, and spaCy's model here is
English. The division is the config's own (num_levels, min_split_len, binarize, division). The
"segments" structure arrays come from `jaxenc.structures.arrays` (`StructureSpec.from_config`, as
the featurizer builds them) and are counted by `jaxenc.structures.stats.segment_stats`. Every
split in the data folder is read (examples without a target dropped, as training's loader does;
blank sentences, which an encoder gives zeros unparsed, left out); a pair gives both its
sentences. Sentences longer than the batcher's largest bucket are counted too (the batcher drops
them later).

spaCy parses are cached in --cache_dir (jaxenc.structures.cache), so a rerun parses nothing.
The numbers are stored in results/psan/table1.json; results/psan/table1.md is rendered from
them.

    python -m reports.psan_table1                       # measure every row, write json and md
    python -m reports.psan_table1 --datasets sst5_trees,snli   # measure these rows only
    python -m reports.psan_table1 --check               # measure, exit 1 if the files differ
    python -m reports.psan_table1 --render              # table1.md from table1.json, no data
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import ml_collections

from jaxenc import configs
from jaxenc.data import paths, registry
from jaxenc.errors import DataError
from jaxenc.records import Example, Sentence
from jaxenc.structures import arrays, stats
from jaxenc.training import validation
from reports.run_files import RESULTS

STORED = RESULTS / "psan" / "table1.json"
TABLE = RESULTS / "psan" / "table1.md"
TRAINING, TRANSFER = "training", "transfer"
# Read by no committed PSAN config or transfer task; base.py:psan,<dataset> trains on it.
BASE = "base.py"


@dataclasses.dataclass(frozen=True)
class Row:
    """One row: `datasets[0]` is read; the others have the same sentences (SICK-E / SICK-R).
    `paper`: the paper's Table 1 row (stats.PAPER_TABLE1) shown after the last row naming it.
    `parser`: the trees to divide when not those PSAN's config resolves for the dataset."""

    key: str
    datasets: tuple[str, ...]
    label: str
    uses: tuple[str, ...]  # TRAINING: a train/configs/psan_*.py run; TRANSFER: eval.transfer
    paper: str | None = None
    parser: str | None = None


ROWS: tuple[Row, ...] = (
    Row("sst5_trees", ("sst5_trees",), "SST-5 sentences", (TRAINING,), "SST5"),
    Row("sst5", ("sst5",), "SST-5 sentences, lower-cased", (TRANSFER,), "SST5"),
    Row("sst5_phrases", ("sst5_phrases",), "SST-5 train phrases + dev/test sentences",
        (TRAINING,), "SST5"),
    Row("sst2_trees", ("sst2_trees",), "SST-2 sentences", (TRAINING,), "SST2"),
    Row("sst2", ("sst2",), "SST-2 sentences, lower-cased", (TRANSFER,), "SST2"),
    Row("snli", ("snli",), "SNLI premises + hypotheses", (TRAINING,)),
    Row("trec", ("trec",), "TREC questions", (TRAINING, TRANSFER), "TREC"),
    Row("sick", ("sick_e", "sick_r"), "SICK sentence pairs", (TRAINING, TRANSFER), "SICK-E"),
    Row("mrpc", ("mrpc",), "MRPC sentence pairs", (TRANSFER,), "MRPC"),
    Row("mr", ("mr",), "MR", (TRANSFER,), "MR"),
    Row("cr", ("cr",), "CR", (TRANSFER,), "CR"),
    Row("subj", ("subj",), "SUBJ", (TRANSFER,), "SUBJ"),
    Row("mpqa", ("mpqa",), "MPQA", (TRANSFER,), "MPQA"),
    *(Row(f"sts{year}", (f"sts{year}",), f"STS{year} sentence pairs", (TRANSFER,),
          "STS14" if year == 14 else None) for year in range(12, 17)),
    Row("stsb", ("stsb",), "STS-B sentence pairs", (TRANSFER,)),
    Row("ud_ewt", ("ud_ewt",), "UD English-EWT sentences", (BASE,)),
    Row("ud_ewt_gold", ("ud_ewt",), "UD English-EWT sentences, trees of the gold arcs", (BASE,),
        parser="gold"),
    Row("ptb_sample", ("ptb_sample",), "Penn Treebank sample", (BASE,)),
)
ROWS_BY_KEY = {row.key: row for row in ROWS}
# The paper's rows whose size counts sentence pairs.
PAPER_PAIRS = ("SICK-E", "SICK-R", "STS14", "MRPC")


def default_cache_dir() -> str:
    """$XDG_CACHE_HOME/jaxenc/parses, else ~/.cache/jaxenc/parses."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(root) / "jaxenc" / "parses")


def psan_model_config(dataset: str) -> ml_collections.ConfigDict:
    """PSAN's model section for `dataset` as a training run has it: its "auto" parser resolved
    by the config check ("gold" where the dataset ships phrase trees)."""
    config = configs.get_config(f"psan,{dataset}")
    validation.check_config(config)
    return config.model


def _has_target(example: Example, kind: str) -> bool:
    """Whether training keeps the example (jaxenc.training.input_pipeline.load_splits drops the
    others)."""
    if kind in ("single", "pair"):
        return example.label is not None
    return example.score is not None if kind == "relatedness" else True


def read_sentences(dataset: str,
                   data_dir: str | None) -> tuple[list[Sentence], list[str]] | None:
    """Every sentence of every split of `dataset` found in the data folder, and those splits;
    None when its folder is absent. A split whose file is absent is left out (SNLI here: the
    dev sample only)."""
    info = registry.DATASETS[dataset]
    if not (paths.data_dir(data_dir) / info.folder).is_dir():
        return None
    sentences, splits = [], []
    for split in info.splits:
        try:
            examples = registry.load(dataset, split, data_dir)
        except DataError as error:
            print(f"{dataset}: split {split} left out ({error})", file=sys.stderr)
            continue
        sentences += [sentence for example in examples if _has_target(example, info.kind)
                      for sentence in example.sentences]
        splits.append(split)
    return (sentences, splits) if splits else None


def _split_empty(sentences: list[Sentence]) -> tuple[list[Sentence], int]:
    """The sentences with tokens, and how many had none (CR's and MPQA's blank lines: an encoder
    gives them zeros without parsing them; a training loader refuses them)."""
    kept = [sentence for sentence in sentences if sentence.tokens]
    return kept, len(sentences) - len(kept)


def measure(row: Row, data_dir: str | None, cache_dir: str) -> dict | None:
    """The stored numbers of `row` (None when its data is absent); prints the parse time."""
    read = read_sentences(row.datasets[0], data_dir)
    if read is None:
        print(f"{row.key}: no data, row not measured", file=sys.stderr)
        return None
    sentences, splits = read
    sentences, empty = _split_empty(sentences)
    model = psan_model_config(row.datasets[0])
    if row.parser is not None:
        model.parser = row.parser
    spec = arrays.StructureSpec.from_config(model, ("segments",), cache_dir=cache_dir)
    start = time.perf_counter()
    trees = spec.parse(sentences)
    seconds = time.perf_counter() - start
    segments = [spec.arrays(sentence, tree)["segments"]
                for sentence, tree in zip(sentences, trees, strict=True)]
    result = stats.segment_stats(segments)
    print(f"{row.key}: {len(sentences)} sentences, {spec.parser} trees in {seconds:.1f} s "
          f"(parse or cache load)", file=sys.stderr)
    return {"datasets": list(row.datasets), "parser": spec.parser, "splits": splits,
            "num_levels": spec.num_levels, "min_split_len": spec.min_split_len,
            "binarize": spec.binarize, "division": spec.division,
            "sentences": result.sentences, "empty": empty,
            "distinct": len({sentence.tokens for sentence in sentences}),
            "phrases_per_sentence": list(result.phrases_per_sentence),
            "words_per_phrase": list(result.words_per_phrase)}


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _numbers(phrases: Sequence[float], words: Sequence[float]) -> list[str]:
    return [f"{value:.2f}" for value in (*phrases, *words)]


def _paper_line(name: str) -> str:
    size, phrases, words = stats.PAPER_TABLE1[name]
    label = "SICK-E / SICK-R" if name == "SICK-E" else name
    count = f"{size} pairs" if name in PAPER_PAIRS else str(size)
    return _line([f"*{label} (paper)*", "Stanford PCFG", "", "", count, "",
                  *_numbers(phrases, words)])


def render(stored: dict[str, dict]) -> str:
    """table1.md from the stored numbers (row key -> `measure`'s dict)."""
    header = ["dataset", "trees", "read by PSAN in", "splits", "sentences", "distinct",
              "phrases/sent. L1", "L2", "L3", "words/phrase L1", "L2", "L3"]
    lines = [
        "# PSAN Table 1 on every dataset the project parses",
        "",
        "Made by `python -m reports.psan_table1` (numbers in table1.json). Phrases per sentence "
        "is the mean over sentences of the phrase count of the level; words per phrase is all "
        "words over all phrases of the level. Each row divides exactly the trees PSAN gets for "
        "that dataset (the model section of `jaxenc.configs.get_config(\"psan,<dataset>\")` "
        "after the training config check: 3 levels, phrases under 4 words not divided, n-ary "
        "nodes right-binarised): `gold` = the trees shipped with the "
        "data, `spacy-constituency` = phrase trees derived from spaCy `en_core_web_sm` "
        "dependency parses. \"training\": a train/configs/psan_*.py run reads it (SST-5 "
        "sentences: as sst5_phrases' dev and test sentences and the roots of its training "
        "phrases); \"transfer\": `eval.transfer` (SentEval tasks) parses it for a trained "
        "PSAN (any dataset can also be trained on with base.py:psan,<dataset>, with the same "
        "trees); \"base.py\": only that way (UD English-EWT: also with the phrase trees "
        "derived from its gold arcs, as `python -m jaxenc.structures.stats --conllu` derives "
        "them; Multi30k has no row, its source side being German and spaCy's model here "
        "English). Sentences: every sentence the loader gives PSAN (both of "
        "a pair, repeats counted, all splits in the data folder; SNLI: the first 1289 dev "
        "records, less those without a gold label); distinct: different token sequences among "
        "them. Rows in italics are the paper's Table 1 (Wu et al. 2018; trees from the Stanford "
        "PCFG parser 3.5.2; its size counts pairs for SICK, STS14 and MRPC, and its SST2 is "
        "SentEval's: every training phrase and the dev and test sentences).",
        "",
        _line(header),
        "|" + "---|" * len(header),
    ]
    missing = []
    for index, row in enumerate(ROWS):
        numbers = stored.get(row.key)
        if numbers is None:
            missing.append(", ".join(row.datasets))
        else:
            lines.append(_line([
                f"{row.label} ({', '.join(row.datasets)})", numbers["parser"],
                ", ".join(row.uses), "+".join(numbers["splits"]), str(numbers["sentences"]),
                str(numbers["distinct"]),
                *_numbers(numbers["phrases_per_sentence"], numbers["words_per_phrase"])]))
        following = ROWS[index + 1].paper if index + 1 < len(ROWS) else None
        if row.paper is not None and following != row.paper:
            lines.append(_paper_line(row.paper))
    empty = [f"{stored[row.key]['empty']} of {', '.join(row.datasets)}"
             for row in ROWS if stored.get(row.key, {}).get("empty")]
    if empty:
        lines += ["", f"Blank lines left out (an encoder gives them zeros without parsing "
                      f"them): {'; '.join(empty)}."]
    if missing:
        lines += ["", f"Not measured (no data folder here): {', '.join(missing)}."]
    return "\n".join(lines) + "\n"


def load_stored(path: Path = STORED) -> dict[str, dict]:
    """The stored numbers, {} when the file is absent."""
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))["rows"]


def _dump(rows: dict[str, dict]) -> str:
    ordered = {row.key: rows[row.key] for row in ROWS if row.key in rows}
    return json.dumps({"rows": ordered}, indent=1) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default=",".join(ROWS_BY_KEY),
                        help="row keys to measure (the others keep their stored numbers)")
    parser.add_argument("--data_dir", default=None, help="the data root ($JAXENC_DATA_DIR)")
    parser.add_argument("--cache_dir", default=default_cache_dir(),
                        help="spaCy parse cache (default %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="measure and compare with table1.json / table1.md; write nothing")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite table1.md from table1.json (with --check: compare)")
    args = parser.parse_args(argv)
    keys = [key.strip() for key in args.datasets.split(",") if key.strip()]
    unknown = [key for key in keys if key not in ROWS_BY_KEY]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {', '.join(ROWS_BY_KEY)}")
    stored = load_stored()
    rows = dict(stored)
    differences = []
    if not args.render:
        for key in keys:
            numbers = measure(ROWS_BY_KEY[key], args.data_dir, args.cache_dir)
            if numbers is None:
                continue
            if numbers != stored.get(key):
                differences.append(f"{key}: stored {stored.get(key)}, measured {numbers}")
            rows[key] = numbers
    text = render(rows)
    if args.check:
        if TABLE.read_text(encoding="utf-8") != text:
            differences.append(f"{TABLE.name} differs from the rendering of the numbers")
        for line in differences:
            print(line, file=sys.stderr)
        print("table1: " + ("differs" if differences else "up to date"), file=sys.stderr)
        return 1 if differences else 0
    STORED.write_text(_dump(rows), encoding="utf-8")
    TABLE.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
