"""Shared fixtures. Eight fake CPU devices so data-parallel code is tested against one device.

Tests check what programs compute, not how fast they run, and most of their time is XLA
compiling small programs: every process of the test run (pytest-xdist workers, and through
their environment the training runs and notebooks they start) compiles without XLA's slow
backend optimisations and shares one persistent compilation cache, so a program compiled by one
test is read back by the next. Every program is cached; the cache has no size bound, because
JAX's bounded cache lists and reads the whole folder under a lock at every write, which for the
thousands of programs of a test run costs more than it saves.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import functools  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from jaxenc.data import registry  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TEST_COMPILATION = {"jax_disable_most_optimizations": True,
                    "jax_compilation_cache_dir": str(REPO / ".cache" / "xla-tests"),
                    "jax_persistent_cache_min_compile_time_secs": 0.0,
                    "jax_persistent_cache_min_entry_size_bytes": -1,
                    "jax_compilation_cache_max_size": -1}
for _name, _value in TEST_COMPILATION.items():
    jax.config.update(_name, _value)
    os.environ[_name.upper()] = str(_value)  # JAX's variable, for the processes tests start


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
        pytest.skip("real datasets not found: set JAXENC_DATA_DIR to the data root, docs/data.md")
    return root


def _head(path: Path, lines: int) -> bytes:
    with path.open("rb") as f:
        return b"".join(f.readline() for _ in range(lines))


@pytest.fixture
def tiny_data_dir(data_root: Path, tmp_path: Path) -> Callable[[str, int], Path]:
    """make(dataset, lines) -> a data root whose folder for `dataset` holds the first `lines`
    lines of each of its real files (header included). The shared SNLI folder has a dev sample
    only: its slices stand in for train, dev and test."""

    def make(dataset: str, lines: int) -> Path:
        folder = registry.DATASETS[dataset].folder
        source, target = data_root / folder, tmp_path / "data" / folder
        target.mkdir(parents=True)
        if dataset == "snli":
            (sample,) = source.glob("snli_1.0_dev*.jsonl")
            for split in ("train", "dev", "test"):
                (target / f"snli_1.0_{split}.jsonl").write_bytes(_head(sample, lines))
        else:
            for path in source.iterdir():
                if path.is_file():
                    (target / path.name).write_bytes(_head(path, lines))
        return target.parent

    return make


def _noisy_params(model, batch, seed: int = 0) -> dict:
    """Initial parameters of `model` (flax, `train` keyword) on `batch` plus N(0, 0.5^2) noise, so
    that biases are non-zero and gates saturate somewhere: for comparisons with references."""
    params = jax.jit(functools.partial(model.init, train=False))(jax.random.key(seed), batch)
    leaves, tree = jax.tree.flatten(params["params"])
    rng = np.random.default_rng(seed)
    return jax.tree.unflatten(tree, [leaf + 0.5 * rng.normal(size=leaf.shape).astype(np.float32)
                                     for leaf in leaves])


@pytest.fixture(scope="session")
def noisy_params() -> Callable[..., dict]:
    """noisy_params(model, batch, seed=0) -> parameters (see `_noisy_params`)."""
    return _noisy_params
