"""Every encoder table marked in README.md, docs/results.md and results/encoders/README.md is
what reports.encoder_tables rebuilds from the committed run files, and the recipes the table
runs use are the ones the committed sweep chose on dev."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from reports import encoder_tables as table
from reports import pages

REPO = Path(__file__).resolve().parents[2]


DOCUMENTS = ["README.md", "docs/results.md", "results/encoders/README.md"]


def test_the_documents_are_the_ones_table_py_rewrites():
    written = sorted(path.relative_to(REPO).as_posix() for path in pages.ENCODER_DOCUMENTS)
    assert written == sorted(DOCUMENTS)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_marked_tables_equal_their_rebuild(document):
    text = (REPO / document).read_text(encoding="utf-8")
    marked = pages.ENCODER_MARKER.findall(text)
    assert marked, f"{document} has no table.py markers"
    for name, body in marked:
        assert body.strip() == pages.encoder_table(name, REPO / document).strip(), (
            f"{document}: table {name!r} differs from its rebuild "
            "(fix: python -m reports --write)")


def test_every_table_is_in_one_of_the_documents():
    marked = {name for document in pages.ENCODER_DOCUMENTS
              for name, _ in pages.ENCODER_MARKER.findall(document.read_text(encoding="utf-8"))}
    assert marked == set(pages.ENCODER_TABLES)


def test_the_headline_has_a_row_per_model_and_a_number_or_a_page_each():
    rows = table.headline_table().splitlines()[2:]
    assert set(table.HEADLINE) <= set(table.runs.MODELS)
    assert len(rows) == len(table.HEADLINE) + len(table.STATIC_ROWS)
    for model, row in zip(table.HEADLINE, rows, strict=False):
        cell = row.strip("|").split("|")[-1].strip()
        assert row.startswith(f"| {table.HEADLINE[model][0]} |")
        seeded = [seed for seed in range(table.MAX_SEEDS)
                  if (name := table.runs.run_name(model, "trec", seed))
                  and (table.RUNS / name / "results.md").is_file()]
        if seeded:
            assert cell.endswith(f"({len(seeded)} seed{'s' if len(seeded) > 1 else ''})"), row
        else:
            assert cell == "—", row
    for row in rows[len(table.HEADLINE):]:
        assert "](results/" in row


def test_links_in_a_table_are_relative_to_its_document():
    readme = pages.encoder_table("headline", REPO / "README.md")
    results = pages.encoder_table("headline", REPO / "docs" / "results.md")
    assert "](results/meanmax_aae/README.md)" in readme
    assert "](../results/meanmax_aae/README.md)" in results


@pytest.mark.parametrize("marker, name, old_table, rebuilt", [
    ("table.py", "transfer", "| old |", "| MR |"),
    ("tables.py", "psan_snli", "| old |", "| run | parameters outside embeddings |"),
])
def test_rewriting_replaces_a_stale_table(marker, name, old_table, rebuilt):
    stale = f"intro\n<!-- {marker}: {name} -->\n{old_table}\n<!-- /{marker} -->\nend\n"
    fresh = pages.rewritten(stale)
    assert old_table not in fresh and rebuilt in fresh
    assert fresh.startswith("intro\n") and fresh.endswith(f"<!-- /{marker} -->\nend\n")
    assert pages.rewritten(fresh) == fresh


def test_table_recipes_are_the_sweep_choices():
    """Every recipe of runs.RECIPES (what the seeded table runs train) is, among the committed
    sweep runs of its family and task, the variant with the best seed-0 dev score; a family
    and task whose whole sweep is committed has its recipe."""
    chosen = table.sweep_choices()
    for family, tasks in table.runs.RECIPES.items():
        for task, variant in tasks.items():
            assert chosen.get(family, {}).get(task) == variant, (family, task)
    for family, tasks in chosen.items():
        for task in tasks:
            if all((table.RUNS / f"sweep_{family}_{task}_{name}" / "results.md")
                   .is_file() for name in table.runs.candidates(family, task)):
                assert task in table.runs.RECIPES.get(family, {}), (family, task)


def test_seed_zero_of_a_sweep_model_is_its_chosen_sweep_run():
    runs = table.runs
    for family, tasks in runs.RECIPES.items():
        for task, variant in tasks.items():
            model = runs.SWEEP_MODEL[family]
            assert runs.run_name(model, task, 0) == f"sweep_{family}_{task}_{variant}"
            assert runs.run_name(model, task, 1) == f"{model}_{task}_s1"
            plan = runs.table_plan([model], [task], [0])
            sweep = runs.sweep_plan([family], [task], [variant])
            assert plan == sweep  # the same command: seed 0 is not trained twice


def test_the_sweep_plan_is_what_is_committed():
    plan = table.runs.sweep_plan(list(table.runs.SWEEP), list(table.runs.SWEEP_TASKS))
    committed = {path.name for path in table.RUNS.iterdir() if path.name.startswith("sweep_")}
    assert set(plan) == committed
    assert len(plan) + sum(map(len, table.runs.UNTRIED.values())) == sum(
        len(variants) for variants in table.runs.SWEEP.values()) * len(table.runs.SWEEP_TASKS)


def test_a_model_limited_to_some_tasks_is_planned_on_those_only():
    """disan_300 (PSAN's Table 5 size) trains on TREC only, with the DiSAN recipe and d_h 150."""
    plan = table.runs.table_plan(["disan", "disan_300"], ["trec", "sick_r"], [1])
    assert sorted(plan) == ["disan_300_trec_s1", "disan_sick_r_s1", "disan_trec_s1"]
    small, full = plan["disan_300_trec_s1"], plan["disan_trec_s1"]
    assert "--config.model.hidden=150" in small
    assert [flag for flag in small if flag != "--config.model.hidden=150"] == full


def test_sst2_and_mrpc_are_planned_for_the_dependency_models_and_the_bag_only():
    """SST-2 and MRPC are the Dependency-Transformer paper's tasks: the dependency models, the
    ablation and the bag train on them; SST-2 reads the labelled phrases of the training trees,
    as the paper supervises every tree node."""
    plan = table.runs.table_plan(list(table.runs.MODELS), ["sst2", "mrpc"], [1])
    assert sorted(plan) == sorted(f"{model}_{task}_s1" for model in ("bag", "tree_lstm", "dt",
                                                                     "dt_plain")
                                  for task in ("sst2", "mrpc"))
    assert all("--config=train/configs/base.py:" in flag and flag.endswith(",sst2_phrases")
               for name, argv in plan.items() if "_sst2_" in name
               for flag in argv if flag.startswith("--config="))


def test_the_default_plan_trains_five_seeds_of_the_dependency_models_and_three_of_the_rest():
    """Without --seeds: seeds 0-4 for the Dependency-Transformer, its ablation and the Tree-LSTM
    (the Dependency-Transformer paper's protocol), seeds 0-2 for every other model."""
    plan = table.runs.table_plan(["dt", "dt_plain", "tree_lstm", "disan", "bag"], ["sick_e"])
    for model, seeds in (("dt", 5), ("dt_plain", 5), ("tree_lstm", 5), ("disan", 3),
                         ("bag", 3)):
        assert sorted(name for name in plan if name.startswith(f"{model}_sick_e_")) == [
            f"{model}_sick_e_s{seed}" for seed in range(seeds)]


def test_progress_cells_count_the_committed_run_folders():
    """Each cell of the progress table: how many of seeds 0..SEEDS-1 of the model on the task
    have a committed run folder with a results.md (listed from the folder, not from the
    tables), over SEEDS; the total line sums them."""
    runs = table.runs
    committed = {path.parent.name for path in table.RUNS.glob("*/results.md")}
    lines = table.progress_table().splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")][1:]
    assert header == [table.TASK_NAMES[task] for task in runs.TASKS]
    rows = {line.strip("|").split("|")[0].strip(): [c.strip() for c in line.strip("|").split("|")]
            for line in lines[2:] if line.startswith("|")}
    done = planned = 0
    for model in runs.MODELS:
        cells = rows[table.MODEL_NAMES[model]][1:]
        for task, cell in zip(runs.TASKS, cells, strict=True):
            if task not in runs.MODEL_TASKS.get(model, runs.TABLE_TASKS):
                assert cell == "—"
                continue
            names = [runs.run_name(model, task, seed) for seed in range(runs.SEEDS[model])]
            found = sum(name in committed for name in names)
            assert cell == f"{found}/{runs.SEEDS[model]}", (model, task)
            done, planned = done + found, planned + runs.SEEDS[model]
    assert lines[-1] == f"{done} of the {planned} planned table runs are committed."
    assert 0 < done <= planned


def _test_score(name, metric, split="test"):
    """The test record's `metric` of committed run `name`, read straight from its metrics.jsonl
    (split "dev": the best dev record's, the checkpoint the test record is of)."""
    records = [json.loads(line)
               for line in (table.RUNS / name / "metrics.jsonl").read_text().splitlines()]
    if split == "dev":
        return max(record[metric] for record in records if record["split"] == "dev")
    return [record for record in records if record["split"] == "test"][-1][metric]


def _committed_seeds(model, task):
    return [seed for seed in range(table.MAX_SEEDS)
            if (name := table.runs.run_name(model, task, seed))
            and (table.RUNS / name / "results.md").is_file()]


@pytest.mark.parametrize("split", ["test", "dev"])
def test_versus_bag_cells_are_the_difference_of_the_seed_means(split):
    """Each cell of the versus-bag tables, recomputed from the committed test (or best dev)
    records."""
    tasks = ("trec", "sick_r", "sick_e", "sst5")
    rows = {row.split(" | ")[0].lstrip("| "): row.strip("|").split("|")[1:]
            for row in table.versus_bag_table(split=split).splitlines()[2:]}
    for model in table.runs.MODELS:
        if model == "bag" or table.MODEL_NAMES[model] not in rows:
            continue
        cells = rows.pop(table.MODEL_NAMES[model])
        for task, cell in zip(tasks, cells, strict=True):
            metric, _, scale, form = table.PRIMARY[task]
            mine, bag = _committed_seeds(model, task), _committed_seeds("bag", task)
            if not mine or not bag:
                assert cell.strip() == "—"
                continue
            expected = scale * (
                np.mean([_test_score(table.runs.run_name(model, task, s), metric, split)
                         for s in mine])
                - np.mean([_test_score(table.runs.run_name("bag", task, s), metric, split)
                           for s in bag]))
            shown, seeds = re.fullmatch(r" ([+-][\d.]+) \((\d+) vs (\d+)\) ", cell).group(1, 2)
            rounding = 0.51 * 10.0 ** -int(form.split(".")[1][0])  # half the last shown digit
            assert float(shown) == pytest.approx(expected, abs=rounding)
            assert int(seeds) == len(mine)
    assert not rows, f"rows of no model: {sorted(rows)}"


def test_pair_differences_are_the_seed_paired_test_scores():
    """Each pairs-table row, recomputed from the committed test records of both runs."""
    rows = [row for row in table.pairs_table().splitlines()[2:] if row.startswith("| ")]
    expected = 0
    for model, other in table.PAIRS:
        for task, label in table.TASK_NAMES.items():
            metric, _, scale, form = table.PRIMARY[task]
            rounding = 0.51 * 10.0 ** -int(form.split(".")[1][0])  # half the last shown digit
            seeds = [seed for seed in range(table.MAX_SEEDS)
                     if all((name := table.runs.run_name(m, task, seed))
                            and (table.RUNS / name / "results.md").is_file()
                            for m in (model, other))]
            if not seeds:
                continue
            expected += 1
            row = next(row for row in rows if f"| {table.HEADLINE[model][0]} − "
                       f"{table.HEADLINE[other][0]} | {label} " in row)
            cells = dict(re.findall(r"s(\d+): ([+-][\d.]+)", row))
            assert sorted(map(int, cells)) == seeds
            for seed in seeds:
                difference = scale * (
                    _test_score(table.runs.run_name(model, task, seed), metric)
                    - _test_score(table.runs.run_name(other, task, seed), metric))
                assert float(cells[str(seed)]) == pytest.approx(difference, abs=rounding)
    assert len(rows) == expected


def test_diagnosis_rows_are_the_committed_diagnosis_runs():
    """One diagnoses-table row per committed run of runs.DIAGNOSES, its flags and test score
    those of the run."""
    rows = {row.split(" | ")[0].lstrip("| "): row.strip("|").split("|")
            for row in table.diagnoses_table().splitlines()[2:]}
    committed = [name for name in table.runs.DIAGNOSES
                 if (table.RUNS / name / "results.md").is_file()]
    assert sorted(rows) == sorted(committed)
    for name in committed:
        _, task, seed, flags = table.runs.DIAGNOSES[name]
        metric, _, scale, form = table.PRIMARY[task]
        cells = [cell.strip() for cell in rows[name]]
        assert cells[3] == str(seed)
        assert cells[4] == ", ".join(f"`{key}={value}`" for key, value in flags.items())
        assert cells[6] == form.format(scale * _test_score(name, metric))
        beside = table.runs.run_name(table.runs.DIAGNOSES[name][0], task, seed)
        if (table.RUNS / beside / "results.md").is_file():
            assert cells[9] == form.format(scale * _test_score(beside, metric))
        else:
            assert cells[8:] == ["—", "—"]


@pytest.mark.parametrize("task, metric, scale, places", [("trec", "accuracy", 100, 2),
                                                          ("sick_r", "pearson", 1, 3)])
def test_dev_noise_rows_are_recomputed_from_the_dev_records(task, metric, scale, places):
    """Each dev-noise row: the mean absolute change of the dev score between consecutive
    evaluations after the best-dev step (the step of the test record), and the mean of those
    dev scores, over the model's committed seeds, recomputed with numpy."""
    rows = {row.split(" | ")[0].lstrip("| "): row.strip("|").split("|")
            for row in table.dev_noise_table(task).splitlines()[2:]}
    assert rows
    for model in table.runs.MODELS:
        seeds = _committed_seeds(model, task)
        name = table.HEADLINE.get(model, (table.MODEL_NAMES[model],))[0]
        if len(seeds) < 2:
            assert name not in rows
            continue
        changes, settled = [], []
        for seed in seeds:
            records = [json.loads(line) for line in (
                table.RUNS / table.runs.run_name(model, task, seed) / "metrics.jsonl")
                .read_text().splitlines()]
            best = [r["step"] for r in records if r["split"] == "test"][0]
            plateau = np.array([scale * r[metric] for r in records
                                if r["split"] == "dev" and r["step"] > best])
            changes.extend(np.abs(np.diff(plateau)))
            settled.extend(plateau)
        cells = [cell.strip() for cell in rows[name]]
        assert cells[1] == str(len(seeds))
        assert float(cells[3]) == pytest.approx(np.mean(changes), abs=0.6 * 10 ** -places)
        assert float(cells[4]) == pytest.approx(np.mean(settled), abs=0.6 * 10 ** -places)


def _planned():
    """Run name -> (the command reports.encoder_runs trains it with under today's recipes, its
    family)."""
    runs, plan = table.runs, {}
    for family in runs.SWEEP:
        for name, argv in runs.sweep_plan([family], list(runs.SWEEP_TASKS)).items():
            plan[name] = (argv, family)
    for model, (_, family, _) in runs.MODELS.items():
        for name, argv in runs.table_plan([model], list(runs.TASKS),
                                          list(range(table.MAX_SEEDS))).items():
            plan[name] = (argv, family)
    for name, argv in runs.diagnosis_plan().items():
        plan[name] = (argv, runs.MODELS[runs.DIAGNOSES[name][0]][1])
    return plan


_MISSING = object()


def test_every_committed_run_was_trained_with_its_planned_flags():
    """A committed run's config.json holds every flag of the command its name stands for today,
    and the defaults of the keys the other sweep variants of its family set (a recipe chosen
    again on dev leaves no run of the old recipe under the new recipe's name)."""
    from jaxenc.training import run_files
    from train.configs import base

    runs, plan = table.runs, _planned()
    swept = {family: {key for variant in variants.values() for key in variant}
             for family, variants in runs.SWEEP.items()}
    checked = 0
    for folder in sorted(path for path in table.RUNS.iterdir() if path.is_dir()):
        assert folder.name in plan, f"{folder.name}: no run of reports.encoder_runs has this name"
        argv, family = plan[folder.name]
        flags = dict(flag.removeprefix("--config.").split("=", 1) for flag in argv
                     if flag.startswith("--config."))
        spec = next(flag for flag in argv if flag.startswith("--config=")).split(":")[1]
        defaults = base.get_config(spec)
        # an option a run predates reads as it trained (BEFORE_OPTION), else as its default
        config = run_files.saved_config(folder)
        for key in set(flags) | swept.get(family, set()):
            section, field = key.split(".", 1)
            expected = flags.get(key, str(defaults[section][field]))
            trained = config[section]
            for part in field.split("."):  # task.head.activation: a nested section
                trained = trained.get(part, _MISSING) if isinstance(trained, dict) else _MISSING
            if trained is _MISSING:
                trained = defaults[section][field]
            assert str(trained) == expected, (folder.name, key)
        checked += 1
    assert checked


def test_collect_copies_planned_runs_and_names_other_folders(tmp_path, monkeypatch, capsys):
    runs = table.runs
    name = "bag_trec_s1"
    assert name in runs.planned_names()
    source, stray = tmp_path / "runs" / name, tmp_path / "runs" / "transfer_report"
    for folder in (source, stray):
        folder.mkdir(parents=True)
        (folder / "results.md").write_text(f"# {folder.name}\n")
    (source / "config.json").write_text("{}\n")
    (source / "metrics.jsonl").write_text('{"step": 1, "split": "train", "loss": 1.0}\n'
                                          '{"step": 1, "split": "dev", "accuracy": 0.5}\n')
    monkeypatch.setenv("RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(runs, "REPO", tmp_path)
    monkeypatch.setattr(runs, "COMMITTED", tmp_path / "committed")
    runs.collect()
    assert sorted(p.name for p in (tmp_path / "committed").iterdir()) == [name]
    assert (tmp_path / "committed" / name / "metrics.jsonl").read_text() == (
        '{"step": 1, "split": "dev", "accuracy": 0.5}\n')
    assert f"skipped {stray}: not a run of encoder_runs' plans" in capsys.readouterr().out
