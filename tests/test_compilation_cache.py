"""The persistent compilation cache: a rerun or a resume compiles nothing it compiled before, the
counts in a run's results row are JAX's own, and "" turns the cache off."""

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from jaxenc.training import compilation, loop
from tests.test_training import tiny_config

REPO = Path(__file__).resolve().parents[1]

_RUN = """
import json, sys
from jaxenc.training import loop
from tests.test_training import tiny_config
config = tiny_config("transformer")
config.train.update(dict(num_steps=4, eval_every=2, compilation_cache=sys.argv[2]))
row = loop.train_and_evaluate(config, sys.argv[1])
print(json.dumps({key: row[key] for key in ("compiles", "cache hits", "test accuracy")}))
"""


def _run_in_new_process(workdir: Path, cache: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _RUN, str(workdir), str(cache)], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_identical_run_compiles_nothing(tmp_path):
    cache = tmp_path / "xla"
    first = _run_in_new_process(tmp_path / "first", cache)
    second = _run_in_new_process(tmp_path / "second", cache)
    assert first["compiles"] > 0 and first["cache hits"] == 0
    assert second["compiles"] == 0
    assert second["cache hits"] >= first["compiles"] - 2  # eager ops may be cached in memory
    assert second["test accuracy"] == first["test accuracy"]
    assert any(cache.iterdir())


def _small_run(workdir: Path, cache: str, steps: int) -> dict:
    config = tiny_config("transformer")
    config.train.update(dict(num_steps=steps, eval_every=2, compilation_cache=cache))
    return loop.train_and_evaluate(config, workdir)


def test_a_resumed_run_compiles_nothing(tmp_path):
    cache = str(tmp_path / "xla")
    _small_run(tmp_path / "run", cache, steps=4)
    resumed = _small_run(tmp_path / "run", cache, steps=6)  # two more steps, same shapes
    assert resumed["steps"] == 6
    assert resumed["compiles"] == 0 and resumed["cache hits"] > 0


def test_an_empty_folder_name_turns_the_cache_off(tmp_path):
    first = _small_run(tmp_path / "first", "", steps=2)
    second = _small_run(tmp_path / "second", "", steps=2)
    assert first["cache hits"] == second["cache hits"] == 0
    assert second["compiles"] > 0


def test_recorder_counts_compilations_and_cache_hits(tmp_path):
    x = jnp.ones((5, 7))

    def make_program():  # each call: a new function object, traced and lowered again
        def program(x):
            return jnp.tanh(x) @ x.T
        return program

    with compilation.persistent_cache(str(tmp_path)), compilation.CompileRecorder() as first:
        jax.jit(make_program())(x).block_until_ready()
    with compilation.persistent_cache(str(tmp_path)), compilation.CompileRecorder() as second:
        jax.jit(make_program())(x).block_until_ready()
    assert (first.stats.traces, first.stats.compilations, first.stats.cache_hits) == (1, 1, 0)
    assert first.stats.compiled == 1 and first.stats.cache_misses == 1
    assert (second.stats.traces, second.stats.compilations, second.stats.cache_hits) == (1, 1, 1)
    assert second.stats.compiled == 0
    assert first.stats.compile_s > 0 and first.stats.trace_s > 0


@pytest.mark.parametrize("before", [None, "elsewhere"])
def test_persistent_cache_restores_the_previous_setting(tmp_path, before):
    previous = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir",
                      str(tmp_path / before) if before else None)
    try:
        outside = jax.config.jax_compilation_cache_dir
        with compilation.persistent_cache(str(tmp_path / "inside")):
            assert jax.config.jax_compilation_cache_dir == str(tmp_path / "inside")
        assert jax.config.jax_compilation_cache_dir == outside
        with compilation.persistent_cache(""):
            assert jax.config.jax_compilation_cache_dir is None
        assert jax.config.jax_compilation_cache_dir == outside
    finally:
        jax.config.update("jax_compilation_cache_dir", previous)
        compilation.compilation_cache.reset_cache()
