"""The token-loss benchmark (python -m bench.bench_token_loss): one tiny run, checked for its
rows, the agreement of the two forms and its table, never for its timings."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from bench import bench_token_loss
from jaxenc.tasks.losses import token_losses


def test_the_one_hot_reference_agrees_with_the_closed_form():
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(2, 3, 7)).astype(np.float32))
    targets = jnp.asarray([[0, 6, 3], [1, 1, 5]], jnp.int32)
    np.testing.assert_allclose(bench_token_loss.one_hot_losses(logits, targets, 0.2),
                               token_losses(logits, targets, 0.2), rtol=1e-6)


def test_one_row_per_length_and_a_table(capsys, tmp_path):
    out = tmp_path / "token_loss.md"
    rows = bench_token_loss.main(["--lengths", "3,5", "--batch", "2", "--vocab", "30",
                                  "--repeats", "1", "--out", str(out)])
    assert [row["length"] for row in rows] == [3, 5]
    for row in rows:
        assert row["loss_difference"] < 1e-5 and row["grad_difference"] < 1e-6
        assert row["recompiles"] == 0 and row["calls"] == 1
        assert all(math.isfinite(row[key]) and row[key] > 0
                   for key in ("one_hot_ms", "closed_ms", "ratio"))
    table = capsys.readouterr().out.rstrip().split("\n\n")[-1].splitlines()
    assert table[0].startswith("| length | one-hot ms | closed form ms |")
    assert len(table) == 2 + len(rows)
    written = out.read_text()
    assert written.rstrip().endswith("\n".join(table)) and " cores, load average " in written


def test_a_bad_length_list_is_refused():
    with pytest.raises(SystemExit):
        bench_token_loss.main(["--lengths", "a,b"])
