"""Packaging: only `jaxenc` is installed (no top-level `train` / `eval` packages to collide with
others of that name), the console scripts resolve, and the library imports without the
repository's entry-point packages (run from outside the checkout)."""

import importlib
import subprocess
import sys
from pathlib import Path

from setuptools.config.setupcfg import read_configuration

REPO = Path(__file__).resolve().parents[1]



def test_only_jaxenc_is_installed_and_console_scripts_resolve():
    options = read_configuration(REPO / "setup.cfg")["options"]
    assert options["packages"] and all(p == "jaxenc" or p.startswith("jaxenc.")
                                       for p in options["packages"])
    scripts = dict(line.split(" = ") for line in options["entry_points"]["console_scripts"])
    assert set(scripts) == {"jaxenc-train", "jaxenc-eval", "jaxenc-compare"}
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function))


def test_the_library_imports_outside_the_checkout(tmp_path):
    code = ("import jaxenc.training.main, jaxenc.training.compare, jaxenc.evaluation.transfer, "
            "jaxenc.configs\n"
            "try:\n    import train\nexcept ModuleNotFoundError:\n    print('no train')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no train"
