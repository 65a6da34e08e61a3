"""The tables of results/encoders/README.md built from per-run files: SST-5 test and dev accuracy
over seeds (`sst5`, `sst5_runs`: results/encoders/runs/<model>_sst5_s<seed>.md), and SST-2 /
SST-5 test accuracy of the Tree-LSTM and the Dependency-Transformer by sentence length and by
negation (`sst2_by_length`, `sst2_by_negation`, `sst2_by_seed`, `sst2_layers`,
`sst5_breakdown`, `sst5_breakdown_by_seed`: the per-sentence files
results/encoders/sst{2,5}_breakdown/<run>.jsonl that reports.sst_breakdown writes), and the runs
trained again for the SST-5 breakdown beside their table runs (`sst5_retrained`)."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from reports.markdown import DASH, markdown, mean_std, percent
from reports.run_files import ENCODER_RUNS, RESULTS, row, seeded, value

SST2_BREAKDOWN = RESULTS / "encoders" / "sst2_breakdown"
SST5_BREAKDOWN = RESULTS / "encoders" / "sst5_breakdown"
# column of the SST-2 breakdown tables -> the names of its runs' files (group 1: the seed)
SST2_MODELS = {"Tree-LSTM": r"tree_lstm_sst2_s(\d+)",
               "Dependency-Transformer": r"dt_sst2_s(\d+)",
               "Dependency-Transformer, no relations": r"dt_plain_sst2_s(\d+)",
               "Dependency-Transformer, [root] sentence vector": r"diag_dt_sst2_s(\d+)_root"}
# column of the seed-0 table of the Dependency-Transformer's layer experiments -> its run's name
SST2_LAYER_MODELS = {"Tree-LSTM": r"tree_lstm_sst2_s(0)",
                     "Dependency-Transformer": r"dt_sst2_s(0)",
                     "Dependency-Transformer, no relations": r"dt_plain_sst2_s(0)",
                     "Dependency-Transformer, relations to tree distance 6":
                         r"diag_dt_sst2_s(0)_distance6",
                     "Dependency-Transformer, 6 layers": r"diag_dt_sst2_s(0)_layers6"}
# column of the SST-5 breakdown table -> the names of its runs' files (group 1: the seed)
SST5_BREAKDOWN_MODELS = {"Tree-LSTM": r"tree_lstm_sst5_s(\d+)",
                         "Dependency-Transformer": r"dt_sst5_s(\d+)",
                         "Dependency-Transformer, no relations": r"dt_plain_sst5_s(\d+)"}
SST2_LENGTHS = ((1, 10), (11, 20), (21, 30), (31, None))  # token-count buckets, inclusive


def breakdown_sentences(folder: Path,
                        models: Mapping[str, str]) -> dict[str, dict[int, list[dict]]]:
    """column -> seed -> the per-sentence facts of its run (`folder`/<run>.jsonl), for the
    columns of `models` (column -> run-name pattern, group 1: the seed)."""
    found: dict[str, dict[int, list[dict]]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for column, pattern in models.items():
            match = re.fullmatch(pattern, path.stem)
            if match:
                lines = path.read_text(encoding="utf-8").splitlines()
                found.setdefault(column, {})[int(match[1])] = [json.loads(x) for x in lines]
    return {column: dict(sorted(found[column].items())) for column in models
            if column in found}


def _breakdown(folder: Path, groups: Sequence[tuple[str, Callable[[dict], bool]]],
               models: Mapping[str, str]) -> str:
    """Accuracy (%) of each column's runs (`models`, files in `folder`) on the sentences of each
    group, the mean over its seeds, and the Dependency-Transformer's difference from the
    Tree-LSTM."""
    runs = _one_test_set(folder, models)
    first = next(iter(next(iter(runs.values())).values()))
    rows = []
    for label, member in groups:
        picked = [i for i, facts in enumerate(first) if member(facts)]
        means = {column: statistics.mean(_accuracy(run, picked) for run in seeds.values())
                 for column, seeds in runs.items()}
        gap = means.get("Dependency-Transformer", math.nan) - means.get("Tree-LSTM", math.nan)
        rows.append([label, str(len(picked)),
                     *(f"{means[c]:.1f}" if c in means else DASH for c in models),
                     f"{gap:+.1f}" if math.isfinite(gap) else DASH])
    header = [f"{column} ({_seeds_label(runs.get(column, {}))})" for column in models]
    return markdown(["test sentences", "count", *header, "Dependency-Transformer − Tree-LSTM"],
                    rows)


def _one_test_set(folder: Path, models: Mapping[str, str]) -> dict[str, dict[int, list[dict]]]:
    """breakdown_sentences(folder, models), checked to hold runs of one test set."""
    runs = breakdown_sentences(folder, models)
    sizes = {len(rows) for seeds in runs.values() for rows in seeds.values()}
    if len(sizes) != 1:
        raise ValueError(f"{folder}: runs of different test sets ({sorted(sizes)} sentences)"
                         if sizes else f"{folder}: no per-sentence file of {', '.join(models)} "
                         "(fix: python -m reports.sst_breakdown collect RUN_DIR ...)")
    return runs


def _accuracy(run: Sequence[dict], picked: Sequence[int]) -> float:
    """Accuracy (%) of one run's per-sentence facts on the sentences `picked` (indices)."""
    return 100 * sum(run[i]["correct"] for i in picked) / len(picked)


def _breakdown_by_seed(folder: Path, groups: Sequence[tuple[str, Callable[[dict], bool]]],
                       models: Mapping[str, str], compared: Sequence[tuple[str, str]]) -> str:
    """For each (column of `models`, its short name) of `compared` and each seed it shares with
    the Tree-LSTM, its accuracy (%) minus the Tree-LSTM's on the sentences of each group, with
    the two accuracies: a cell reads "-4.3 (43.4 / 47.7)"."""
    runs = _one_test_set(folder, models)
    tree = runs.get("Tree-LSTM", {})
    pairs = []  # (short name, seed, its run's per-sentence facts, the Tree-LSTM run's)
    for column, short in compared:
        ours = runs.get(column, {})
        pairs += [(short, seed, ours[seed], tree[seed]) for seed in sorted(ours.keys() & tree)]
    if not pairs:
        raise ValueError(f"{folder}: no seed with runs of both the Tree-LSTM and "
                         f"{' or '.join(column for column, _ in compared)} (fix: python "
                         "-m reports.sst_breakdown collect RUN_DIR ...)")
    first = pairs[0][2]
    rows = []
    for label, member in groups:
        picked = [i for i, facts in enumerate(first) if member(facts)]
        cells = []
        for _, _, ours, theirs in pairs:
            mine, tree_lstm = _accuracy(ours, picked), _accuracy(theirs, picked)
            cells.append(f"{mine - tree_lstm:+.1f} ({mine:.1f} / {tree_lstm:.1f})")
        rows.append([label, str(len(picked)), *cells])
    return markdown(["test sentences", "count",
                     *(f"seed {seed}: {short} − Tree-LSTM ({short} / Tree-LSTM)"
                       for short, seed, _, _ in pairs)], rows)


def _seeds_label(seeds: dict) -> str:
    return "no runs" if not seeds else f"seed{'s' if len(seeds) > 1 else ''} " + ", ".join(
        map(str, seeds))


def _length_groups() -> list[tuple[str, Callable[[dict], bool]]]:
    return [(f"{low}-{high} tokens" if high else f"{low}+ tokens",
             lambda facts, low=low, high=high: low <= facts["tokens"] <= (high or math.inf))
            for low, high in SST2_LENGTHS]


NEGATION_GROUPS = (("with a negation word", lambda facts: facts["negation"]),
                   ("without one", lambda facts: not facts["negation"]))
EVERY_GROUP = (*_length_groups(), *NEGATION_GROUPS, ("all", lambda facts: True))


def sst2_by_length_table() -> str:
    """SST-2 test accuracy by token count (SST2_LENGTHS), and over every sentence."""
    return _breakdown(SST2_BREAKDOWN, [*_length_groups(), ("all", lambda facts: True)],
                      SST2_MODELS)


def sst2_by_negation_table() -> str:
    """SST-2 test accuracy on the sentences with and without a negation word."""
    return _breakdown(SST2_BREAKDOWN, NEGATION_GROUPS, SST2_MODELS)


def sst2_by_seed_table() -> str:
    """The same SST-2 groups seed by seed: the Dependency-Transformer (DT) and its [root]
    sentence-vector run (DT [root]) minus the Tree-LSTM of the same seed, with the two
    accuracies."""
    return _breakdown_by_seed(SST2_BREAKDOWN, EVERY_GROUP, SST2_MODELS, [
        ("Dependency-Transformer", "DT"),
        ("Dependency-Transformer, [root] sentence vector", "DT [root]")])


def sst2_layers_table() -> str:
    """Seed 0: the Dependency-Transformer's layer experiments (SST2_LAYER_MODELS) beside its
    table run and the Tree-LSTM, by token count, by negation, and over every sentence."""
    return _breakdown(SST2_BREAKDOWN, EVERY_GROUP, SST2_LAYER_MODELS)


def sst5_breakdown_table() -> str:
    """SST-5 test accuracy (5 classes) of the Tree-LSTM and the Dependency-Transformer (with and
    without relations), mean over the seeds found, by token count, by negation, and over every
    sentence."""
    return _breakdown(SST5_BREAKDOWN, EVERY_GROUP, SST5_BREAKDOWN_MODELS)


def sst5_breakdown_by_seed_table() -> str:
    """The same SST-5 groups seed by seed: the Dependency-Transformer (DT) minus the Tree-LSTM,
    and their two accuracies."""
    return _breakdown_by_seed(SST5_BREAKDOWN, EVERY_GROUP, SST5_BREAKDOWN_MODELS,
                              [("Dependency-Transformer", "DT")])


def sst5_retrained_table() -> str:
    """Each run trained again for the SST-5 breakdown
    (SST5_BREAKDOWN/trained_again/<run>/results.md) beside the committed table run of the same
    name (ENCODER_RUNS/<run>/results.md): dev and test accuracy (%), where each stopped."""
    rows = []
    for again in sorted(SST5_BREAKDOWN.glob("trained_again/*/results.md")):
        table_run = ENCODER_RUNS / again.parent.name / "results.md"
        if not table_run.is_file():
            raise ValueError(f"{again}: no table run {table_run} to set it beside (fix: name the "
                             "folder after the table run it trains again)")
        cells = []
        for found in (row(table_run), row(again)):
            cells += [percent(value(found["dev accuracy"])), percent(value(found["test accuracy"])),
                      f"{found['best step']} of {found['steps']} ({found['stopped by']})"]
        rows.append([again.parent.name, *cells])
    return markdown(["run", "dev acc (table run)", "test acc (table run)",
                     "best step of steps (table run)", "dev acc (trained again)",
                     "test acc (trained again)", "best step of steps (trained again)"], rows)

SST5_MODELS = {"transformer": "Transformer", "dt": "Dependency-Transformer (spaCy trees)",
               "psan": "PSAN (gold SST trees, packed PSA)",
               "phrase_transformer": "PhraseTransformer (2-grams)"}


def sst5_table() -> str:
    """SST-5 test and dev accuracy of each model of SST5_MODELS, mean ± std over seeds."""
    rows = []
    for key, label in SST5_MODELS.items():
        found = seeded(ENCODER_RUNS, f"{key}_sst5")
        if not found:
            continue
        rows.append([label, ", ".join(map(str, found)),
                     mean_std([value(row(path)["test accuracy"]) for path in found.values()]),
                     mean_std([value(row(path)["dev accuracy"]) for path in found.values()])])
    return markdown(["model", "seeds", "SST-5 test acc", "SST-5 dev acc"], rows)


def sst5_runs_table() -> str:
    """The rows of the SST-5 run files of SST5_MODELS, one per run."""
    header, rows = None, []
    for key in SST5_MODELS:
        for path in seeded(ENCODER_RUNS, f"{key}_sst5").values():
            r = row(path)
            if header is None:
                header = list(r)
            elif list(r) != header:
                raise ValueError(f"{path}: columns {list(r)} differ from {header}")
            rows.append([path.stem, *r.values()])
    return markdown(["run", *(header or [])], rows)
