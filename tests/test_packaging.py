"""Packaging: `jaxenc`, and `train` with its config files (the presets `jaxenc-train
--config=NAME` finds from any folder), are installed, not `eval`, `bench`, `reports` or the
tests (those run from the checkout, e.g. `python -m reports`); the console scripts resolve, and
the library and the presets import from outside the checkout."""

import importlib
import subprocess
import sys
from pathlib import Path

from setuptools.config.setupcfg import read_configuration

REPO = Path(__file__).resolve().parents[1]



def test_jaxenc_and_the_configs_are_installed_and_console_scripts_resolve():
    options = read_configuration(REPO / "setup.cfg")["options"]
    packages = set(options["packages"])
    assert "jaxenc" in packages and {"train", "train.configs"} <= packages
    assert all(p.startswith("jaxenc.") for p in packages - {"jaxenc", "train", "train.configs"})
    scripts = dict(line.split(" = ") for line in options["entry_points"]["console_scripts"])
    assert set(scripts) == {"jaxenc-train", "jaxenc-eval", "jaxenc-compare"}
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function))


def test_the_library_imports_outside_the_checkout(tmp_path):
    code = ("import jaxenc.training.main, jaxenc.training.compare, jaxenc.evaluation.transfer, "
            "jaxenc.configs\n"
            "from jaxenc.training.main import preset_folder\n"
            "print(preset_folder().relative_to(preset_folder().parents[1]))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "train/configs"
