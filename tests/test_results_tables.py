"""Every results table marked in the README and results/encoders/README.md is what
results/encoders/table.py rebuilds from the committed run files, and the recipes the table runs
use are the ones the committed sweep chose on dev."""

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location(
        "results_table", REPO / "results" / "encoders" / "table.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["results_table"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("document", ["README.md", "results/encoders/README.md"])
def test_marked_tables_equal_their_rebuild(table, document):
    text = (REPO / document).read_text(encoding="utf-8")
    marked = table.MARKER.findall(text)
    assert marked, f"{document} has no table.py markers"
    for name, body in marked:
        assert body.strip() == table.TABLES[name]().strip(), (
            f"{document}: table {name!r} differs from its rebuild "
            "(fix: python results/encoders/table.py --write)")


def test_rewriting_replaces_a_stale_table(table):
    stale = "intro\n<!-- table.py: transfer -->\n| old |\n<!-- /table.py -->\nend\n"
    fresh = table.rewritten(stale)
    assert "| old |" not in fresh and "| MR |" in fresh
    assert fresh.startswith("intro\n") and fresh.endswith("<!-- /table.py -->\nend\n")
    assert table.rewritten(fresh) == fresh


def test_table_recipes_are_the_sweep_choices(table):
    """runs.RECIPES (what the seeded table runs train) names, for every family and task the sweep
    has finished, the variant with the best seed-0 dev score."""
    chosen = table.sweep_choices()
    for family, tasks in chosen.items():
        for task, variant in tasks.items():
            if all((table.RUNS / f"sweep_{family}_{task}_{name}" / "results.md")
                                  .is_file() for name in table.runs.SWEEP[family]):
                assert table.runs.RECIPES.get(family, {}).get(task) == variant, (family, task)
