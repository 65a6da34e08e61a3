""".ci/run: the lines that set JAXENC_DATA_DIR, run in bash as the script runs them (from the
repository root, under `set -euo pipefail`), keep a value the caller set and default to
shared/data beside the checkout otherwise; the value reaches the commands the script starts."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CI_SCRIPT = REPO / ".ci" / "run"


def data_dir_lines() -> str:
    """The lines of .ci/run that name JAXENC_DATA_DIR (comments left out)."""
    lines = [line for line in CI_SCRIPT.read_text().splitlines()
             if "JAXENC_DATA_DIR" in line and not line.lstrip().startswith("#")]
    assert lines, ".ci/run no longer sets JAXENC_DATA_DIR"
    return "\n".join(lines)


def seen_by_a_child(value: str | None) -> str:
    """JAXENC_DATA_DIR as a process that .ci/run starts sees it, the caller's being `value`
    (None: unset)."""
    env = {key: val for key, val in os.environ.items() if key != "JAXENC_DATA_DIR"}
    if value is not None:
        env["JAXENC_DATA_DIR"] = value
    script = f"set -euo pipefail\n{data_dir_lines()}\nbash -c 'printf %s \"$JAXENC_DATA_DIR\"'"
    return subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.parametrize("value", [None, ""])
def test_an_unset_or_empty_data_dir_defaults_to_shared_data_beside_the_checkout(value):
    assert seen_by_a_child(value) == str(REPO.parent.resolve() / "shared" / "data")


def test_a_data_dir_the_caller_set_is_kept(tmp_path):
    assert seen_by_a_child(str(tmp_path / "my data")) == str(tmp_path / "my data")
