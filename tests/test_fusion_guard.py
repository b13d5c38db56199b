"""bench/guard.py's verdicts: the margin against the best channel per unit and k, a sign test
on the questions of each cell below, and a leave-one-out that chooses by the guard before the
mean."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pytest  # noqa: E402

from bench import guard as guard_module  # noqa: E402
from bench.guard import KS, _variants, guard, leave_one_out, means, sign_test  # noqa: E402


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


def test_a_cell_below_is_tested_question_by_question() -> None:
    # unit "a": 20 questions; at R@1 the fused engine finds 2 fewer than trigram (9 won, 11
    # lost: a tie by the sign test); at R@5 it finds 10 fewer than porter (0 won, 10 lost)
    def q(r1: float, r5: float) -> dict[int, float]:
        return {1: r1, 5: r5, 10: 1.0, 25: 1.0, 50: 1.0}

    fused = {"a": [q(1, 0)] * 9 + [q(0, 0)] * 11}
    alone = {"porter": {"a": [q(0, 1)] * 10 + [q(0, 0)] * 10},
             "trigram": {"a": [q(0, 0)] * 9 + [q(1, 0)] * 11}}
    verdict = guard(means(fused), {c: means(r) for c, r in alone.items()}, (fused, alone))
    assert [c["cell"] for c in verdict["below"]] == ["a R@1 vs trigram", "a R@5 vs porter"]
    tie, loss = verdict["below"]
    assert (tie["won"], tie["lost"], tie["margin"]) == (9, 11, -10.0) and tie["p"] > 0.5
    assert (loss["won"], loss["lost"]) == (0, 10) and loss["p"] == round(2 / 2 ** 10, 3)
    assert verdict["cells_below"] == 2 and verdict["cells_significantly_below"] == 1


def test_sign_test_is_exact_and_two_sided() -> None:
    assert sign_test(0, 0) == 1.0 and sign_test(5, 5) == 1.0
    assert sign_test(1, 4) == sign_test(4, 1) == 2 * 6 / 32
    assert sign_test(0, 6) < 0.05 < sign_test(1, 6)


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


def test_cached_results_do_not_outlive_the_code_or_data(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("core/semantic_memory/fusion.py", "bench/guard.py",
                 "bench/data/coding/questions.jsonl", "locomo.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("v1")
    monkeypatch.setattr(guard_module, "ROOT", tmp_path)
    monkeypatch.setattr(guard_module.locomo, "DEFAULT_DATA", tmp_path / "locomo.json")
    before = guard_module.code_fingerprint()
    (tmp_path / "bench" / "results").mkdir()
    (tmp_path / "bench" / "results" / "run.json").write_text("{}")  # a bench's own output
    assert guard_module.code_fingerprint() == before
    for name in ("core/semantic_memory/fusion.py", "bench/data/coding/questions.jsonl",
                 "locomo.json"):
        (tmp_path / name).write_text("v2")
        changed = guard_module.code_fingerprint()
        assert changed != before
        before = changed


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
