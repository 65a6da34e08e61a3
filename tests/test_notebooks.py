"""The quickstart notebook runs from top to bottom and shows the results table and its plots."""

import os
from pathlib import Path

import pytest

_MISSING = "{} is not installed: pip install nbclient ipykernel nbformat"
nbformat = pytest.importorskip("nbformat", reason=_MISSING.format("nbformat"))
nbclient = pytest.importorskip("nbclient", reason=_MISSING.format("nbclient"))
pytest.importorskip("ipykernel", reason=_MISSING.format("ipykernel"))

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "quickstart.ipynb"
CELL_TIMEOUT_S = 300
RESULTS_HEADER = "| model | dataset |"


def _text_outputs(cell) -> str:
    """Everything a code cell printed (streams and text results)."""
    parts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            parts.append(output["text"])
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
    return "".join(parts)


def _images(cell) -> int:
    return sum("image/png" in output.get("data", {}) for output in cell.get("outputs", []))


def test_committed_notebook_has_no_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells
    for cell in code_cells:
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


@pytest.mark.slow
def test_quickstart_executes_and_shows_results(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # A user's kernel sees one CPU device, not the eight fake ones of the test session; the
    # notebook's temporary workdir goes under tmp_path.
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    env["TMPDIR"] = str(tmp_path)
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO)}})
    client.execute(env=env)  # raises CellExecutionError naming the failing cell

    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code_cells)
    results = [cell for cell in code_cells if RESULTS_HEADER in _text_outputs(cell)]
    assert len(results) == 1, "no cell printed the results table"
    table = _text_outputs(results[0])
    assert "| disan | synthetic |" in table and "| bag | synthetic |" in table
    # Plots: the phrase division, the curves (beside the table) and two attention maps.
    assert _images(results[0]) == 1
    assert sum(_images(cell) for cell in code_cells) == 4
    assert "cosine similarity" in "".join(_text_outputs(cell) for cell in code_cells)
    (workdir,) = tmp_path.glob("jaxenc-quickstart-*")
    assert (workdir / "best").is_dir() and (workdir / "baselines" / "bag" / "best").is_dir()
