"""Timing checks that hold on a loaded machine: no absolute seconds, only a ratio to a baseline
measured in the same run, with a wide margin (absolute figures belong to bench/).

(No tests here: imported by the test modules.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: The hostile input is timed whole and at 1/SCALE of its length.
SCALE = 10
#: Linear work grows SCALE times, quadratic SCALE² (100) times: the bar sits between, 3x above
#: linear and 3x below quadratic (the bar test_hygiene_secrets.py uses too).
MARGIN = 3.0
#: Below this much, a timer's and the scheduler's noise is more than the work.
NOISE_S = 0.05


def best_of(fn: Callable[[Any], Any], arg: Any, runs: int) -> float:
    """The least CPU time of `runs` calls on this thread: the checked work is in-thread CPU
    work, and wall time on an oversubscribed machine also counts other processes' slices (a
    1 MB call sliced many times, its tenth not: 34x on 2 cores running 6 busy processes)."""
    best = float("inf")
    for _ in range(runs):
        started = time.thread_time()
        fn(arg)
        best = min(best, time.thread_time() - started)
    return best


def assert_linear(fn: Callable[[str], Any], hostile: str) -> None:
    """`fn` on `hostile` costs about SCALE times what it costs on the first 1/SCALE of it:
    linear in the length, where a backtracking pattern would be quadratic or worse."""
    part = best_of(fn, hostile[: len(hostile) // SCALE], 3)
    whole = best_of(fn, hostile, 3)  # best of three: a loaded machine stalls a run for seconds
    assert whole <= MARGIN * SCALE * part + NOISE_S, (
        f"{len(hostile)} chars took {whole:.3f} s, 1/{SCALE} of them {part:.4f} s: "
        f"{whole / max(part, 1e-9):.1f}x, linear is {SCALE}x")
