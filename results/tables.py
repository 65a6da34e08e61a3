"""The measured tables of the per-model results pages, rebuilt from the run files committed in
results/ and nothing else (results/encoders/table.py does the same for the encoder tables of
README.md, docs/results.md and results/encoders/README.md).

A run file is a copy of a run's results.md (one table row per model trained by the run: dev and
test metrics at the best dev checkpoint, steps, parameters, time, memory; a translation run adds
sacrebleu's line per model) or, for `dt_epoch`, the report a benchmark script wrote.

Tables, each between the markers `<!-- tables.py: NAME -->` and `<!-- /tables.py -->` of the page
`PAGES[NAME]`:
  disan_sweep  results/disan: DiSAN and the bag in the recipe sweep (full GloVe 6B 50-d vocabulary,
               seed 0): dev score of every recipe, test of the recipe chosen on dev; from
               results/encoders/runs/sweep_{disan,bag}_<task>_<recipe>/
  psan_table4  results/psan: Table 4's ablations on TREC, test accuracy per seed and mean ± std,
               beside the paper's SNLI numbers; from
               results/psan/runs/psan_<ablation>_trec_s<seed>.md (the full model: psan_trec_s*.md)
  psan_seeds   results/psan: PSAN's other seeded runs (SICK-E, SICK-R with `memory_norm=layer`,
               SST-5); from results/psan/runs/ and results/encoders/runs/psan_sst5_s<seed>.md
  psan_snli    results/psan: the psan_snli smoke runs; from results/psan/runs/psan_snli_smoke*.md
  pt_pos       results/phrase_transformer: POS tagging (UD-EWT, GloVe 6B 50-d words, trained
               until dev stops improving), test accuracy per seed and mean ± std beside the
               paper's Table 2; from results/phrase_transformer/runs/pos_<variant>_s<seed>.md
  pt_pos_random300  the same with randomly initialised 300-d words and 10 epochs; from
               results/phrase_transformer/runs/pos_random300_<variant>_s<seed>.md
  pt_pos_recipe  results/phrase_transformer: the POS recipes compared on dev (seed 0, k=2 and its
               twin): dev and test accuracy, where each run stopped, and the accuracy on the
               words outside the training vocabulary; from results/phrase_transformer/runs/ and
               results/phrase_transformer/unknown_words/<run>.json (pos_unknown_words.py)
  pt_multi30k  results/phrase_transformer: Multi30k de->en, test BLEU (sacrebleu's line) per seed
               and mean ± std, perplexity; from results/phrase_transformer/runs/multi30k_*.md
  pt_cost      results/phrase_transformer: train-step peak memory, train seconds and encode rate
               of the same runs
  dt_epoch     results/dependency_transformer: one SICK-E epoch per model, the report
               results/dependency_transformer/epoch_sick_e.md that `bench.bench_epoch --out` wrote
  aae_transfer results/meanmax_aae: the small Mean-Max AAE's transfer scores, mean and std over
               seeds, beside the bag of the same word vectors and the paper's; from
               results/meanmax_aae/runs/transfer_small_meanmax_s<seed>.md and
               results/transfer/bag_glove-6b-50d/results.md (`eval.transfer` reports)
  aae_training results/meanmax_aae: each small-AAE run's steps, stopping and held-out
               reconstruction; from results/meanmax_aae/runs/train_small_<pooling>_s<seed>.md
  aae_converged_training  the same for the runs trained until dev stops improving (40-epoch
               cap), from results/meanmax_aae/converged/train_small_<pooling>_s<seed>.md
  aae_converged_transfer  results/meanmax_aae: transfer of those runs beside the 4-epoch runs of
               the same pooling and seeds, and the change; from
               results/meanmax_aae/converged/transfer_small_<pooling>_s<seed>.md (and
               converged/senteval_head/ beside senteval_head/ for SentEval's SICK-R head)
  aae_converged_curve  results/meanmax_aae: those runs' dev token accuracy and perplexity every
               2,000 steps, at the best step and at the last; from
               converged/dev_small_<pooling>_s<seed>.jsonl
  aae_pooling_now  results/meanmax_aae: the three poolings' transfer scores with the current
               small config, means over the committed seeds of
               results/meanmax_aae/runs/transfer_small_<pooling>_s<seed>.md
  aae_pooling  results/meanmax_aae: mean + max, mean-only and max-only pooling at the earlier
               defaults (two partial 50-d GloVe files), transfer and held-out reconstruction
               beside the paper's Table 3; from
               results/meanmax_aae/earlier_defaults/{train,transfer}_small_<pooling>.md
  aae_schedule results/meanmax_aae: SICK-R of the same frozen vectors with the relatedness head
               read after every epoch (results/meanmax_aae/epoch_schedule/, reports made before
               SentEval's schedule became the default) and every 50 epochs (the current reports)
  aae_relatedness_head  results/meanmax_aae: SICK-R of the same frozen vectors with the Tai et
               al. head (the current reports) and SentEval's linear head
               (results/meanmax_aae/senteval_head/, `eval.transfer --relatedness_head senteval`)
  aae_bench    results/meanmax_aae: the train step's throughput of the small and the paper config;
               from results/meanmax_aae/bench_{small,paper}.md (`bench.bench_meanmax --out`)
  main_job     docs/results.md: what the main job (README.md, "Two commands") printed, best dev
               first; from results/main_job/results.md, a copy of its workdir's results.md
  main_job_pairs  docs/results.md: the cosine similarity of the main job's minimal pairs under
               each model's encoder, from the same file
  sst5         results/encoders: SST-5 test and dev accuracy, mean ± std over seeds; from
               results/encoders/runs/<model>_sst5_s<seed>.md
  sst5_runs    results/encoders: the rows of those run files
  sst2_by_length, sst2_by_negation
               results/encoders: SST-2 test accuracy of the Tree-LSTM and the Dependency-
               Transformer (with and without relations) by sentence length and by negation,
               mean over the seeds found; from results/encoders/sst2_breakdown/<run>.jsonl
               (results/encoders/sst_breakdown.py)
  sst2_by_seed results/encoders: the same groups seed by seed, the Dependency-Transformer (and
               its [root] sentence-vector run) minus the Tree-LSTM with their two accuracies
  sst2_layers  results/encoders: the same breakdown at seed 0 for the Dependency-Transformer's
               layer experiments (relations to a longer tree distance, more layers)
  sst5_breakdown  results/encoders: the same breakdown of SST-5 (5 classes) for the Tree-LSTM
               and the Dependency-Transformer with and without relations; from
               results/encoders/sst5_breakdown/<run>.jsonl
  sst5_breakdown_by_seed
               results/encoders: that breakdown seed by seed, the Dependency-Transformer minus
               the Tree-LSTM with their two accuracies
  sst5_retrained  results/encoders: the runs trained again for that breakdown (their files in
               results/encoders/sst5_breakdown/trained_again/<run>/) beside the committed table
               runs
  disan_kernels, disan_goal, perf_goals, perf_train_rates
               results/disan/speed.md and docs/performance.md: the benchmark reports committed
               in results/ (results/bench_tables.py says which)

Std is the sample standard deviation over the seeds found; a value is a run file's number as
printed there (accuracies as fractions, shown in %).

  python results/tables.py [NAME ...]     # print
  python results/tables.py --write        # rewrite the marked tables of every page
  python results/tables.py --check        # exit 1 when a page's table differs from its rebuild
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from results import marked_tables  # noqa: E402

RESULTS = HERE
ENCODER_RUNS = RESULTS / "encoders" / "runs"
PSAN_RUNS = RESULTS / "psan" / "runs"
PT_RUNS = RESULTS / "phrase_transformer" / "runs"
EPOCH_REPORT = RESULTS / "dependency_transformer" / "epoch_sick_e.md"
MAIN_JOB = RESULTS / "main_job" / "results.md"
AAE_PAGE = RESULTS / "meanmax_aae"
AAE_RUNS = AAE_PAGE / "runs"
AAE_EARLIER = AAE_PAGE / "earlier_defaults"
AAE_EPOCH_SCHEDULE = AAE_PAGE / "epoch_schedule"
AAE_SENTEVAL_HEAD = AAE_PAGE / "senteval_head"
AAE_CONVERGED = AAE_PAGE / "converged"
AAE_BAG = RESULTS / "transfer" / "bag_glove-6b-50d" / "results.md"
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
MARKER = marked_tables.marker("tables.py")
BLEU = re.compile(r"^(\w+): sacrebleu .*?BLEU = ([\d.]+)", re.MULTILINE)
SEED = re.compile(r"_s(\d+)$")
SICKR_EPOCH = re.compile(r"\(epoch (\d+)")
DASH = "—"


# --- run files ---------------------------------------------------------------------------------

def read_rows(path: Path, index: int = 0) -> list[dict[str, str]]:
    """The rows of a run file's markdown table number `index` (0: the first), as
    {column: cell}."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    starts = [i for i, line in enumerate(lines) if line.startswith("| ")
              and (i == 0 or not lines[i - 1].startswith("|"))]
    start = starts[index]
    header = _cells(lines[start])
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, _cells(line), strict=True)))
    return rows


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def row(path: Path, model: str | None = None) -> dict[str, str]:
    """The row of `model` in a run file (the first row when None)."""
    rows = read_rows(path)
    if model is None:
        return rows[0]
    found = [r for r in rows if r["model"] == model]
    if len(found) != 1:
        raise ValueError(f"{path}: {len(found)} rows of model {model!r}")
    return found[0]


def value(cell: str) -> float:
    return float(cell.replace(",", ""))


def bleu(path: Path) -> dict[str, float]:
    """model -> corpus BLEU of sacrebleu's line in a translation run's file."""
    return {model: float(score) for model, score in BLEU.findall(path.read_text(encoding="utf-8"))}


def seeded(folder: Path, prefix: str, suffix: str = ".md") -> dict[int, Path]:
    """seed -> run file `<prefix>_s<seed><suffix>` of `folder`."""
    found = {}
    for path in folder.glob(f"{prefix}_s*{suffix}"):
        match = SEED.search(path.stem)
        if match and path.stem == f"{prefix}_s{match[1]}":
            found[int(match[1])] = path
    return dict(sorted(found.items()))


# --- formatting --------------------------------------------------------------------------------

def percent(fraction: float) -> str:
    return f"{100 * fraction:.2f}"


def mean_std(values: Sequence[float], form: Callable[[float], str] = percent) -> str:
    if not values:
        return DASH
    if len(values) == 1:
        return form(values[0])
    return f"{form(statistics.mean(values))} ± {form(statistics.stdev(values))}"


def per_seed(values: Sequence[float], form: Callable[[float], str] = percent) -> str:
    return " / ".join(form(v) for v in values) if values else DASH


def bold(cell: str) -> str:
    return f"**{cell}**" if cell != DASH else cell


def bold_best(cells: list[str], scores: list[float | None]) -> list[str]:
    """`cells` with the one of the highest score in bold."""
    known = [s for s in scores if s is not None]
    if not known:
        return cells
    best = max(known)
    return [bold(c) if s == best else c for c, s in zip(cells, scores, strict=True)]


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# --- results/encoders: SST-2 and SST-5 by sentence --------------------------------------------

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
                         "(fix: python results/encoders/sst_breakdown.py collect RUN_DIR ...)")
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
                         "results/encoders/sst_breakdown.py collect RUN_DIR ...)")
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


# --- results/disan -----------------------------------------------------------------------------

def disan_sweep_table() -> str:
    from results.encoders import runs
    from results.encoders import table as encoder_tables

    choices = encoder_tables.sweep_choices()
    rows = []
    for family in ("disan", "bag"):
        for task in runs.SWEEP_TASKS:
            for variant in runs.SWEEP[family]:
                path = encoder_tables.RUNS / f"sweep_{family}_{task}_{variant}"
                if not (path / "results.md").is_file():
                    continue
                run = encoder_tables._run(path)
                metric = encoder_tables.PRIMARY[task][0]
                chosen = choices[family][task] == variant
                dev = encoder_tables._format(task, run["dev"][metric])
                test = encoder_tables._format(task, run["test"][metric]) if chosen else DASH
                rows.append([encoder_tables.MODEL_NAMES[family], encoder_tables.TASK_NAMES[task],
                             bold(variant) if chosen else variant, bold(dev) if chosen else dev,
                             str(run["step"]), run["steps"], run["stopped by"], test])
    return markdown(["model", "task", "recipe", "dev", "best step", "steps", "stopped by",
                     "test (chosen recipe)"], rows)


# --- results/psan ------------------------------------------------------------------------------

# run-file prefix -> (row label, the paper's SNLI test accuracy in Table 4)
PSAN_ABLATIONS = {
    "psan_level1_trec": ("(1) PSA on the first level only", "84.9"),
    "psan_level2_trec": ("(2) PSA on the second level only", "85.3"),
    "psan_level3_trec": ("(3) PSA on the third level only", "84.6"),
    "psan_no_psa_trec": ("(4) w/o PSA (sentence-level attention + gated memory)", "85.3"),
    "psan_equal_trec": ("(5) w/o syntactic division (equal blocks)", "85.5"),
    "psan_concat_trec": ("(6) w/o gated memory (concat + feed-forward)", "85.2"),
    "psan_no_both_trec": ("(7) w/o both", "84.7"),
    "psan_trec": ("(8) full model", "86.1"),
}


def psan_table4_table() -> str:
    rows, means, papers = [], [], []
    for prefix, (label, paper) in PSAN_ABLATIONS.items():
        found = seeded(PSAN_RUNS, prefix)
        tests = [value(row(path)["test accuracy"]) for path in found.values()]
        rows.append([label, ", ".join(map(str, found)) or DASH, per_seed(tests),
                     mean_std(tests)])
        means.append(statistics.mean(tests) if tests else None)
        papers.append(float(paper))
    mean_cells = bold_best([r[3] for r in rows], means)
    paper_cells = bold_best([paper for _, paper in PSAN_ABLATIONS.values()], papers)
    for r, mean_cell, paper_cell in zip(rows, mean_cells, paper_cells, strict=True):
        r[3] = mean_cell
        r.append(paper_cell)
    return markdown(["model", "seeds", "TREC test acc per seed", "mean ± std",
                     "paper (SNLI, Table 4)"], rows)


# (task, metric column, row label, setting, run files' folder, prefix)
PSAN_SEEDS = (
    ("SICK-E", "accuracy", "SICK-E (acc)", "keep 1.0, 15 epochs", PSAN_RUNS, "psan_sick_e"),
    ("SICK-R", "pearson", "SICK-R (Pearson)", "`memory_norm=layer`, keep 1.0, 10 epochs",
     PSAN_RUNS, "psan_norm_sick_r"),
    ("SICK-R", "mse", "SICK-R (MSE)", "the same runs", PSAN_RUNS, "psan_norm_sick_r"),
    ("SICK-R", "pearson", "SICK-R (Pearson)", "`glove-6b-50d`, the paper's setting (Adadelta "
     "0.75, batch 16, keep 0.5, fixed vectors) with `memory_norm=layer`, `memory=highway`",
     PSAN_RUNS, "psan_paper_setting_sick_r"),
    ("SICK-R", "pearson", "SICK-R (Pearson)", "`glove-6b-50d`, `psan_sick_r.py` as it is (the "
     "same flags, Adam 1e-3, batch 64, keep 1.0, fixed vectors)", PSAN_RUNS,
     "psan_pair_config_sick_r"),
    ("SST-5", "accuracy", "SST-5 (acc)", "gold SST trees, keep 1.0, 8,000 steps",
     ENCODER_RUNS, "psan_sst5"),
)


def _three(number: float) -> str:
    return f"{number:.3f}"


def psan_seeds_table() -> str:
    rows = []
    for _, metric, label, setting, folder, prefix in PSAN_SEEDS:
        found = seeded(folder, prefix)
        form = percent if metric == "accuracy" else _three
        tests = [value(row(path)[f"test {metric}"]) for path in found.values()]
        devs = [value(row(path)[f"dev {metric}"]) for path in found.values()
                if f"dev {metric}" in row(path)]
        rows.append([label, setting, ", ".join(map(str, found)) or DASH,
                     per_seed(devs, form), per_seed(tests, form), mean_std(tests, form)])
    return markdown(["task (metric)", "setting", "seeds", "dev per seed", "test per seed",
                     "test mean ± std"], rows)


# run file -> label
PSAN_SNLI = {
    "psan_snli_smoke": "`psan_snli.py` as it is (fixed random 300-d vectors: no GloVe 840B here; "
                       "Adadelta 0.75, keep 0.5)",
    "psan_snli_smoke_adam": "+ 50-d GloVe subsets fine-tuned, Adam 1e-3, clip 5, keep 0.5",
    "psan_snli_smoke_adam_keep1": "same, keep 1.0 (no dropout)",
}


def psan_snli_table() -> str:
    rows, devs, tests = [], [], []
    for name, label in PSAN_SNLI.items():
        r = row(PSAN_RUNS / f"{name}.md")
        devs.append(value(r["dev accuracy"]))
        tests.append(value(r["test accuracy"]))
        rows.append([label, r["params w/o embeddings"], r["steps"], r["best step"],
                     percent(devs[-1]), percent(tests[-1])])
    for column, scores in ((4, devs), (5, tests)):
        for r, cell in zip(rows, bold_best([r[column] for r in rows], scores), strict=True):
            r[column] = cell
    return markdown(["run", "parameters outside embeddings", "steps", "best step",
                     "best dev acc", "test acc at best dev"], rows)


# --- results/phrase_transformer ----------------------------------------------------------------

# (run variant of results/phrase_transformer/run.sh, model row in its run file, label, paper
# number or DASH); a variant with no committed run has no row
PT_POS_SPEC = (
    ("k2", "transformer", "Transformer (the twin)", "96.36"),
    ("k2", "phrase_transformer", "PhraseTransformer k=2", "96.87"),
    ("k3", "phrase_transformer", "PhraseTransformer k=3", "96.80"),
    ("linear", "phrase_transformer", "linear PhraseTransformer k=2", "96.54"),
    ("k3linear", "phrase_transformer", "linear PhraseTransformer k=3", "96.52"),
    ("semantic", "phrase_transformer", "semantic PhraseTransformer (gold UD arcs)", "96.35"),
    ("semantic_spacy", "phrase_transformer", "semantic PhraseTransformer (spaCy parses)",
     "96.35"),
    ("hadamard", "phrase_transformer", "PhraseTransformer k=2, `phrase_mask=hadamard`", DASH),
    ("bare", "phrase_transformer", "PhraseTransformer k=2, no residual / FFN", DASH),
)
PT_MULTI30K_SPEC = (
    ("k2", "transformer", "Transformer (the twin)", "20.90"),
    ("k2", "phrase_transformer", "PhraseTransformer k=2, decoder memory words + hypernodes",
     "34.61"),
    ("linear", "phrase_transformer",
     "linear PhraseTransformer k=2, decoder memory words + hypernodes", "21.60"),
    ("k2words", "phrase_transformer", "PhraseTransformer k=2, decoder memory words", "34.61"),
    ("k3", "phrase_transformer", "PhraseTransformer k=3, decoder memory words", "34.03"),
    ("k3linear", "phrase_transformer", "linear PhraseTransformer k=3, decoder memory words",
     "20.95"),
)


def _committed(spec: Sequence[tuple[str, str, str, str]], task: str) -> tuple:
    """The rows of `spec` whose variant has a committed run of `task`."""
    return tuple(entry for entry in spec if seeded(PT_RUNS, f"{task}_{entry[0]}"))


PT_POS = _committed(PT_POS_SPEC, "pos")
PT_POS_RANDOM300 = _committed(PT_POS_SPEC, "pos_random300")
PT_MULTI30K = _committed(PT_MULTI30K_SPEC, "multi30k")


def _seed_columns(spec: Sequence[tuple[str, str, str, str]], task: str) -> list[int]:
    return sorted({seed for variant, *_ in spec for seed in seeded(PT_RUNS, f"{task}_{variant}")})


def _paper_scores(papers: list[str]) -> list[float | None]:
    return [None if paper == DASH else float(paper) for paper in papers]


def pt_pos_table(spec: Sequence[tuple[str, str, str, str]] = PT_POS, task: str = "pos") -> str:
    """Test accuracy per seed of the POS runs `<task>_<variant>_s<seed>.md` of `spec`."""
    seeds = _seed_columns(spec, task)
    rows, means = [], []
    for variant, model, label, _ in spec:
        found = seeded(PT_RUNS, f"{task}_{variant}")
        tests = {seed: value(row(path, model)["test accuracy"]) for seed, path in found.items()}
        rows.append([label, *(percent(tests[s]) if s in tests else DASH for s in seeds),
                     mean_std(list(tests.values()))])
        means.append(statistics.mean(tests.values()) if tests else None)
    papers = [paper for *_, paper in spec]
    for r, mean_cell, paper_cell, gap in zip(rows, bold_best([r[-1] for r in rows], means),
                                             bold_best(papers, _paper_scores(papers)),
                                             _gaps(means, 100), strict=True):
        r[-1:] = [mean_cell, gap, paper_cell]
    return markdown(["model", *(f"seed {s}" for s in seeds), "mean ± std", "mean - twin's",
                     "paper (PTB, Table 2)"], rows)


PT_UNKNOWN = RESULTS / "phrase_transformer" / "unknown_words"
# (run file, recipe label) of the POS recipe comparison, seed 0
PT_POS_RECIPES = (
    ("pos_random300_k2_s0", "random 300-d words, 10 epochs"),
    ("pos_trainvocab_k2_s0", "GloVe 6B 50-d, training words only, until dev stops"),
    ("pos_k2_s0", "GloVe 6B 50-d + its 100,000 first words, until dev stops"),
)


def _unknown_accuracy(sums: dict[str, int] | None) -> str:
    """Accuracy (%) on the tokens read as the unknown id, and their share of the tokens."""
    if not sums or not sums["unknown_count"]:
        return DASH
    return (f"{percent(sums['unknown_correct'] / sums['unknown_count'])} "
            f"({percent(sums['unknown_count'] / sums['count'])}% of tokens)")


def pt_pos_recipe_table() -> str:
    """Per recipe and model: dev / test accuracy at the best dev checkpoint, best step / steps
    (and what stopped the run), accuracy on the words read as the unknown id."""
    rows = []
    for name, recipe in PT_POS_RECIPES:
        path = PT_RUNS / f"{name}.md"
        if not path.is_file():
            continue
        unknown_file = PT_UNKNOWN / f"{name}.json"
        unknown = (json.loads(unknown_file.read_text(encoding="utf-8"))
                   if unknown_file.is_file() else {})
        for model, label in (("transformer", "Transformer (the twin)"),
                             ("phrase_transformer", "PhraseTransformer k=2")):
            cells = row(path, model)
            sums = unknown.get(model, {})
            rows.append([recipe, label, percent(value(cells["dev accuracy"])),
                         percent(value(cells["test accuracy"])),
                         f"{cells['best step']} / {cells['steps']} "
                         f"({cells.get('stopped by', 'cap')})",
                         _unknown_accuracy(sums.get("dev")), _unknown_accuracy(sums.get("test"))])
    return markdown(["recipe", "model", "dev acc", "test acc", "best step / steps (stopped by)",
                     "dev acc, unknown words", "test acc, unknown words"], rows)


def _gaps(means: list[float | None], scale: float) -> list[str]:
    """Each mean minus the first row's (the twin's), signed, 2 decimals; the twin's own: —."""
    if not means:
        return []
    twin = means[0]
    # + 0.0 turns a difference that rounds to -0.00 into +0.00
    return [DASH] + [DASH if twin is None or m is None
                     else f"{round(scale * (m - twin), 2) + 0.0:+.2f}" for m in means[1:]]


def pt_multi30k_table() -> str:
    seeds = _seed_columns(PT_MULTI30K, "multi30k")
    rows, means = [], []
    for variant, model, label, _ in PT_MULTI30K:
        found = seeded(PT_RUNS, f"multi30k_{variant}")
        scores = {seed: bleu(path)[model] for seed, path in found.items()}
        perplexity = [row(path, model)["test perplexity"] for path in found.values()]
        rows.append([label, *(f"{scores[s]:.2f}" if s in scores else DASH for s in seeds),
                     mean_std(list(scores.values()), lambda x: f"{x:.2f}"),
                     " / ".join(perplexity) or DASH])
        means.append(statistics.mean(scores.values()) if scores else None)
    papers = [paper for *_, paper in PT_MULTI30K]
    mean_cells = bold_best([r[-2] for r in rows], means)
    paper_cells = bold_best(papers, _paper_scores(papers))
    for r, mean_cell, paper_cell, gap in zip(rows, mean_cells, paper_cells, _gaps(means, 1),
                                             strict=True):
        r[-2:] = [mean_cell, gap, r[-1], paper_cell]
    first, *others = seeds
    return markdown(["model", f"test BLEU seed {first}", *(f"seed {s}" for s in others),
                     "mean ± std", "mean - twin's",
                     f"test perplexity (seed {' / '.join(map(str, seeds))})",
                     "paper (d 512, 6 layers)"], rows)


# Runs trained with the same run.sh command on one NVIDIA H200 (JAX 0.11.2) instead of the 2-core
# CPU machine of the others. XLA's compiled peak differs by backend, seconds and encode rates by
# machine, so the cost table marks their cells.
PT_H200_RUNS = frozenset({"pos_bare_s0", "pos_bare_s1", "pos_k3_s1", "pos_k3linear_s1",
                          "pos_linear_s1"})


def pt_cost_table() -> str:
    """Cost columns of the same run files: compiled train-step peak, train seconds and test
    encode rate per seed (the machine's load varies, the peak does not), each cell of a run of
    `PT_H200_RUNS` marked "(H200)"."""
    rows = []
    tasks = {"pos": ("POS", PT_POS), "pos_random300": ("POS, random 300-d words", PT_POS_RANDOM300),
             "multi30k": ("Multi30k", PT_MULTI30K)}
    for task, (task_label, spec) in tasks.items():
        for variant, model, label, _ in spec:
            found = [(row(path, model), " (H200)" if path.stem in PT_H200_RUNS else "")
                     for path in seeded(PT_RUNS, f"{task}_{variant}").values()]
            peaks = sorted({r["train peak MiB"] + mark for r, mark in found},
                           key=lambda cell: value(cell.split()[0]))
            rows.append([task_label, label,
                         " / ".join(peaks) or DASH,
                         " / ".join(r["train s"] + mark for r, mark in found) or DASH,
                         " / ".join(r["encode sent/s"] + mark for r, mark in found) or DASH])
    return markdown(["task", "model", "train peak MiB", "train s per seed",
                     "encode sent/s per seed"], rows)


# --- results/dependency_transformer ------------------------------------------------------------

def dt_epoch_table() -> str:
    return EPOCH_REPORT.read_text(encoding="utf-8").strip()


# (results/encoders model key, label, the paper's accuracy and memory) of PSAN's Table 5
PSAN_TABLE5 = (
    ("transformer", "multi-head (Transformer, d 300, 6 heads)", "87.1", "1508"),
    ("disan_300", "DiSAN, d_h 150 x 2 directions", "87.7", "2943"),
    ("psan", "PSAN", "89.1", "1192"),
)


def psan_table5_table() -> str:
    """Table 5's models at 300-d sentence vectors on TREC: test accuracy over the committed seeds
    of each model's recipe (results/encoders/runs), beside the paper's accuracy and memory."""
    from results.encoders import table as encoder_tables

    rows = []
    for model, label, accuracy, memory in PSAN_TABLE5:
        tests = [run["test"]["accuracy"] for run in encoder_tables.seed_runs(model, "trec")]
        rows.append([label, mean_std(tests), str(len(tests)), accuracy, memory])
    return markdown(["model (300-d sentence vectors)", "TREC test acc", "seeds",
                     "acc (paper)", "memory MB (paper)"], rows)


# --- results/meanmax_aae -----------------------------------------------------------------------

# The transfer tasks of an `eval.transfer` report in its row order, and the average row.
AAE_TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "SST5", "TREC", "MRPC", "SICKE", "SICKR")
AAE_AVERAGE = "macro/micro acc, 8 tasks"
# pooling -> label, and Zhang et al. (2018) Table 3 (mean-max AAE: also Table 1) per task: MRPC
# accuracy/F1, SICK-R Pearson, the macro average over the 8 tasks; SST-5 is not reported
AAE_POOLINGS = {"meanmax": ("mean + max", "mean-max AAE (paper)"),
                "mean": ("mean only", "mean AAE (paper)"), "max": ("max only", "max AAE (paper)")}
AAE_TABLE3 = {
    "meanmax": dict(MR="78.7", CR="82.3", SUBJ="93.4", MPQA="88.8", SST2="83.8", SST5=DASH,
                    TREC="91.4", MRPC="75.5/82.6", SICKE="83.5", SICKR="0.854", macro="84.7"),
    "mean": dict(MR="78.6", CR="81.6", SUBJ="93.3", MPQA="88.6", SST2="83.5", SST5=DASH,
                 TREC="90.2", MRPC="74.8/82.3", SICKE="82.2", SICKR="0.851", macro="84.1"),
    "max": dict(MR="78.6", CR="81.4", SUBJ="93.1", MPQA="88.7", SST2="82.8", SST5=DASH,
                TREC="90.6", MRPC="75.1/82.5", SICKE="82.2", SICKR="0.851", macro="84.1"),
}


def transfer_scores(path: Path, column: str = "ours") -> dict[str, str]:
    """task (and AAE_AVERAGE) -> a cell of an `eval.transfer` report's results table: "ours", or
    a paper's column that the report prints beside it (jaxenc.evaluation.paper_results)."""
    return {r["task"]: r[column] for r in read_rows(path)}


def _first_number(cell: str) -> float | None:
    """The leading number of a transfer cell ("71.0/79.2" -> 71.0); None for "—"."""
    return None if cell == DASH else value(cell.split("/")[0])


def _decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def mean_over_seeds(cells: Sequence[str]) -> str:
    """The mean over seeds of transfer cells, part by part ("71.0/79.2" and "72.0/80.0" ->
    "71.5/79.6"), each part with the decimals the reports print; "—" when any cell is."""
    if not cells or DASH in cells:
        return DASH
    parts = list(zip(*(cell.split("/") for cell in cells), strict=True))
    return "/".join(f"{statistics.mean(value(p) for p in part):.{_decimals(part[0])}f}"
                    for part in parts)


def std_over_seeds(cells: Sequence[str]) -> str:
    """The sample std over seeds of the leading number of transfer cells (accuracy for MRPC)."""
    numbers = [_first_number(cell) for cell in cells]
    if len(numbers) < 2 or None in numbers:
        return DASH
    return f"{statistics.stdev(numbers):.{_decimals(cells[0].split('/')[0])}f}"


def aae_seeds(pooling: str, folder: Path | None = None) -> dict[int, tuple[Path, Path]]:
    """seed -> (training run file, transfer report) of the small AAE with `pooling` in `folder`
    (default AAE_RUNS); a seed counts once both files are committed."""
    folder = folder or AAE_RUNS
    trained = seeded(folder, f"train_small_{pooling}")
    transfer = seeded(folder, f"transfer_small_{pooling}")
    return {seed: (trained[seed], transfer[seed]) for seed in trained if seed in transfer}


def _seed_label(seeds: Sequence[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"mean of seeds {', '.join(map(str, seeds))}"


def aae_transfer_table() -> str:
    """The small mean-max AAE (mean over seeds, and the std of the leading number) against the
    bag of its own word vectors, beside the paper's Table 1 row as the AAE's reports print it;
    the better measured mean of a row in bold."""
    runs = aae_seeds("meanmax")
    if not runs:
        raise ValueError(f"{AAE_RUNS}: no train_small_meanmax_s<seed>.md with its "
                         "transfer_small_meanmax_s<seed>.md (fix: copy a run's results.md and "
                         "transfer/results.md there, as the page says)")
    ours = [transfer_scores(report) for _, report in runs.values()]
    paper = transfer_scores(next(iter(runs.values()))[1], "Mean-Max AAE (paper)")
    bag = transfer_scores(AAE_BAG)
    rows = []
    for task in (*AAE_TASKS, AAE_AVERAGE):
        cells = [scores[task] for scores in ours]
        mean = mean_over_seeds(cells)
        ours_mean, bag_cell = bold_best([mean, bag[task]],
                                        [_first_number(mean), _first_number(bag[task])])
        rows.append([task, ours_mean, std_over_seeds(cells), bag_cell, paper[task]])
    return markdown(["task", f"Mean-Max AAE small (ours, {_seed_label(list(runs))})",
                     "std over seeds", "bag, same vectors", "Mean-Max AAE (paper)"], rows)


def _aae_training_rows(folder: Path) -> list[list[str]]:
    """One row per small-AAE run committed in `folder`: how long it trained, how it stopped, and
    its held-out reconstruction (token accuracy, perplexity, beam-4 sacrebleu BLEU on the
    held-out test sentences)."""
    rows = []
    for pooling, (label, _) in AAE_POOLINGS.items():
        for seed, (trained, _) in aae_seeds(pooling, folder).items():
            r = row(trained)
            rows.append([label, str(seed), r["steps"], r["stopped by"], r["best step"],
                         f"{value(r['dev accuracy']):.3f}", f"{value(r['test accuracy']):.3f}",
                         r["test perplexity"], f"{value(r['test bleu']):.1f}", r["train s"]])
    return rows


AAE_TRAINING_HEADER = ["pooling", "seed", "steps", "stopped by", "best step", "dev token acc",
                       "test token acc", "test perplexity", "test BLEU", "train s"]


def aae_training_table() -> str:
    """The runs of AAE_RUNS (the 4-epoch cap of the small config), one row each."""
    return markdown(AAE_TRAINING_HEADER, _aae_training_rows(AAE_RUNS))


def aae_converged_training_table() -> str:
    """The runs of AAE_CONVERGED (trained until dev stops improving), one row each."""
    rows = _aae_training_rows(AAE_CONVERGED)
    if not rows:
        raise ValueError(f"{AAE_CONVERGED}: no train_small_<pooling>_s<seed>.md with its "
                         "transfer_small_<pooling>_s<seed>.md (fix: copy an AAE_EPOCHS=40 run's "
                         "results.md and transfer/results.md there, as the page says)")
    return markdown(AAE_TRAINING_HEADER, rows)


AAE_CURVE_EVERY = 2000  # steps between the rows of the dev-curve table


def aae_converged_curve_table() -> str:
    """Dev token accuracy / perplexity of each run in AAE_CONVERGED every AAE_CURVE_EVERY steps,
    at its best step (in bold) and at its last, from its dev rows
    `dev_small_<pooling>_s<seed>.jsonl` (the "split": "dev" lines of the run's metrics.jsonl)."""
    curves = {}
    for pooling, (label, _) in AAE_POOLINGS.items():
        for seed, path in seeded(AAE_CONVERGED, f"dev_small_{pooling}", ".jsonl").items():
            with path.open(encoding="utf-8") as lines:
                points = [json.loads(line) for line in lines if line.strip()]
            curves[f"{label}, seed {seed}"] = {p["step"]: p for p in points}
    if not curves:
        raise ValueError(f"{AAE_CONVERGED}: no dev_small_<pooling>_s<seed>.jsonl (fix: copy "
                         'the "split": "dev" lines of the run\'s metrics.jsonl there, as the page '
                         "says)")
    best = {name: max(points.values(), key=lambda p: p["accuracy"])["step"]
            for name, points in curves.items()}
    last = {max(points) for points in curves.values()}
    steps = sorted({step for points in curves.values() for step in points
                    if step % AAE_CURVE_EVERY == 0} | set(best.values()) | last)
    rows = []
    for step in steps:
        cells = []
        for name, points in curves.items():
            point = points.get(step)
            cell = DASH if point is None else f"{point['accuracy']:.3f} / {point['perplexity']:.1f}"
            cells.append(f"**{cell}**" if step == best[name] else cell)
        rows.append([f"{step:,}", *cells])
    return markdown(["step", *(f"{name}: dev token acc / perplexity" for name in curves)], rows)


def _signed_difference(later: str, earlier: str) -> str:
    """later - earlier of the leading numbers of two transfer cells, with the cells' decimals
    and a sign ("+0.8", "-0.003"); "—" when either is."""
    a, b = _first_number(later), _first_number(earlier)
    if a is None or b is None:
        return DASH
    return f"{a - b:+.{_decimals(later.split('/')[0])}f}"


def _mean_and_change(before: Sequence[Path], after: Sequence[Path], task: str) -> list[str]:
    """[mean over `before`, mean over `after`, change of the leading number] of `task` in two
    lists of transfer reports."""
    means = [mean_over_seeds([transfer_scores(report)[task] for report in reports])
             for reports in (before, after)]
    return [*means, _signed_difference(means[1], means[0])]


def aae_converged_transfer_table() -> str:
    """Per pooling with runs in AAE_CONVERGED: the transfer scores of the same seeds capped at 4
    epochs (AAE_RUNS) and trained until dev stops improving, each the mean over those seeds, and
    the change of the leading number; last, SICK-R with SentEval's linear head where every one of
    those runs has its report (AAE_SENTEVAL_HEAD and AAE_CONVERGED/senteval_head)."""
    header, pairs = ["task"], []  # pairs: (capped reports, converged reports) per pooling
    for pooling, (label, _) in AAE_POOLINGS.items():
        capped, converged = aae_seeds(pooling), aae_seeds(pooling, AAE_CONVERGED)
        seeds = [seed for seed in converged if seed in capped]
        if not seeds:
            continue
        which = _seed_label(seeds)
        header += [f"{label}, 4 epochs ({which})", f"{label}, until dev stops ({which})",
                   "change"]
        pairs.append(([capped[s][1] for s in seeds], [converged[s][1] for s in seeds]))
    if not pairs:
        raise ValueError(f"{AAE_CONVERGED}: no run with a 4-epoch twin of its pooling and seed in "
                         f"{AAE_RUNS} (fix: copy an AAE_EPOCHS=40 run's results.md and "
                         "transfer/results.md there, as the page says)")
    rows = [[task, *(cell for before, after in pairs
                     for cell in _mean_and_change(before, after, task))]
            for task in (*AAE_TASKS, AAE_AVERAGE)]
    heads = [([AAE_SENTEVAL_HEAD / r.name for r in before],
              [AAE_CONVERGED / "senteval_head" / r.name for r in after]) for before, after in pairs]
    if all(path.is_file() for pair in heads for reports in pair for path in reports):
        rows.append(["SICKR, SentEval's linear head",
                     *(cell for before, after in heads
                       for cell in _mean_and_change(before, after, "SICKR"))])
    return markdown(header, rows)


def aae_pooling_now_table() -> str:
    """Transfer scores of the three poolings with the current small config, each the mean over
    its committed seeds ("—" where none is committed yet)."""
    runs = {p: aae_seeds(p) for p in AAE_POOLINGS}
    scores = {p: [transfer_scores(report) for _, report in found.values()]
              for p, found in runs.items()}
    rows = [["seeds", *(", ".join(map(str, found)) or DASH for found in runs.values())]]
    rows += [[task, *(mean_over_seeds([s[task] for s in scores[p]]) for p in AAE_POOLINGS)]
             for task in (*AAE_TASKS, AAE_AVERAGE)]
    return markdown(["task", *(label for label, _ in AAE_POOLINGS.values())], rows)


def _sickr(report: Path) -> str:
    """SICK-R's test Pearson in a transfer report, with the head's kept epoch."""
    details = read_rows(report, index=1)
    found = next(r for r in details if r["task"] == "SICKR")
    epoch = SICKR_EPOCH.search(found["selection / details"]).group(1)
    return f"{found['ours']} (epoch {epoch})"


def _aae_sickr_beside(other: Path, other_first: bool) -> list[list[str]]:
    """Rows "AAE small, <pooling>, seed <s>" with SICK-R of the current report and of the report
    of the same name in `other` (first when `other_first`), for the runs that have one there;
    then the bag's row from AAE_BAG and `other`/transfer_bag_glove-6b-50d.md."""
    pairs = []
    for pooling, (label, _) in AAE_POOLINGS.items():
        for seed, (_, report) in aae_seeds(pooling).items():
            if (other / report.name).is_file():
                pairs.append((f"AAE small, {label}, seed {seed}", other / report.name, report))
    pairs.append(("bag, same vectors", other / "transfer_bag_glove-6b-50d.md", AAE_BAG))
    rows = []
    for label, other_report, current in pairs:
        cells = [_sickr(other_report), _sickr(current)]
        rows.append([label, *(cells if other_first else cells[::-1])])
    return rows


def aae_schedule_table() -> str:
    """SICK-R of the same frozen vectors with the relatedness head read after every epoch (the
    reports in AAE_EPOCH_SCHEDULE) and as SentEval reads it (the current reports)."""
    return markdown(["encoder", "SICK-R, dev after every epoch (kept epoch)",
                     "SICK-R, dev every 50 epochs as SentEval (kept epoch)"],
                    _aae_sickr_beside(AAE_EPOCH_SCHEDULE, other_first=True))


def aae_relatedness_head_table() -> str:
    """SICK-R of the same frozen vectors with the Tai et al. head (the current reports) and with
    SentEval's linear head (the reports in AAE_SENTEVAL_HEAD), both read on dev as SentEval."""
    return markdown(["encoder", "SICK-R, Tai et al. head (kept epoch)",
                     "SICK-R, SentEval's linear head (kept epoch)"],
                    _aae_sickr_beside(AAE_SENTEVAL_HEAD, other_first=False))


def aae_pooling_table() -> str:
    """Transfer scores and held-out reconstruction (token accuracy / perplexity / beam-4 BLEU on
    the held-out test sentences) of the three poolings at the earlier defaults (one seed each),
    beside Table 3."""
    transfer = {p: transfer_scores(AAE_EARLIER / f"transfer_small_{p}.md") for p in AAE_POOLINGS}
    trained = {p: row(AAE_EARLIER / f"train_small_{p}.md") for p in AAE_POOLINGS}
    rows = [[task, *(transfer[p][task] for p in AAE_POOLINGS),
             *(AAE_TABLE3[p][task] for p in AAE_POOLINGS)] for task in AAE_TASKS]
    rows.append(["macro acc., 8 tasks", *(transfer[p][AAE_AVERAGE].split("/")[0]
                                          for p in AAE_POOLINGS),
                 *(AAE_TABLE3[p]["macro"] for p in AAE_POOLINGS)])
    rows.append(["held-out reconstruction acc. / perplexity / BLEU, beam 4 (test)",
                 *(f"{value(r['test accuracy']):.3f} / {r['test perplexity']} / {r['test bleu']}"
                   for r in trained.values()), DASH, DASH, DASH])
    rows.append(["steps (best step)", *(f"{r['steps']} ({r['best step']})"
                                        for r in trained.values()), DASH, DASH, DASH])
    return markdown(["task", *(ours for ours, _ in AAE_POOLINGS.values()),
                     *(paper for _, paper in AAE_POOLINGS.values())], rows)


def copied(rows: Sequence[dict[str, str]]) -> str:
    """Rows read from a report, as a markdown table with the report's own columns."""
    return markdown(list(rows[0]), [list(r.values()) for r in rows])


def aae_bench_table() -> str:
    """The rows of the `bench.bench_meanmax --out` reports, small config first."""
    return copied([row(AAE_PAGE / f"bench_{config}.md") for config in ("small", "paper")])


# --- docs/results.md: the main job ------------------------------------------------------------

# model -> (label in the table of results, label in the table of pairs)
MAIN_JOB_MODELS = {
    "tree_lstm": ("Tree-LSTM (gold dependency trees)", "Tree-LSTM"),
    "dependency_transformer": ("Dependency-Transformer (gold)", "Dep.-Transformer"),
    "disan": ("DiSAN", "DiSAN"),
    "psan": ("PSAN (gold phrases)", "PSAN"),
    "meanmax_aae": ("Mean-Max AAE encoder (supervised here)", "AAE"),
    "transformer": ("Transformer", "Transformer"),
    "phrase_transformer": ("PhraseTransformer (2-grams)", "PhraseTr."),
    "bag": ("bag of embeddings", "bag"),
}
EXPORT = " (export)"


def main_job_rows() -> list[dict[str, str]]:
    """The main job's rows, best dev accuracy first (test accuracy breaks a tie)."""
    return sorted(read_rows(MAIN_JOB), key=lambda r: (-value(r["dev accuracy"]),
                                                      -value(r["test accuracy"])))


def main_job_table() -> str:
    rows = main_job_rows()
    columns = ("dev accuracy", "test accuracy")
    best = {c: max(value(r[c]) for r in rows) for c in columns}
    return markdown(
        ["model", "params w/o embeddings", "steps (best step)", *columns, "train s",
         "encode sent/s", "train peak MiB"],
        [[MAIN_JOB_MODELS[r["model"]][0], r["params w/o embeddings"],
          f"{r['steps']} ({r['best step']})",
          *((bold if value(r[c]) == best[c] else str)(f"{value(r[c]):.3f}") for c in columns),
          r["train s"], r["encode sent/s"], f"{value(r['train peak MiB']):.0f}"] for r in rows])


def main_job_pairs_table() -> str:
    """One row per sentence pair: the exported best model's cosine first, then every other
    model's in the order of the results table."""
    pairs = read_rows(MAIN_JOB, index=1)
    exported = next(c[len("cos "):-len(EXPORT)] for c in pairs[0] if c.endswith(EXPORT))
    order = [exported] + [r["model"] for r in main_job_rows() if r["model"] != exported]
    columns = [f"cos {m}{EXPORT}" if m == exported else f"cos {m}" for m in order]
    return markdown(
        ["pair", *(MAIN_JOB_MODELS[m][1] + (EXPORT if m == exported else "") for m in order)],
        [[f"{p['sentence A']} / {p['sentence B']}", *(f"{value(p[c]):.2f}" for c in columns)]
         for p in pairs])


# --- results/encoders --------------------------------------------------------------------------

SST5_MODELS = {"transformer": "Transformer", "dt": "Dependency-Transformer (spaCy trees)",
               "psan": "PSAN (gold SST trees, packed PSA)",
               "phrase_transformer": "PhraseTransformer (2-grams)"}


def sst5_table() -> str:
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


# --- results/disan/speed.md and docs/performance.md: benchmark reports ---------------------------

def bench_table(name: str) -> Callable[[], str]:
    """results/bench_tables.py's table `name` (imported when built: it reads this module)."""
    def build() -> str:
        from results import bench_tables

        return getattr(bench_tables, f"{name}_table")()
    return build


# --- pages -------------------------------------------------------------------------------------

TABLES: dict[str, Callable[[], str]] = {
    "sst2_by_length": sst2_by_length_table, "sst2_by_negation": sst2_by_negation_table,
    "sst2_by_seed": sst2_by_seed_table, "sst2_layers": sst2_layers_table,
    "sst5_breakdown": sst5_breakdown_table,
    "sst5_breakdown_by_seed": sst5_breakdown_by_seed_table, "sst5_retrained": sst5_retrained_table,
    "disan_sweep": disan_sweep_table, "psan_table4": psan_table4_table,
    "psan_seeds": psan_seeds_table, "psan_snli": psan_snli_table,
    "psan_table5": psan_table5_table, "pt_pos": pt_pos_table,
    "pt_pos_random300": lambda: pt_pos_table(PT_POS_RANDOM300, "pos_random300"),
    "pt_pos_recipe": pt_pos_recipe_table,
    "pt_multi30k": pt_multi30k_table, "pt_cost": pt_cost_table, "dt_epoch": dt_epoch_table,
    "aae_transfer": aae_transfer_table, "aae_training": aae_training_table,
    "aae_converged_training": aae_converged_training_table,
    "aae_converged_transfer": aae_converged_transfer_table,
    "aae_converged_curve": aae_converged_curve_table,
    "aae_pooling_now": aae_pooling_now_table, "aae_pooling": aae_pooling_table,
    "aae_schedule": aae_schedule_table,
    "aae_relatedness_head": aae_relatedness_head_table,
    "aae_bench": aae_bench_table,
    "sst5": sst5_table, "sst5_runs": sst5_runs_table,
    "main_job": main_job_table, "main_job_pairs": main_job_pairs_table,
    **{name: bench_table(name) for name in ("disan_kernels", "disan_goal", "perf_goals",
                                            "perf_train_rates")},
}
PAGES = {
    "sst2_by_length": RESULTS / "encoders" / "README.md",
    "sst2_by_negation": RESULTS / "encoders" / "README.md",
    "sst2_by_seed": RESULTS / "encoders" / "README.md",
    "sst2_layers": RESULTS / "encoders" / "README.md",
    "sst5_breakdown": RESULTS / "encoders" / "README.md",
    "sst5_breakdown_by_seed": RESULTS / "encoders" / "README.md",
    "sst5_retrained": RESULTS / "encoders" / "README.md",
    "disan_sweep": RESULTS / "disan" / "README.md",
    "psan_table4": RESULTS / "psan" / "README.md",
    "psan_seeds": RESULTS / "psan" / "README.md",
    "psan_snli": RESULTS / "psan" / "README.md",
    "psan_table5": RESULTS / "psan" / "README.md",
    "pt_pos": RESULTS / "phrase_transformer" / "README.md",
    "pt_pos_random300": RESULTS / "phrase_transformer" / "README.md",
    "pt_pos_recipe": RESULTS / "phrase_transformer" / "README.md",
    "pt_multi30k": RESULTS / "phrase_transformer" / "README.md",
    "pt_cost": RESULTS / "phrase_transformer" / "README.md",
    "dt_epoch": RESULTS / "dependency_transformer" / "README.md",
    "aae_transfer": AAE_PAGE / "README.md",
    "aae_training": AAE_PAGE / "README.md",
    "aae_converged_training": AAE_PAGE / "README.md",
    "aae_converged_transfer": AAE_PAGE / "README.md",
    "aae_converged_curve": AAE_PAGE / "README.md",
    "aae_pooling_now": AAE_PAGE / "README.md",
    "aae_pooling": AAE_PAGE / "README.md",
    "aae_schedule": AAE_PAGE / "README.md",
    "aae_relatedness_head": AAE_PAGE / "README.md",
    "aae_bench": AAE_PAGE / "README.md",
    "sst5": RESULTS / "encoders" / "README.md",
    "sst5_runs": RESULTS / "encoders" / "README.md",
    "main_job": REPO / "docs" / "results.md",
    "main_job_pairs": REPO / "docs" / "results.md",
    "disan_kernels": RESULTS / "disan" / "speed.md",
    "disan_goal": RESULTS / "disan" / "speed.md",
    "perf_goals": REPO / "docs" / "performance.md",
    "perf_train_rates": REPO / "docs" / "performance.md",
}
# Every page whose measured tables come from committed files (this script's or table.py's).
DOCUMENTS = tuple(dict.fromkeys([RESULTS / "disan" / "README.md", RESULTS / "psan" / "README.md",
                                 RESULTS / "phrase_transformer" / "README.md",
                                 RESULTS / "dependency_transformer" / "README.md",
                                 AAE_PAGE / "README.md", RESULTS / "encoders" / "README.md",
                                 REPO / "docs" / "results.md", RESULTS / "disan" / "speed.md",
                                 REPO / "docs" / "performance.md"]))


def rewritten(text: str, document: Path | None = None) -> str:
    """`text` with every marked table replaced by its rebuild (the same in any document)."""
    return marked_tables.rewritten(text, "tables.py", lambda name: TABLES[name]())


def stale_documents(write: bool = False) -> list[Path]:
    """The documents whose marked tables differ from their rebuild (rewritten when `write`)."""
    return marked_tables.stale_documents(DOCUMENTS, rewritten, write)


def main(argv: Sequence[str] | None = None) -> int:
    return marked_tables.main(__doc__.split("\n\n")[0], TABLES, DOCUMENTS, rewritten, argv)


if __name__ == "__main__":
    sys.exit(main())
