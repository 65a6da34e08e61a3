"""The tables of results/meanmax_aae/README.md:
  aae_transfer  the small Mean-Max AAE's transfer scores, mean and std over seeds, beside the
               bag of the same word vectors and the paper's; from
               results/meanmax_aae/runs/transfer_small_meanmax_s<seed>.md and
               results/transfer/bag_glove-6b-50d/results.md (`eval.transfer` reports)
  aae_training each small-AAE run's steps, stopping and held-out reconstruction; from
               results/meanmax_aae/runs/train_small_<pooling>_s<seed>.md
  aae_converged_training  the same for the runs trained until dev stops improving (40-epoch
               cap), from results/meanmax_aae/converged/train_small_<pooling>_s<seed>.md
  aae_converged_transfer  transfer of those runs beside the 4-epoch runs of the same pooling
               and seeds, and the change; from
               results/meanmax_aae/converged/transfer_small_<pooling>_s<seed>.md (and
               converged/senteval_head/ beside senteval_head/ for SentEval's SICK-R head)
  aae_converged_curve  those runs' dev token accuracy and perplexity every 2,000 steps, at the
               best step and at the last; from converged/dev_small_<pooling>_s<seed>.jsonl
  aae_pooling_now  the three poolings' transfer scores with the current small config, means
               over the committed seeds of results/meanmax_aae/runs/transfer_small_<pooling>_s*.md
  aae_pooling  mean + max, mean-only and max-only pooling at the earlier defaults (two partial
               50-d GloVe files), transfer and held-out reconstruction beside the paper's
               Table 3; from results/meanmax_aae/earlier_defaults/{train,transfer}_small_*.md
  aae_schedule SICK-R of the same frozen vectors with the relatedness head read after every
               epoch (results/meanmax_aae/epoch_schedule/, reports made before SentEval's
               schedule became the default) and every 50 epochs (the current reports)
  aae_relatedness_head  SICK-R of the same frozen vectors with the Tai et al. head (the current
               reports) and SentEval's linear head (results/meanmax_aae/senteval_head/,
               `eval.transfer --relatedness_head senteval`)
  aae_bench    the train step's throughput of the small and the paper config; from
               results/meanmax_aae/bench_{small,paper}.md (`bench.bench_meanmax --out`)
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from pathlib import Path

from reports.markdown import DASH, bold_best, copied, markdown
from reports.run_files import RESULTS, read_rows, row, seeded, value

AAE_PAGE = RESULTS / "meanmax_aae"
AAE_RUNS = AAE_PAGE / "runs"
AAE_EARLIER = AAE_PAGE / "earlier_defaults"
AAE_EPOCH_SCHEDULE = AAE_PAGE / "epoch_schedule"
AAE_SENTEVAL_HEAD = AAE_PAGE / "senteval_head"
AAE_CONVERGED = AAE_PAGE / "converged"
AAE_BAG = RESULTS / "transfer" / "bag_glove-6b-50d" / "results.md"
SICKR_EPOCH = re.compile(r"\(epoch (\d+)")

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


def aae_bench_table() -> str:
    """The rows of the `bench.bench_meanmax --out` reports, small config first."""
    return copied([row(AAE_PAGE / f"bench_{config}.md") for config in ("small", "paper")])
