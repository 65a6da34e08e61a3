"""The table of results/dependency_transformer/README.md: one SICK-E epoch per model
(`dt_epoch`), the report results/dependency_transformer/epoch_sick_e.md that
`bench.bench_epoch --out` wrote."""

from __future__ import annotations

from reports.run_files import RESULTS

EPOCH_REPORT = RESULTS / "dependency_transformer" / "epoch_sick_e.md"


def dt_epoch_table() -> str:
    """The table of EPOCH_REPORT as the benchmark wrote it."""
    return EPOCH_REPORT.read_text(encoding="utf-8").strip()
