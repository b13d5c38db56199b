"""bench/guard.py's verdicts: the margin against the best channel per unit and k, and a
leave-one-out that chooses by the guard before the mean."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pytest  # noqa: E402

from bench.guard import KS, _variants, guard, leave_one_out  # noqa: E402


def row(*values: float) -> dict[int, float]:
    return dict(zip(KS, values, strict=True))


ALONE = {"porter": {"a": row(30, 50, 60, 70, 80), "b": row(30, 50, 60, 70, 80)},
         "trigram": {"a": row(35, 45, 55, 65, 75), "b": row(20, 40, 50, 60, 70)}}


def test_margin_is_against_the_best_channel_of_each_cell() -> None:
    fused = {"a": row(34, 52, 60, 71, 80), "b": row(31, 50, 61, 70, 79)}
    verdict = guard(fused, ALONE)
    assert verdict["margins"]["a"] == row(-1.0, 2.0, 0.0, 1.0, 0.0)
    assert verdict["worst_margin"] == -1.0 and verdict["cells_below"] == 2
    assert verdict["worst_at"] == "a R@1 vs trigram"


def test_leave_one_out_prefers_the_guard_to_the_mean() -> None:
    # "high" has the better mean but falls 5 below porter on "b"; "safe" never falls below
    runs = {"high": {"a": row(40, 60, 70, 80, 90), "b": row(25, 50, 60, 70, 80),
                     "c": row(40, 60, 70, 80, 90)},
            "safe": {"a": row(35, 50, 60, 70, 80), "b": row(30, 50, 60, 70, 80),
                     "c": row(35, 50, 60, 70, 80)}}
    alone = {c: {**units, "c": units["a"]} for c, units in ALONE.items()}
    result = leave_one_out(runs, alone, {"a": 10, "b": 10, "c": 10})
    assert result["folds"]["a"]["chosen"] == "safe"  # trained on b and c: b rules out "high"
    assert result["folds"]["b"]["chosen"] == "high"  # trained on a and c: both hold the guard


@pytest.mark.parametrize(("specs", "loo"), [
    (['floor:{"recall_min_cosine": 0.1}'], None),
    ([], "inject_min_coverage=0.3,0.5"),
])
def test_a_setting_the_channels_copy_at_build_is_refused(specs: list[str], loo: str | None
                                                         ) -> None:
    """Swapped in place it would change nothing: the run would report the defaults."""
    with pytest.raises(ValueError, match="read when the channels are built"):
        _variants(specs, loo)
    assert _variants(['share:{"fusion_vector_share": 0.5}'], "recall_depth=50,100")[1] == [
        "recall_depth=50", "recall_depth=100"]
