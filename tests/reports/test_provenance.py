"""Every measured table of the per-model results pages and docs/results.md is rebuilt from run
files committed in results/: a table between `<!-- tables.py: NAME -->` markers equals what
reports.pages.TABLES builds from them (those between `<!-- table.py: NAME -->` markers are the
encoder tables, checked by tests/reports/test_encoder_tables.py), and a table outside both
holds no measured number: every column with a numeric cell says "(paper)" in its header (the
number printed in a paper), or the table holds no numeric cell at all (settings, flags,
qualitative outcomes)."""

import json
import re
from pathlib import Path

import pytest

from reports import (
    main_job,
    markdown,
    meanmax_aae,
    pages,
    performance,
    phrase_transformer,
    psan,
    run_files,
    sst,
    sst_breakdown,
)

REPO = Path(__file__).resolve().parents[2]
PAGES = ["results/disan/README.md", "results/psan/README.md",
         "results/phrase_transformer/README.md", "results/dependency_transformer/README.md",
         "results/meanmax_aae/README.md", "results/encoders/README.md", "docs/results.md",
         "results/disan/speed.md", "docs/performance.md", "results/ci/README.md"]
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
ANY_MARKED = re.compile(r"<!-- (tables?)\.py: \w+ -->\n.*?<!-- /\1\.py -->", re.DOTALL)
# A cell that is a number, or numbers joined by ± / = - and the like, with an optional unit or a
# parenthesised remark: "89.67 ± 0.58", "1,264 (16)", "0.62-0.67", "1.07x", "**20.0**".
NUMBER = r"[-+−~<>≈]?\d[\d,.]*(?:e-?\d+)?\s*(?:%|x|s|ms|MiB|GiB|MB|GB|k)?"
NUMERIC_CELL = re.compile(rf"{NUMBER}(?:\s*(?:±|/|=|\+|-|–|to|vs)\s*{NUMBER})*")


def numeric(cell: str) -> bool:
    cell = re.sub(r"\([^)]*\)", "", cell.replace("**", "").replace("`", "")).strip()
    return bool(NUMERIC_CELL.fullmatch(cell))


def markdown_tables(text: str) -> list[list[list[str]]]:
    """The tables of a markdown text (outside fenced code), each a list of rows of cells; the
    separator row left out."""
    found, current = [], []
    for line in FENCE.sub("", text).splitlines() + [""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-{3,}:?", cell) for cell in cells):
                current.append(cells)
        elif current:
            found.append(current)
            current = []
    return found


def unlabelled_numeric_columns(table: list[list[str]]) -> list[str]:
    """Headers of the columns that hold a numeric cell and do not say "(paper)"."""
    header, *body = table
    bad = []
    for index, name in enumerate(header):
        cells = [row[index] for row in body if index < len(row)]
        if any(numeric(cell) for cell in cells) and "(paper)" not in name.lower():
            bad.append(name)
    return bad


def test_the_pages_are_the_ones_tables_py_rewrites():
    assert sorted({p.relative_to(REPO).as_posix() for p in pages.PAGES.values()}) == sorted(PAGES)
    assert set(pages.PAGES) == set(pages.TABLES)
    assert set(pages.PAGES.values()) <= set(pages.DOCUMENTS)


@pytest.mark.parametrize("page", PAGES)
def test_marked_tables_equal_their_rebuild(page):
    text = (REPO / page).read_text(encoding="utf-8")
    for name, body in pages.MARKER.findall(text):
        assert pages.PAGES[name] == REPO / page, f"{page}: table {name!r} belongs elsewhere"
        assert body.strip() == pages.TABLES[name]().strip(), (
            f"{page}: table {name!r} differs from its rebuild "
            "(fix: python -m reports --write)")


def test_every_table_is_marked_on_its_page():
    for name, page in pages.PAGES.items():
        marked = [found for found, _ in pages.MARKER.findall(page.read_text(encoding="utf-8"))]
        assert marked.count(name) == 1, f"{page}: table {name!r} marked {marked.count(name)} times"


def test_check_mode_finds_nothing_stale():
    assert pages.stale_documents(write=False) == []


@pytest.mark.parametrize("page", PAGES)
def test_no_measured_number_outside_the_markers(page):
    text = ANY_MARKED.sub("", (REPO / page).read_text(encoding="utf-8"))
    for table in markdown_tables(text):
        bad = unlabelled_numeric_columns(table)
        assert not bad, (f"{page}: the table with header {table[0]} has numbers in columns "
                         f"{bad} outside `tables.py` markers; build it with reports.pages "
                         "from committed run files, or label a paper's column \"(paper)\"")


def test_the_numeric_rule():
    assert all(numeric(cell) for cell in [
        "89.67 ± 0.58", "**0.7869 ± 0.0027**", "1,264 (16)", "0.62-0.67", "1.07x", "34.3",
        "79.44 / 78.73 / 79.26 = 79.14 ± 0.37", "-0.092 (best 0.22)", "399 + 209", "5e-4"])
    assert not any(numeric(cell) for cell in [
        "Adam 1e-4", "dropout 0, Adam 3e-4", "`memory_norm=layer`", "learns", "—", "",
        "Adam, **no dropout** (keep 1.0), 10 epochs", "`bag_sst5.py`, 8,000 steps"])
    table = [["task", "ours", "DiSAN test (paper)"], ["TREC", "learns", "94.4"]]
    assert unlabelled_numeric_columns(table) == []
    table[1][1] = "89.67"
    assert unlabelled_numeric_columns(table) == ["ours"]


def test_run_files_are_read_as_written():
    """Mean ± std of the committed seeds, and sacrebleu's BLEU rather than the rounded column."""
    runs = run_files.seeded(psan.PSAN_RUNS, "psan_level1_trec")
    assert sorted(runs) == [0, 1, 2]
    assert "| (1) PSA on the first level only | 0, 1, 2 | 87.20 / 87.80 / 86.20 | 87.07 ± 0.81 |" \
        in psan.psan_table4_table()
    bleu = run_files.bleu(phrase_transformer.PT_RUNS / "multi30k_k2_s0.md")
    assert bleu == {"phrase_transformer": 22.96, "transformer": 25.65}
    assert "| 22.96 |" in phrase_transformer.pt_multi30k_table()
    # a prefix does not take a longer run name's files (psan_trec vs psan_norm_trec, dt vs dt_plain)
    assert all(path.stem.startswith("dt_sst5_s")
               for path in run_files.seeded(run_files.ENCODER_RUNS, "dt_sst5").values())


def test_the_aae_table3_transcription_agrees_with_table1():
    """Table 3's mean-max AAE row is Table 1's (printed by eval.transfer beside our scores)."""
    _, report = next(iter(meanmax_aae.aae_seeds("meanmax").values()))
    printed = meanmax_aae.transfer_scores(report, "Mean-Max AAE (paper)")
    table3 = meanmax_aae.AAE_TABLE3["meanmax"]
    assert {task: table3[task] for task in meanmax_aae.AAE_TASKS} == {
        task: printed[task] for task in meanmax_aae.AAE_TASKS}
    assert printed[meanmax_aae.AAE_AVERAGE].split("/")[0] == table3["macro"]


def test_the_main_job_record_is_a_run_of_the_default_config():
    """results/main_job/results.md holds one row per model that train/configs/default.py trains,
    each at the config's epoch budget, and its export paragraph names no machine's folder."""
    import importlib
    config = importlib.import_module("train.configs.default").get_config()
    rows = run_files.read_rows(main_job.MAIN_JOB)
    assert [r["model"] for r in rows] == [config.model.name, *config.baselines]
    assert {r["dataset"] for r in rows} == {config.task.dataset}
    assert all(r["stopped by"] == "cap" for r in rows)  # a fixed budget, no early stopping
    assert set(main_job.MAIN_JOB_MODELS) == {r["model"] for r in rows}
    text = main_job.MAIN_JOB.read_text(encoding="utf-8")
    assert "`baselines/" in text and not re.search(r"`/[^`]*`", text)  # no absolute path


def test_transfer_cells_average_part_by_part():
    """MRPC's "acc/F1" cells average each part; the std is over the leading number."""
    cells = ["71.0/79.2", "72.0/80.1", "73.3/80.0"]
    accuracy, f1 = (71.0 + 72.0 + 73.3) / 3, (79.2 + 80.1 + 80.0) / 3
    assert meanmax_aae.mean_over_seeds(cells) == f"{accuracy:.1f}/{f1:.1f}"
    mean = (71.0 + 72.0 + 73.3) / 3
    std = (sum((x - mean) ** 2 for x in (71.0, 72.0, 73.3)) / 2) ** 0.5
    assert meanmax_aae.std_over_seeds(cells) == f"{std:.1f}"
    assert meanmax_aae.mean_over_seeds(["0.668", "0.670"]) == "0.669"
    assert meanmax_aae.std_over_seeds(["0.668"]) == markdown.DASH  # one seed has no spread
    assert meanmax_aae.mean_over_seeds(["65.6", markdown.DASH]) == markdown.DASH


def test_the_aae_transfer_table_names_missing_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(meanmax_aae, "AAE_RUNS", tmp_path)
    with pytest.raises(ValueError, match="no train_small_meanmax_s<seed>.md"):
        meanmax_aae.aae_transfer_table()


def _transfer_report(path, scores: dict[str, str]) -> None:
    """An `eval.transfer` report whose results table holds `scores` (task -> cell)."""
    rows = "".join(f"| {task} | {cell} |\n" for task, cell in scores.items())
    path.write_text(f"## Transfer results: `x` (seed 1111)\n\n| task | ours |\n|---|---|\n{rows}",
                    encoding="utf-8")


def _aae_run(path, steps: int, stopped_by: str) -> None:
    path.write_text(
        "| model | steps | stopped by | best step | dev accuracy | test accuracy | test perplexity"
        " | test bleu | train s |\n|---|---|---|---|---|---|---|---|---|\n"
        f"| meanmax_aae | {steps:,} | {stopped_by} | {steps - 1250:,} | 0.4512 | 0.4601 | 22.1 | "
        "14.86 | 9,000 |\n", encoding="utf-8")


def test_the_converged_aae_tables_pair_each_run_with_its_capped_twin(tmp_path,
                                                                      monkeypatch):
    """Transfer of the runs trained until dev stops beside the 4-epoch runs of the same seeds
    (means and changes worked out by hand); a converged seed without a capped twin is left out,
    and SentEval's SICK-R row comes only when every paired run has its report."""
    capped, converged = tmp_path / "runs", tmp_path / "converged"
    capped_head, converged_head = tmp_path / "senteval_head", converged / "senteval_head"
    for folder in (capped, converged_head, capped_head):
        folder.mkdir(parents=True)
    tasks = [*meanmax_aae.AAE_TASKS, meanmax_aae.AAE_AVERAGE]

    def scores(accuracy: float, pearson: str) -> dict[str, str]:
        cells = {task: f"{accuracy:.1f}" for task in tasks}
        return {**cells, "MRPC": f"{accuracy:.1f}/80.0", "SST5": markdown.DASH, "SICKR": pearson,
                meanmax_aae.AAE_AVERAGE: f"{accuracy:.1f}/{accuracy + 1:.1f}"}

    for seed, accuracy, pearson in ((0, 70.0, "0.770"), (1, 71.0, "0.774"), (2, 90.0, "0.9")):
        _aae_run(capped / f"train_small_meanmax_s{seed}.md", 2848, "cap")
        _transfer_report(capped / f"transfer_small_meanmax_s{seed}.md", scores(accuracy, pearson))
    for seed, accuracy, pearson in ((0, 71.0, "0.781"), (1, 72.4, "0.779"), (5, 50.0, "0.5")):
        _aae_run(converged / f"train_small_meanmax_s{seed}.md", 16250, "patience")
        _transfer_report(converged / f"transfer_small_meanmax_s{seed}.md",
                         scores(accuracy, pearson))
    monkeypatch.setattr(meanmax_aae, "AAE_RUNS", capped)
    monkeypatch.setattr(meanmax_aae, "AAE_CONVERGED", converged)
    monkeypatch.setattr(meanmax_aae, "AAE_SENTEVAL_HEAD", capped_head)

    rows = run_files.read_rows(_written(tmp_path, meanmax_aae.aae_converged_transfer_table()))
    assert list(rows[0]) == ["task", "mean + max, 4 epochs (mean of seeds 0, 1)",
                             "mean + max, until dev stops (mean of seeds 0, 1)", "change"]
    by_task = {r["task"]: list(r.values())[1:] for r in rows}
    assert by_task["MR"] == ["70.5", "71.7", "+1.2"]  # (70 + 71) / 2, (71 + 72.4) / 2
    assert by_task["MRPC"] == ["70.5/80.0", "71.7/80.0", "+1.2"]
    assert by_task["SST5"] == [markdown.DASH, markdown.DASH, markdown.DASH]
    assert by_task["SICKR"] == ["0.772", "0.780", "+0.008"]
    assert by_task[meanmax_aae.AAE_AVERAGE] == ["70.5/71.5", "71.7/72.7", "+1.2"]
    assert "SICKR, SentEval's linear head" not in by_task  # seed 1 has no linear-head reports

    for seed, (before, after) in enumerate((("0.779", "0.783"), ("0.779", "0.787"))):
        _transfer_report(capped_head / f"transfer_small_meanmax_s{seed}.md", {"SICKR": before})
        _transfer_report(converged_head / f"transfer_small_meanmax_s{seed}.md", {"SICKR": after})
    rows = run_files.read_rows(_written(tmp_path, meanmax_aae.aae_converged_transfer_table()))
    assert list(rows[-1].values()) == ["SICKR, SentEval's linear head", "0.779", "0.785",
                                       "+0.006"]  # (0.783 + 0.787) / 2

    training = run_files.read_rows(_written(tmp_path, meanmax_aae.aae_converged_training_table()))
    assert [(r["seed"], r["steps"], r["stopped by"], r["best step"]) for r in training] == [
        ("0", "16,250", "patience", "15,000"), ("1", "16,250", "patience", "15,000"),
        ("5", "16,250", "patience", "15,000")]


def test_the_aae_dev_curve_rows_every_2000_steps_and_the_best(tmp_path, monkeypatch):
    """Rows at the multiples of 2,000, at each run's best step (bold) and at its last; a step a
    run has no dev record of reads "—"."""
    curves = {"meanmax_s0": [(1000, 0.30, 89.44), (2000, 0.345, 54.8), (3000, 0.38, 42.0),
                             (4000, 0.37, 40.0)],
              "max_s1": [(2000, 0.33, 60.0), (2500, 0.34, 58.04), (3500, 0.335, 57.0)]}
    for name, points in curves.items():
        (tmp_path / f"dev_small_{name}.jsonl").write_text("".join(
            json.dumps({"step": step, "split": "dev", "accuracy": accuracy,
                        "perplexity": perplexity}) + "\n" for step, accuracy, perplexity in points),
            encoding="utf-8")
    monkeypatch.setattr(meanmax_aae, "AAE_CONVERGED", tmp_path)
    rows = run_files.read_rows(_written(tmp_path, meanmax_aae.aae_converged_curve_table()))
    assert list(rows[0]) == ["step", "mean + max, seed 0: dev token acc / perplexity",
                             "max only, seed 1: dev token acc / perplexity"]
    assert [list(r.values()) for r in rows] == [
        ["2,000", "0.345 / 54.8", "0.330 / 60.0"],
        ["2,500", markdown.DASH, "**0.340 / 58.0**"],
        ["3,000", "**0.380 / 42.0**", markdown.DASH],
        ["3,500", markdown.DASH, "0.335 / 57.0"],
        ["4,000", "0.370 / 40.0", markdown.DASH]]


def test_the_converged_aae_tables_name_missing_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(meanmax_aae, "AAE_CONVERGED", tmp_path)
    with pytest.raises(ValueError, match="no run with a 4-epoch twin.*fix: copy"):
        meanmax_aae.aae_converged_transfer_table()
    with pytest.raises(ValueError, match="no train_small_<pooling>_s<seed>.md.*fix: copy"):
        meanmax_aae.aae_converged_training_table()
    with pytest.raises(ValueError, match="no dev_small_<pooling>_s<seed>.jsonl.*fix: copy"):
        meanmax_aae.aae_converged_curve_table()


def test_the_disan_goal_is_the_median_over_the_reports(tmp_path, monkeypatch):
    """Each report's directional (block 16) `vs blk` at 64 and 128, the median over the reports and
    the count at or above 1.7x, against numbers written here; other rows are ignored."""
    header = ("| L | impl | block | bits | vs blk |\n|---|---|---|---|---|\n")
    speed_ups = {"a": (1.62, 2.10), "b": (1.75, 1.80), "c": (1.71, None)}
    for name, (at_64, at_128) in speed_ups.items():
        rows = ["| 64 | blocked | 16 | 32 | 1.00 |", "| 64 | directional | 8 | 2 | 9.99 |",
                f"| 64 | directional | 16 | 2 | {at_64:.2f} |"]
        rows.append(f"| 128 | directional | 16 | 2 | {at_128:.2f} |" if at_128 else
                    "| 128 | directional | 16 | 2 | - |")
        text = f"`python -m bench.bench_disan --x={name}` on a day.\n\n{header}" + "\n".join(rows)
        (tmp_path / f"{name}.md").write_text(text + "\n", encoding="utf-8")
    monkeypatch.setattr(performance, "DISAN_BENCH", tmp_path)
    assert performance.disan_runs() == {"a": {"64": 1.62, "128": 2.10},
                                         "b": {"64": 1.75, "128": 1.80}, "c": {"64": 1.71}}
    medians = performance.disan_medians()
    assert medians["64"] == (1.71, 2, 3)
    assert medians["128"][0] == pytest.approx(1.95) and medians["128"][1:] == (2, 2)
    table = performance.disan_goal_table()
    assert "| `c` | `python -m bench.bench_disan --x=c` | 1.71x | — |" in table
    assert table.splitlines()[-1] == "| median | — | **1.71x** | **1.95x** |"


def test_the_performance_goals_keep_every_goal_of_the_full_run(tmp_path):
    import json

    goals = json.loads((performance.FULL_RUN / "results.json").read_text())["goals"]
    built = tmp_path / "goals.md"
    built.write_text(performance.perf_goals_table(), encoding="utf-8")
    rows = run_files.read_rows(built)
    assert [r["goal (CPU)"] for r in rows[:len(goals)]] == [g["goal"] for g in goals]
    assert len(rows) == len(goals) + 3
    psan = {bucket: run_files.read_rows(path) for bucket, path in performance.PSAN_MEMORY.items()}
    default = ", ".join(f"{next(r for r in found if r['model'] == 'PSAN packed')['/ DiSAN dense']}"
                        f" at L={bucket}" for bucket, found in psan.items())
    assert rows[len(goals) + 1]["measured"] == default


def test_the_schedule_table_reads_sickr_and_its_kept_epoch(tmp_path):
    report = tmp_path / "transfer.md"
    report.write_text(
        "## Transfer results: `x` (seed 1111)\n\n| task | ours |\n|---|---|\n| SICKR | 0.757 |\n\n"
        "Accuracy in %.\n\n| task | ours | selection / details | test size | seconds |\n"
        "|---|---|---|---|---|\n| MR | 70.0 | dev acc 69.0, L2 0.001 | 10662 | 1.0 |\n"
        "| SICKR | 0.757 | dev Pearson 0.730 (epoch 450, senteval schedule); test Spearman "
        "0.672, MSE 0.437 | 4927 | 4.5 |\n", encoding="utf-8")
    assert meanmax_aae._sickr(report) == "0.757 (epoch 450)"


def _sickr_report(path, pearson: str, epoch: int, head: str) -> None:
    path.write_text(
        f"## Transfer results: `x` (seed 1111)\n\n| task | ours |\n|---|---|\n| SICKR | {pearson} |"
        "\n\nAccuracy in %.\n\n| task | ours | selection / details | test size | seconds |\n"
        f"|---|---|---|---|---|\n| SICKR | {pearson} | dev Pearson 0.7 (epoch {epoch}, senteval "
        f"schedule, {head} head); test Spearman 0.6, MSE 0.4 | 4927 | 4.5 |\n", encoding="utf-8")


def test_the_head_table_pairs_each_run_with_its_linear_head_report(tmp_path, monkeypatch):
    """A committed run with a linear-head report gets a row (Tai's report, then SentEval's); a
    run without one gets none; the bag's row comes last."""
    runs, linear = tmp_path / "runs", tmp_path / "senteval_head"
    runs.mkdir(), linear.mkdir()
    for name in ("meanmax_s0", "meanmax_s1", "max_s0"):
        (runs / f"train_small_{name}.md").write_text("| model |\n|---|\n| aae |\n")
        _sickr_report(runs / f"transfer_small_{name}.md", "0.770", 100, "tai")
    _sickr_report(linear / "transfer_small_meanmax_s1.md", "0.781", 500, "senteval")
    _sickr_report(linear / "transfer_small_max_s0.md", "0.779", 950, "senteval")
    _sickr_report(linear / "transfer_bag_glove-6b-50d.md", "0.728", 950, "senteval")
    _sickr_report(tmp_path / "bag.md", "0.757", 450, "tai")
    monkeypatch.setattr(meanmax_aae, "AAE_RUNS", runs)
    monkeypatch.setattr(meanmax_aae, "AAE_SENTEVAL_HEAD", linear)
    monkeypatch.setattr(meanmax_aae, "AAE_BAG", tmp_path / "bag.md")
    rows = run_files.read_rows(_written(tmp_path, meanmax_aae.aae_relatedness_head_table()))
    assert [list(r.values()) for r in rows] == [
        ["AAE small, mean + max, seed 1", "0.770 (epoch 100)", "0.781 (epoch 500)"],
        ["AAE small, max only, seed 0", "0.770 (epoch 100)", "0.779 (epoch 950)"],
        ["bag, same vectors", "0.757 (epoch 450)", "0.728 (epoch 950)"]]


def _written(folder, table: str):
    path = folder / "table.md"
    path.write_text(table + "\n", encoding="utf-8")
    return path


def _breakdown_files(folder, facts: list[tuple[int, bool]], correct: dict[str, list[int]]):
    """<run>.jsonl in `folder` for each run of `correct`: per sentence its (tokens, negation) of
    `facts` and whether the run got it right (1/0)."""
    for run, marks in correct.items():
        (folder / f"{run}.jsonl").write_text("".join(
            json.dumps({"tokens": t, "negation": n, "correct": bool(c)}) + "\n"
            for (t, n), c in zip(facts, marks, strict=True)), encoding="utf-8")


def test_the_sst2_breakdown_averages_seeds_per_group(tmp_path, monkeypatch):
    """Per group the share of correct sentences of each run, the mean over a model's seeds, and
    the Dependency-Transformer minus the Tree-LSTM, against counts written here; the seed-0
    table of the layer experiments reads seed 0 alone."""
    facts = [(5, False), (12, True), (25, False), (40, True)]  # (tokens, negation)
    correct = {"tree_lstm_sst2_s0": [1, 1, 0, 1], "dt_sst2_s0": [1, 0, 0, 1],
               "dt_sst2_s1": [1, 1, 0, 0], "dt_plain_sst2_s3": [0, 0, 1, 1],
               "diag_dt_sst2_s0_root": [0, 1, 1, 1]}
    _breakdown_files(tmp_path, facts, correct)
    monkeypatch.setattr(sst, "SST2_BREAKDOWN", tmp_path)
    by_length = run_files.read_rows(_written(tmp_path, sst.sst2_by_length_table()))
    tree, dt, plain = "Tree-LSTM (seed 0)", "Dependency-Transformer (seeds 0, 1)", (
        "Dependency-Transformer, no relations (seed 3)")
    root = "Dependency-Transformer, [root] sentence vector (seed 0)"
    assert [r[root] for r in by_length] == ["0.0", "100.0", "100.0", "100.0", "75.0"]
    gap = "Dependency-Transformer − Tree-LSTM"
    assert [r["test sentences"] for r in by_length] == [
        "1-10 tokens", "11-20 tokens", "21-30 tokens", "31+ tokens", "all"]
    assert [(r["count"], r[tree], r[dt], r[plain], r[gap]) for r in by_length] == [
        ("1", "100.0", "100.0", "0.0", "+0.0"), ("1", "100.0", "50.0", "0.0", "-50.0"),
        ("1", "0.0", "0.0", "100.0", "+0.0"), ("1", "100.0", "50.0", "100.0", "-50.0"),
        ("4", "75.0", "50.0", "50.0", "-25.0")]
    by_negation = run_files.read_rows(_written(tmp_path, sst.sst2_by_negation_table()))
    assert [(r["count"], r[dt]) for r in by_negation] == [("2", "50.0"), ("2", "50.0")]
    (tmp_path / "diag_dt_sst2_s0_distance6.jsonl").write_text("".join(
        json.dumps({"tokens": t, "negation": n, "correct": c}) + "\n"
        for (t, n), c in zip(facts, [True, True, True, False], strict=True)), encoding="utf-8")
    layers = run_files.read_rows(_written(tmp_path, sst.sst2_layers_table()))
    distance = "Dependency-Transformer, relations to tree distance 6 (seed 0)"
    assert [r["test sentences"] for r in layers] == [
        "1-10 tokens", "11-20 tokens", "21-30 tokens", "31+ tokens", "with a negation word",
        "without one", "all"]
    # seed 0 only: dt_sst2_s1 is left out, and the seed-3 ablation has no column value
    assert [(r["Dependency-Transformer (seed 0)"], r[distance]) for r in layers] == [
        ("100.0", "100.0"), ("0.0", "100.0"), ("0.0", "100.0"), ("100.0", "0.0"),
        ("50.0", "50.0"), ("50.0", "100.0"), ("50.0", "75.0")]
    assert {r["Dependency-Transformer, no relations (no runs)"] for r in layers} == {"—"}
    assert {r["Dependency-Transformer, 6 layers (no runs)"] for r in layers} == {"—"}
    by_seed = run_files.read_rows(_written(tmp_path, sst.sst2_by_seed_table()))
    # seed 1 of the Dependency-Transformer has no Tree-LSTM to pair with, so no column
    assert [(r["seed 0: DT − Tree-LSTM (DT / Tree-LSTM)"],
             r["seed 0: DT [root] − Tree-LSTM (DT [root] / Tree-LSTM)"]) for r in by_seed] == [
        ("+0.0 (100.0 / 100.0)", "-100.0 (0.0 / 100.0)"),
        ("-100.0 (0.0 / 100.0)", "+0.0 (100.0 / 100.0)"),
        ("+0.0 (0.0 / 0.0)", "+100.0 (100.0 / 0.0)"),
        ("+0.0 (100.0 / 100.0)", "+0.0 (100.0 / 100.0)"),
        ("-50.0 (50.0 / 100.0)", "+0.0 (100.0 / 100.0)"),
        ("+0.0 (50.0 / 50.0)", "+0.0 (50.0 / 50.0)"),
        ("-25.0 (50.0 / 75.0)", "+0.0 (75.0 / 75.0)")]
    assert len(by_seed[0]) == 4
    (tmp_path / "dt_sst2_s2.jsonl").write_text('{"tokens": 3}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="runs of different test sets"):
        sst.sst2_by_length_table()


def test_the_sst5_breakdown_reads_its_own_folder(tmp_path, monkeypatch):
    """SST-5's table reads sst5_breakdown/ alone (an SST-2 file there is no column of it), every
    group of the seed-0 layer table, the mean over seeds, and one line naming the fix when no
    file is there."""
    facts = [(4, True), (15, False), (22, False), (33, False)]  # (tokens, negation)
    correct = {"tree_lstm_sst5_s0": [1, 0, 1, 1], "dt_sst5_s0": [0, 0, 1, 0],
               "dt_sst5_s1": [0, 1, 1, 1], "tree_lstm_sst2_s1": [0, 0, 0, 0]}
    _breakdown_files(tmp_path, facts, correct)
    monkeypatch.setattr(sst, "SST5_BREAKDOWN", tmp_path)
    rows = run_files.read_rows(_written(tmp_path, sst.sst5_breakdown_table()))
    tree, dt = "Tree-LSTM (seed 0)", "Dependency-Transformer (seeds 0, 1)"
    plain = "Dependency-Transformer, no relations (no runs)"
    assert [(r["test sentences"], r["count"], r[tree], r[dt], r[plain],
             r["Dependency-Transformer − Tree-LSTM"]) for r in rows] == [
        ("1-10 tokens", "1", "100.0", "0.0", "—", "-100.0"),
        ("11-20 tokens", "1", "0.0", "50.0", "—", "+50.0"),
        ("21-30 tokens", "1", "100.0", "100.0", "—", "+0.0"),
        ("31+ tokens", "1", "100.0", "50.0", "—", "-50.0"),
        ("with a negation word", "1", "100.0", "0.0", "—", "-100.0"),
        ("without one", "3", "66.7", "66.7", "—", "+0.0"),
        ("all", "4", "75.0", "50.0", "—", "-25.0")]
    monkeypatch.setattr(sst, "SST5_BREAKDOWN", tmp_path / "empty")
    with pytest.raises(ValueError, match=r"empty: no per-sentence file of Tree-LSTM.*fix: python "
                                         r"-m reports\.sst_breakdown collect"):
        sst.sst5_breakdown_table()


def test_the_sst5_breakdown_by_seed_pairs_the_runs_of_one_seed(tmp_path, monkeypatch):
    """Seed by seed, the Dependency-Transformer's share of correct sentences minus the
    Tree-LSTM's, with both, against counts written here; a seed without both models has no
    column, and a folder without such a seed names the fix."""
    facts = [(4, True), (15, False), (22, False), (33, True)]  # (tokens, negation)
    correct = {"tree_lstm_sst5_s0": [1, 0, 1, 1], "dt_sst5_s0": [0, 0, 1, 0],
               "tree_lstm_sst5_s2": [0, 1, 0, 0], "dt_sst5_s2": [1, 1, 1, 0],
               "dt_sst5_s1": [1, 1, 1, 1], "dt_plain_sst5_s0": [1, 1, 1, 1]}
    _breakdown_files(tmp_path, facts, correct)
    monkeypatch.setattr(sst, "SST5_BREAKDOWN", tmp_path)
    rows = run_files.read_rows(_written(tmp_path, sst.sst5_breakdown_by_seed_table()))
    seed0, seed2 = ("seed 0: DT − Tree-LSTM (DT / Tree-LSTM)",
                    "seed 2: DT − Tree-LSTM (DT / Tree-LSTM)")
    assert [list(r) for r in rows][0] == ["test sentences", "count", seed0, seed2]
    assert [(r["test sentences"], r["count"], r[seed0], r[seed2]) for r in rows] == [
        ("1-10 tokens", "1", "-100.0 (0.0 / 100.0)", "+100.0 (100.0 / 0.0)"),
        ("11-20 tokens", "1", "+0.0 (0.0 / 0.0)", "+0.0 (100.0 / 100.0)"),
        ("21-30 tokens", "1", "+0.0 (100.0 / 100.0)", "+100.0 (100.0 / 0.0)"),
        ("31+ tokens", "1", "-100.0 (0.0 / 100.0)", "+0.0 (0.0 / 0.0)"),
        ("with a negation word", "2", "-100.0 (0.0 / 100.0)", "+50.0 (50.0 / 0.0)"),
        ("without one", "2", "+0.0 (50.0 / 50.0)", "+50.0 (100.0 / 50.0)"),
        ("all", "4", "-50.0 (25.0 / 75.0)", "+50.0 (75.0 / 25.0)")]
    for run in ("tree_lstm_sst5_s0", "tree_lstm_sst5_s2"):
        (tmp_path / f"{run}.jsonl").unlink()
    with pytest.raises(ValueError, match=r"no seed with runs of both the Tree-LSTM and "
                                         r"Dependency-Transformer .*fix: python "
                                         r"-m reports\.sst_breakdown collect"):
        sst.sst5_breakdown_by_seed_table()


def _run_file(path, steps: str, stopped: str, best: str, dev: str, test: str) -> None:
    path.write_text("| model | steps | stopped by | best step | dev accuracy | test accuracy |\n"
                    f"|---|---|---|---|---|---|\n| dt | {steps} | {stopped} | {best} | {dev} | "
                    f"{test} |\n", encoding="utf-8")


def test_each_run_trained_again_sits_beside_its_table_run(tmp_path, monkeypatch):
    runs, again = tmp_path / "runs", tmp_path / "breakdown" / "trained_again"
    for folder in (runs / "dt_sst5_s0", again / "dt_sst5_s0", again / "tree_lstm_sst5_s9"):
        folder.mkdir(parents=True)
    _run_file(runs / "dt_sst5_s0" / "results.md", "12,000", "patience", "7,000", "0.4351",
              "0.4452")
    _run_file(again / "dt_sst5_s0" / "results.md", "14,000", "patience", "9,000", "0.4496",
              "0.4615")
    monkeypatch.setattr(sst, "ENCODER_RUNS", runs)
    monkeypatch.setattr(sst, "SST5_BREAKDOWN", tmp_path / "breakdown")
    rows = run_files.read_rows(_written(tmp_path, sst.sst5_retrained_table()))
    assert [list(r.values()) for r in rows] == [[
        "dt_sst5_s0", "43.51", "44.52", "7,000 of 12,000 (patience)", "44.96", "46.15",
        "9,000 of 14,000 (patience)"]]
    _run_file(again / "tree_lstm_sst5_s9" / "results.md", "6,000", "cap", "5,000", "0.4659",
              "0.4611")
    with pytest.raises(ValueError, match=r"tree_lstm_sst5_s9/results\.md: no table run .*fix: "
                                         r"name the folder after the table run"):
        sst.sst5_retrained_table()


def test_the_breakdown_script_takes_sst2_and_sst5_runs_only(tmp_path):
    assert set(sst_breakdown.OUT) == {"sst2_phrases", "sst5_phrases"}
    assert sst_breakdown.OUT["sst5_phrases"].name == "sst5_breakdown"
    facts = sst_breakdown.sentence_facts
    assert facts(("It", "is", "n't", "bad")) == {"tokens": 4, "negation": True}
    assert facts(("Not", "bad")) == {"tokens": 2, "negation": True}
    assert facts(("good", "knot")) == {"tokens": 2, "negation": False}
    run = tmp_path / "trec_run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task": {"dataset": "trec"}}), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"trec_run: a trec run, not SST-2 or SST-5 \(fix: pass "
                                         r"the directory of a run of sst2_phrases or "
                                         r"sst5_phrases\)"):
        sst_breakdown.collect([run])


def test_the_pos_recipe_table_reads_unknown_word_sums(tmp_path, monkeypatch):
    """Accuracy on the unknown-id words and their share of the tokens from the sums written
    here; a run without a sums file shows a dash; a recipe without a run file has no rows."""
    header = ("| model | dataset | steps | stopped by | best step | dev accuracy "
              "| test accuracy |\n|---|---|---|---|---|---|---|\n")
    for name in ("pos_trainvocab_k2_s0", "pos_k2_s0"):
        (tmp_path / f"{name}.md").write_text(
            header + "| phrase_transformer | ud_ewt | 400 | patience | 300 | 0.9000 | 0.8500 |\n"
            "| transformer | ud_ewt | 500 | cap | 500 | 0.8000 | 0.7500 |\n", encoding="utf-8")
    sums = {"dev": {"count": 200, "correct": 150, "unknown_count": 20, "unknown_correct": 5},
            "test": {"count": 100, "correct": 80, "unknown_count": 0, "unknown_correct": 0}}
    (tmp_path / "pos_k2_s0.json").write_text(json.dumps({"phrase_transformer": sums}),
                                             encoding="utf-8")
    monkeypatch.setattr(phrase_transformer, "PT_RUNS", tmp_path)
    monkeypatch.setattr(phrase_transformer, "PT_UNKNOWN", tmp_path)
    rows = run_files.read_rows(_written(tmp_path, phrase_transformer.pt_pos_recipe_table()))
    assert [(r["model"], r["dev acc"], r["best step / steps (stopped by)"]) for r in rows] == [
        ("Transformer (the twin)", "80.00", "500 / 500 (cap)"),
        ("PhraseTransformer k=2", "90.00", "300 / 400 (patience)")] * 2
    assert [r["dev acc, unknown words"] for r in rows] == [
        "—", "—", "—", "25.00 (10.00% of tokens)"]
    assert [r["test acc, unknown words"] for r in rows] == ["—"] * 4


def test_the_cost_table_marks_runs_trained_on_the_gpu(tmp_path, monkeypatch):
    """Cells of the runs named in PT_H200_RUNS carry "(H200)"; distinct peaks are listed in
    numeric order, seconds and encode rates in seed order."""
    header = ("| model | dataset | test accuracy | train s | encode sent/s | train peak MiB |\n"
              "|---|---|---|---|---|---|\n")
    for seed, (seconds, rate, peak) in enumerate((("3,616", "847", "1,010.6"),
                                                  ("371", "75,618", "581.9"),
                                                  ("3,000", "900", "1,010.6"))):
        (tmp_path / f"pos_k3_s{seed}.md").write_text(
            header + f"| phrase_transformer | ud_ewt | 0.9 | {seconds} | {rate} | {peak} |\n",
            encoding="utf-8")
    monkeypatch.setattr(phrase_transformer, "PT_RUNS", tmp_path)
    monkeypatch.setattr(phrase_transformer, "PT_H200_RUNS", frozenset({"pos_k3_s1"}))
    rows = run_files.read_rows(_written(tmp_path, phrase_transformer.pt_cost_table()))
    k3 = [r for r in rows if r["task"] == "POS" and r["model"] == "PhraseTransformer k=3"]
    assert [(r["train peak MiB"], r["train s per seed"], r["encode sent/s per seed"])
            for r in k3] == [("581.9 (H200) / 1,010.6", "3,616 / 371 (H200) / 3,000",
                              "847 / 75,618 (H200) / 900")]
    assert {r["train peak MiB"] for r in rows if r is not k3[0]} == {"—"}


def test_gaps_to_the_twin_are_signed_and_never_minus_zero():
    assert phrase_transformer._gaps([0.9, 0.91234, 0.89, 0.89999, None], 100) == [
        "—", "+1.23", "-1.00", "+0.00", "—"]
