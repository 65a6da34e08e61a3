"""Installing jaxenc where a user would: the notebooks' install cell keeps a runtime's own (newer)
JAX, a Python older than `python_requires` (3.10) is refused by pip with that requirement, and
the config presets are found from any folder. Offline: pip reads only local files."""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _install_line(notebook: Path) -> str:
    """The pip command of the notebook's install cell (its first code cell, commented out)."""
    cell = next(c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code")
    lines = [line.strip().removeprefix("# ").removeprefix("!")
             for line in "".join(cell["source"]).splitlines() if "pip install" in line]
    assert len(lines) == 1, f"{notebook.name}: one pip install line expected, got {lines}"
    return lines[0]


def _fake_wheel(folder: Path, name: str, version: str) -> Path:
    """A wheel of an empty package `name` at `version` (stands for a runtime's newer JAX)."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f'__version__ = "{version}"\n',
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def _run(command: list[str], **options) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=600, **options)


def test_every_notebook_installs_the_package_not_the_pinned_requirements():
    for notebook in NOTEBOOKS:
        line = _install_line(notebook)
        assert re.fullmatch(r'pip install -q -e "\.\[[a-z,]+\]"', line), (notebook.name, line)
        assert "requirements" not in line


def test_the_notebook_install_keeps_a_newer_jax_in_place(tmp_path):
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                      "['purelib'])"]).stdout.strip())
    # the runtime's newer JAX in the venv itself; every other requirement from this test run's
    # environment, after it on sys.path, so that pip resolves them offline
    wheel = _fake_wheel(tmp_path, "jax", "99.0")
    installed = _run([str(python), "-m", "pip", "install", "-q", "--no-index", str(wheel)])
    assert installed.returncode == 0, installed.stderr
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    line = _install_line(NOTEBOOKS[0]).split()
    assert line[:2] == ["pip", "install"]
    extras = line[-1].strip('"')
    done = _run([str(python), "-m", "pip", "install", "--no-index", "--no-build-isolation",
                 *line[2:-1], extras], cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    version = _run([str(python), "-c", "import importlib.metadata as m; print(m.version('jax'))"])
    assert version.stdout.strip() == "99.0", version.stderr
    assert [p.name for p in site.glob("jax-*.dist-info")] == ["jax-99.0.dist-info"]
    assert not list(site.glob("pytest*")) and not list(site.glob("ruff*"))  # no test tools


def _python310() -> str | None:
    """A Python 3.10 interpreter that runs here (on PATH, or one of pyenv's), else None."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for found in [shutil.which("python3.10"), *sorted(map(str, root.glob(
            "versions/3.10*/bin/python3.10")))]:
        if found and _run([found, "-c", "pass"]).returncode == 0:
            return found
    return None


def test_python_310_is_refused_with_the_projects_requires_python(tmp_path):
    python310 = _python310()
    if python310 is None:
        pytest.skip("no Python 3.10 interpreter here (PATH or pyenv)")
    source = tmp_path / "source"  # what pip reads to build the wheel's metadata
    for name in ("setup.cfg", "pyproject.toml", "README.md", "jaxenc/__init__.py"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, source / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                  "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)])
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("jaxenc-*.whl")
    # the README installs jaxenc with --no-deps before its pinned requirements, so that pip
    # checks Requires-Python first
    done = _run([python310, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps",
                 "--target", str(tmp_path / "target"), str(wheel)])
    assert done.returncode != 0
    message = done.stdout + done.stderr
    assert re.search(r"requires a different Python: 3\.10\.\d+ not in '>=3\.11'", message), message
    assert "jaxlib" not in message


def test_a_preset_name_finds_its_config_file_from_another_folder(tmp_path):
    command = [sys.executable, "-m", "jaxenc.training.main"]
    shown = _run([*command, "--config=disan_trec", "--help"], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert re.search(r"with the values of --config=\S*/train/configs/disan_trec\.py:", text)
    assert "model.keep_prob=0.7 " in text  # the preset's value, not the default
    wrong = _run([*command, "--config=disan_trce", "--workdir=run"], cwd=tmp_path)
    assert wrong.returncode == 2 and not (tmp_path / "run").exists()
    assert re.fullmatch(r"error: --config=disan_trce: no file disan_trce in \S+ and no preset "
                        r"named 'disan_trce' \(fix: give a config file's path, or a preset: "
                        r"[a-z0-9_, ]*disan_trec[a-z0-9_, ]*\)\n", wrong.stderr), wrong.stderr
