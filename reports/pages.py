"""Which table goes where: every generated table by name, its builder and its page.

A table sits between the markers `<!-- tables.py: NAME -->` and `<!-- /tables.py -->` (the
per-model pages' tables, `TABLES`, each on its page `PAGES[NAME]`) or `<!-- table.py: NAME -->`
and `<!-- /table.py -->` (the encoder tables, `ENCODER_TABLES`, in any of
`ENCODER_DOCUMENTS`, their links rewritten relative to the document). Std is the sample
standard deviation over the seeds found; a value is a run file's number as printed there
(accuracies as fractions, shown in %).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from reports import (
    ci_checks,
    dependency_transformer,
    disan,
    encoder_tables,
    main_job,
    meanmax_aae,
    papers,
    performance,
    phrase_transformer,
    psan,
    sst,
)
from reports.markdown import marker
from reports.markdown import rewritten as rewritten_for
from reports.markdown import stale_documents as stale_among
from reports.run_files import REPO, RESULTS

ENCODERS_PAGE = RESULTS / "encoders" / "README.md"
DISAN_PAGE = RESULTS / "disan" / "README.md"
PSAN_PAGE = RESULTS / "psan" / "README.md"
PT_PAGE = RESULTS / "phrase_transformer" / "README.md"
DT_PAGE = RESULTS / "dependency_transformer" / "README.md"
AAE_PAGE = RESULTS / "meanmax_aae" / "README.md"
DOCS_RESULTS = REPO / "docs" / "results.md"
SPEED_PAGE = RESULTS / "disan" / "speed.md"
PERFORMANCE_PAGE = REPO / "docs" / "performance.md"

# name -> (builder, page) of the tables between `tables.py` markers
_PLACED: dict[str, tuple[Callable[[], str], Path]] = {
    "sst2_by_length": (sst.sst2_by_length_table, ENCODERS_PAGE),
    "sst2_by_negation": (sst.sst2_by_negation_table, ENCODERS_PAGE),
    "sst2_by_seed": (sst.sst2_by_seed_table, ENCODERS_PAGE),
    "sst2_layers": (sst.sst2_layers_table, ENCODERS_PAGE),
    "sst5_breakdown": (sst.sst5_breakdown_table, ENCODERS_PAGE),
    "sst5_breakdown_by_seed": (sst.sst5_breakdown_by_seed_table, ENCODERS_PAGE),
    "sst5_retrained": (sst.sst5_retrained_table, ENCODERS_PAGE),
    "disan_sweep": (disan.disan_sweep_table, DISAN_PAGE),
    "psan_table4": (psan.psan_table4_table, PSAN_PAGE),
    "psan_seeds": (psan.psan_seeds_table, PSAN_PAGE),
    "psan_snli": (psan.psan_snli_table, PSAN_PAGE),
    "psan_table5": (psan.psan_table5_table, PSAN_PAGE),
    "pt_pos": (phrase_transformer.pt_pos_table, PT_PAGE),
    "pt_pos_random300": (lambda: phrase_transformer.pt_pos_table(
        phrase_transformer.PT_POS_RANDOM300, "pos_random300"), PT_PAGE),
    "pt_pos_recipe": (phrase_transformer.pt_pos_recipe_table, PT_PAGE),
    "pt_multi30k": (phrase_transformer.pt_multi30k_table, PT_PAGE),
    "pt_cost": (phrase_transformer.pt_cost_table, PT_PAGE),
    "dt_epoch": (dependency_transformer.dt_epoch_table, DT_PAGE),
    "aae_transfer": (meanmax_aae.aae_transfer_table, AAE_PAGE),
    "aae_training": (meanmax_aae.aae_training_table, AAE_PAGE),
    "aae_converged_training": (meanmax_aae.aae_converged_training_table, AAE_PAGE),
    "aae_converged_transfer": (meanmax_aae.aae_converged_transfer_table, AAE_PAGE),
    "aae_converged_curve": (meanmax_aae.aae_converged_curve_table, AAE_PAGE),
    "aae_pooling_now": (meanmax_aae.aae_pooling_now_table, AAE_PAGE),
    "aae_pooling": (meanmax_aae.aae_pooling_table, AAE_PAGE),
    "aae_schedule": (meanmax_aae.aae_schedule_table, AAE_PAGE),
    "aae_relatedness_head": (meanmax_aae.aae_relatedness_head_table, AAE_PAGE),
    "aae_bench": (meanmax_aae.aae_bench_table, AAE_PAGE),
    "sst5": (sst.sst5_table, ENCODERS_PAGE),
    "sst5_runs": (sst.sst5_runs_table, ENCODERS_PAGE),
    "main_job": (main_job.main_job_table, DOCS_RESULTS),
    "main_job_pairs": (main_job.main_job_pairs_table, DOCS_RESULTS),
    "disan_kernels": (performance.disan_kernels_table, SPEED_PAGE),
    "disan_goal": (performance.disan_goal_table, SPEED_PAGE),
    "perf_goals": (performance.perf_goals_table, PERFORMANCE_PAGE),
    "perf_train_rates": (performance.perf_train_rates_table, PERFORMANCE_PAGE),
    "ci_checks": (ci_checks.ci_checks_table, ci_checks.CI_PAGE),
}
TABLES: dict[str, Callable[[], str]] = {name: build for name, (build, _) in _PLACED.items()}
PAGES: dict[str, Path] = {name: page for name, (_, page) in _PLACED.items()}
MARKER = marker("tables.py")

ENCODER_TABLES: dict[str, Callable[[], str]] = {
    "headline": encoder_tables.headline_table, "sweep": encoder_tables.sweep_table,
    "encoders": encoder_tables.encoders_table,
    "dependency_tasks": encoder_tables.dependency_tasks_table,
    "progress": encoder_tables.progress_table, "versus_bag": encoder_tables.versus_bag_table,
    "versus_bag_dev": lambda: encoder_tables.versus_bag_table(split="dev"),
    "pairs": encoder_tables.pairs_table, "diagnoses": encoder_tables.diagnoses_table,
    "dev_noise": encoder_tables.dev_noise_table,
    "dev_noise_sick_r": lambda: encoder_tables.dev_noise_table("sick_r"),
    "mrpc_baselines": encoder_tables.mrpc_baselines_table,
    "transfer": encoder_tables.transfer_table,
    "papers": papers.papers_table,
}
ENCODER_DOCUMENTS = (REPO / "README.md", DOCS_RESULTS, ENCODERS_PAGE)
ENCODER_MARKER = marker("table.py")
LINK = re.compile(r"\]\(([^)#:]+)\)")

# Every document with generated tables, each once.
DOCUMENTS = tuple(dict.fromkeys([*PAGES.values(), *ENCODER_DOCUMENTS]))


def encoder_table(name: str, document: Path = REPO / "README.md") -> str:
    """Encoder table `name` as it appears in `document`: its links (written relative to the
    repository root) made relative to the document's folder."""
    where = document.parent
    return LINK.sub(lambda match: f"]({Path(os.path.relpath(REPO / match[1], where)).as_posix()})",
                    ENCODER_TABLES[name]())


def build(name: str) -> str:
    """Table `name` of either kind, as its builder returns it."""
    return {**TABLES, **ENCODER_TABLES}[name]()


def rewritten(text: str, document: Path = REPO / "README.md") -> str:
    """`text` of `document` with every marked table of either kind replaced by its rebuild."""
    text = rewritten_for(text, "tables.py", lambda name: TABLES[name]())
    return rewritten_for(text, "table.py", lambda name: encoder_table(name, document))


def stale_documents(write: bool = False) -> list[Path]:
    """The documents whose marked tables differ from their rebuild (rewritten when `write`)."""
    return stale_among(DOCUMENTS, rewritten, write)
