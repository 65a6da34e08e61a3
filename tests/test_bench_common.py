"""bench.common.time_in_turns: settled turns time each step as it runs when it repeats.

A fake step is slow only right after a different step (as a DiSAN step right after the dense
one's 3.8 GiB, results/disan/speed.md, "A turn-order bias"); settling must time its repeated cost.
"""

from __future__ import annotations

import time

import jax.numpy as jnp
import pytest

from bench import common
from bench.common import time_in_turns

PENALTY_S = 0.05  # what a fake step costs right after another step


def fake_steps(log: list[str]) -> dict:
    """Two steps, "a" and "b", that log their calls and sleep PENALTY_S when the call before
    them was the other step's."""

    def make(name: str):
        def step():
            if log and log[-1] != name:
                time.sleep(PENALTY_S)
            log.append(name)
            return jnp.zeros(())

        return step

    return {name: (make(name), ()) for name in ("a", "b")}


def test_settled_turns_call_each_step_twice_and_time_the_second_call():
    log: list[str] = []
    timings = time_in_turns(fake_steps(log), repeats=3)
    # warm-ups, then every turn: an untimed and a timed call of the same step
    assert log == ["a", "b"] + ["a", "a", "b", "b"] * 3
    for name in ("a", "b"):
        assert timings[name].calls == 3
        assert timings[name].wall < PENALTY_S / 2, timings[name]
        assert timings[name].compiles == 0


def test_unsettled_turns_inherit_the_previous_step_and_show_the_bias():
    log: list[str] = []
    timings = time_in_turns(fake_steps(log), repeats=3, settle=False)
    assert log == ["a", "b"] + ["a", "b"] * 3
    for name in ("a", "b"):
        assert timings[name].wall >= PENALTY_S, timings[name]


@pytest.mark.parametrize(("settle", "expected_calls"), [(True, 2), (False, 5)])
def test_budget_counts_the_settling_calls(monkeypatch, settle, expected_calls):
    """Every call "takes" 1 s (a fake clock) and the budget is 6.5 s: settled, each timed call
    costs two calls, so int(6.5 / 2) - 1 = 2 timed calls, unsettled int(6.5) - 1 = 5."""

    def one_second(fn):
        fn()
        return 1.0, 1.0

    monkeypatch.setattr(common, "timed", one_second)
    log: list[str] = []
    timings = time_in_turns({"a": fake_steps(log)["a"]}, repeats=10, budget_s=6.5,
                            settle=settle)
    assert timings["a"].calls == expected_calls
    assert log.count("a") == 1 + expected_calls * (2 if settle else 1)
