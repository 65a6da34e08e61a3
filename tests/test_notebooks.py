"""The notebooks run from top to bottom in a fresh kernel and show what their text promises.

Each notebook prints a few machine-readable lines (shapes, losses, accuracies, masked weights) that
the checks below parse, besides counting its pictures.
"""

import json
import os
import re
from pathlib import Path

import pytest

_MISSING = "{} is not installed: pip install nbclient ipykernel nbformat"
nbformat = pytest.importorskip("nbformat", reason=_MISSING.format("nbformat"))
nbclient = pytest.importorskip("nbclient", reason=_MISSING.format("nbclient"))
pytest.importorskip("ipykernel", reason=_MISSING.format("ipykernel"))

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
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


def _cell_printing(cells, pattern: str):
    """The one code cell whose output matches `pattern`, and the match."""
    found = [(cell, match) for cell in cells
             if (match := re.search(pattern, _text_outputs(cell), re.MULTILINE))]
    assert len(found) == 1, f"{len(found)} cells printed {pattern!r}"
    return found[0]


def _execute(name: str, tmp_path: Path) -> list:
    """The code cells of notebooks/<name>.ipynb after running it in a fresh kernel."""
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    # A user's kernel sees one CPU device, not the eight fake ones of the test session, and
    # compiles with XLA's optimisations (the notebooks train for a few hundred steps); the
    # notebook's temporary folders go under tmp_path.
    env = {key: value for key, value in os.environ.items()
           if key not in ("XLA_FLAGS", "JAX_DISABLE_MOST_OPTIMIZATIONS")}
    env["TMPDIR"] = str(tmp_path)
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO)}})
    client.execute(env=env)  # raises CellExecutionError naming the failing cell
    cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in cells)
    return cells


# ----------------------------------------------------------------------------- each notebook


def check_quickstart(cells, tmp_path: Path) -> None:
    results, _ = _cell_printing(cells, re.escape(RESULTS_HEADER))
    table = _text_outputs(results)
    assert "| disan | synthetic |" in table and "| bag | synthetic |" in table
    assert _images(results) == 1  # the curves beside the table
    _, files = _cell_printing(cells, r"^export files: (.*)$")
    listed = set(files[1].split(", "))
    assert {"format.json", "jaxenc_manifest.json", "params.npz"} <= listed
    assert not [name for name in listed if name.endswith(".py")]  # an export holds no code
    _, shape = _cell_printing(
        cells, r"^encoded (\d+) sentences: vectors float32 shape \((\d+), (\d+)\)$")
    assert int(shape[1]) == int(shape[2]) == 6 and int(shape[3]) > 0
    _, fallback = _cell_printing(cells, r"'The' -> id (\d+) \(the id of 'the': (\d+)\); "
                                        r"vocab.encode\(\['The'\]\) alone -> (\d+) ")
    assert fallback[1] == fallback[2] and int(fallback[3]) == 1  # <unk> without the fallback
    similarity, _ = _cell_printing(cells, r"^minimal pair 0/1: cosine similarity")
    pairs = [float(value) for value in re.findall(r"^minimal pair \d/\d: cosine similarity "
                                                  r"(-?[\d.]+)$", _text_outputs(similarity),
                                                  re.MULTILINE)]
    assert len(pairs) == 2 and all(-1.0 <= value < 1.0 for value in pairs)  # not a bag of words
    assert _images(similarity) == 1  # the heat map
    assert _images(cells[-1]) == 2  # DiSAN's forward and backward attention
    assert sum(_images(cell) for cell in cells) == 4
    (workdir,) = tmp_path.glob("jaxenc-quickstart-*")
    assert (workdir / "best").is_dir() and (workdir / "baselines" / "bag" / "best").is_dir()
    assert (workdir / "export" / "jaxenc_manifest.json").is_file()


def check_look_inside(cells, tmp_path: Path) -> None:
    _, sentence = _cell_printing(cells, r"^sentence: (.*)$")
    words = len(sentence[1].split())
    psan, _ = _cell_printing(cells, r"^PSAN weight across phrase boundaries: 0\.0$")
    disan, _ = _cell_printing(cells, r"^DiSAN forward weight on later tokens: 0\.0, "
                                     r"backward weight on earlier tokens: 0\.0$")
    relations, _ = _cell_printing(cells, r"relations in the training trees")
    bias, shape = _cell_printing(cells, r"^relation score bias of layer 0: (\d+) heads x (\d+) x "
                                        r"(\d+) nodes; on NONE pairs: 0\.0$")
    assert int(shape[1]) == 4 and int(shape[2]) == int(shape[3]) == words + 1  # [root] first
    phrase, hypernodes = _cell_printing(cells, r"^(\d+) hypernodes; phase 2 weight outside A: "
                                               r"0\.0$")
    assert int(hypernodes[1]) == (words - 1) + (words - 2)  # bigrams and trigrams
    for cell in (psan, disan, relations, phrase):
        assert _images(cell) == 1
    assert _images(bias) == 2  # the score bias and the attention weights, per head
    assert sum(_images(cell) for cell in cells) == 7  # the phrase division too


def check_downstream(cells, tmp_path: Path) -> None:
    _, same = _cell_printing(cells, r"^max \|standalone - jaxenc\| = (\S+)$")
    assert float(same[1]) < 1e-5
    training, loss = _cell_printing(cells, r"^final loss ([\d.]+) < initial loss ([\d.]+)$")
    assert float(loss[1]) < float(loss[2])
    _, train = _cell_printing(cells, r"^train accuracy before ([\d.]+) after ([\d.]+)$")
    assert float(train[2]) > float(train[1]) + 0.1
    _, dev = _cell_printing(cells, r"^dev accuracy before ([\d.]+) after ([\d.]+)$")
    assert all(0.0 <= float(value) <= 1.0 for value in dev.groups())
    _, change = _cell_printing(cells, r"max \|change\| of the word table ([\d.]+)$")
    assert float(change[1]) > 0  # the encoder was fine-tuned, not only the head
    assert _images(training) == 1 and sum(_images(cell) for cell in cells) == 1  # the loss
    (export,) = tmp_path.glob("jaxenc-downstream-*/export")
    description = json.loads((export / "format.json").read_text())
    assert description["functions"]["differentiable"] and description["buckets"] == [32]


CHECKS = {"quickstart": check_quickstart, "look_inside": check_look_inside,
          "downstream": check_downstream}
COMMITTED = sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb"))


def test_every_notebook_is_executed():
    assert COMMITTED == sorted(CHECKS), "add the notebook's checks to CHECKS"


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_notebook_has_no_outputs_and_a_colab_cell(name):
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells
    for cell in code_cells:
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    first = code_cells[0].source  # Colab: clone, work from the repository root, install
    assert "# !git clone" in first and "# %cd jaxenc" in first and "# !pip install" in first


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_notebook_executes_and_shows_its_results(name, tmp_path):
    CHECKS[name](_execute(name, tmp_path), tmp_path)
