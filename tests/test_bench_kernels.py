"""bench.kernels against programs whose kernel count is known by construction: loops of n trips
over a body of k (multiply, sort) pairs, whose sorts keep XLA from fusing the steps, so every
pair is two kernels and a trip adds 2k + 1 (the pairs and the loop counter's increment)."""

import re

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from bench import kernels
from bench.common import random_bits_loop


def sorts(x, k: int):
    for _ in range(k):
        x = jnp.sort(x * 2.0)
    return x


def compiled(f, *args):
    return jax.jit(f).lower(*args).compile()


def counted(f, *args) -> kernels.KernelCount:
    return kernels.count_hlo(compiled(f, *args).as_text())


def scan(x, n: int, k: int):
    return lax.scan(lambda c, _: (sorts(c, k), None), x, None, length=n)[0]


X = jnp.ones(8)


def test_straight_line_program_counts_each_kernel_once():
    for k in (1, 2, 3):
        assert kernels.kernel_count(compiled(lambda x, k=k: sorts(x, k), X)) == 2 * k


@pytest.mark.parametrize("k", [1, 3])
def test_scan_counts_its_body_once_per_trip(k):
    counts = {n: kernels.kernel_count(compiled(lambda x, n=n: scan(x, n, k), X))
              for n in (2, 3, 7)}
    assert counts[3] - counts[2] == 2 * k + 1
    assert counts[7] - counts[2] == 5 * (2 * k + 1)
    assert counted(lambda x: scan(x, 7, k), X).unknown_loops == 0


def test_fori_loop_with_static_bounds_counts_every_trip():
    def loop(x, n):
        return lax.fori_loop(0, n, lambda i, c: sorts(c, 2), x)

    assert (kernels.kernel_count(compiled(lambda x: loop(x, 9), X))
            - kernels.kernel_count(compiled(lambda x: loop(x, 4), X))) == 5 * (2 * 2 + 1)


def test_nested_scans_multiply():
    def nested(x, m):
        return lax.scan(lambda c, _: (scan(c, m, 2), None), x, None, length=3)[0]

    two, five = (kernels.kernel_count(compiled(lambda x, m=m: nested(x, m), X)) for m in (2, 5))
    assert five - two == 3 * (5 - 2) * (2 * 2 + 1)


def test_map_with_batch_size_counts_rows_over_batch_size_trips():
    """lax.map over 12 rows in batches of b: 12 / b trips, each also slicing its rows out of
    the input and writing its result into the output (2k + 3 kernels)."""
    rows = jnp.ones((12, 8))
    counts = {b: kernels.kernel_count(compiled(
        lambda xs, b=b: lax.map(lambda r: sorts(r, 2), xs, batch_size=b), rows))
        for b in (2, 3, 4, 6)}
    assert counts[2] - counts[4] == (6 - 3) * (2 * 2 + 3)
    assert counts[3] - counts[6] == (4 - 2) * (2 * 2 + 3)


def test_conditional_counts_its_largest_branch():
    def cond(a, b):
        return counted(lambda p, x: lax.cond(p, lambda x: sorts(x, a), lambda x: sorts(x, b), x),
                       True, X).kernels

    assert cond(3, 1) == cond(1, 3) == cond(2, 1) + 2 == cond(1, 1) + 4


def test_trip_count_from_the_induction_variable_when_xla_records_no_count():
    """Without `known_trip_count` the count comes from the loop's init and step and the
    constant its condition compares with; without those either, the body counts once."""
    text = compiled(lambda x: scan(x, 7, 2), X).as_text()
    known = kernels.count_hlo(text)
    no_count = re.sub(r',"known_trip_count":\{"n":"\d+"\}', "", text)
    assert no_count != text and kernels.count_hlo(no_count) == known
    bare = re.sub(r',"known_init_step":\{[^}]*\}', "", no_count)
    assert bare != no_count
    # the body (5 kernels) once instead of 7 times, and its condition (1 kernel) once
    assert kernels.count_hlo(bare) == kernels.KernelCount(known.kernels - (7 - 1) * 5 + 1, 1)


def test_a_data_dependent_loop_counts_once_and_is_flagged():
    found = counted(lambda x: lax.while_loop(lambda c: c[0] < 10, lambda c: sorts(c, 2) + 1, x), X)
    assert found.unknown_loops == 1
    once = counted(lambda x, n: lax.fori_loop(0, n, lambda i, c: sorts(c, 2), x), X, 3)
    assert once.unknown_loops == 1


@pytest.mark.parametrize("draw", [
    lambda key: jax.random.uniform(key, (4, 8)),
    lambda key: jax.random.bits(jax.random.fold_in(key, 3), (4, 8), jnp.uint32)])
def test_random_bit_loops_count_as_one_kernel_each(draw):
    """jax's threefry rounds (a rolled loop on a CPU, unrolled and fused on a GPU), the only
    loops of these programs: the count is that of the program without its loops, plus one per
    loop."""
    text = compiled(draw, jax.random.key(0)).as_text()
    loops = [line for line in text.splitlines() if " while(" in line]
    assert loops and all(random_bits_loop(line) for line in loops)
    without = "\n".join(line for line in text.splitlines() if " while(" not in line)
    assert kernels.count_hlo(text).kernels == kernels.count_hlo(without).kernels + len(loops)


def test_a_models_loop_is_no_random_bit_loop():
    text = compiled(lambda x: scan(x, 3, 1), X).as_text()
    [loop] = [line for line in text.splitlines() if " while(" in line]
    assert not random_bits_loop(loop)


def test_bytes_accessed_and_the_h100_bound():
    step = compiled(lambda x: sorts(x, 2), jnp.ones((64, 64)))
    assert kernels.bytes_accessed(step) >= 2 * 64 * 64 * 4  # reads and writes the array
    bound = kernels.h100_bound
    assert bound(989e12, 0.0, 0, "bfloat16") == (pytest.approx(1.0), "FLOPs")
    assert bound(67e12, 0.0, 0, "float32") == (pytest.approx(1.0), "FLOPs")
    assert bound(0.0, 3.35e12, 0, "float32") == (pytest.approx(1.0), "bytes")
    assert bound(1e6, 1e6, 1000, "float32") == (pytest.approx(1000 * 7e-6), "launches")
