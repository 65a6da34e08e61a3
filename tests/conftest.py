"""Shared fixtures. Eight fake CPU devices so data-parallel code is tested against one device."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """$JAXENC_DATA_DIR, else ../shared/data beside the repository, else None."""
    value = os.environ.get("JAXENC_DATA_DIR")
    candidate = Path(value) if value else REPO.parent / "shared" / "data"
    return candidate if candidate.is_dir() else None


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The real datasets folder; tests that need it skip with the reason when it is absent."""
    root = shared_data_dir()
    if root is None:
        pytest.skip("real datasets not found: set JAXENC_DATA_DIR to a shared/data folder")
    return root
