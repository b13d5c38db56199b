"""The `<private>` carry cache beside the db (`private-carry/`, one small file per transcript of
CARRY_CACHE_FROM bytes or more) is pruned: a prompt hook that keeps a read removes, at most
once a day, the kept reads not written for CARRY_CACHE_DAYS. A real prompt hook against a real
service on a random port; its cost with 10,000 cache files is compared as a ratio only."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from semantic_memory.harness.adapter import (
    _CARRY_PRUNED,
    CARRY_CACHE,
    CARRY_CACHE_DAYS,
    CARRY_CACHE_FROM,
    prune_carry_cache,
)
from semantic_memory.testing import run_hook, start_service

DAY_S = 86_400


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    svc = start_service(tmp_path_factory.mktemp("carry-prune"),
                        MEMORY_PLUGINS="bm25_porter")
    yield svc
    svc.stop()


def long_transcript(path: Path) -> Path:
    """A Claude Code transcript just over CARRY_CACHE_FROM bytes: its reads are kept."""
    line = "ran the tests, 412 passed; the cache lives on the nas " + "x" * 400
    with path.open("w", encoding="utf-8") as out:
        i = 0
        while out.tell() < CARRY_CACHE_FROM + (64 << 10):
            role = "user" if i % 2 == 0 else "assistant"
            out.write(json.dumps({"type": role, "uuid": f"u{i}", "sessionId": "cc",
                                  "message": {"role": role, "content": f"{i}: {line}"}}) + "\n")
            i += 1
    return path


def prompt(service: Any, tmp: Path, transcript: Path, text: str) -> float:
    """One UserPromptSubmit hook run after the prompt's line was appended to the transcript
    (so the hook has a read to keep); its wall time in seconds (for ratios)."""
    (tmp / "ws").mkdir(exist_ok=True)
    with transcript.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"type": "user", "sessionId": "cc",
                              "message": {"role": "user", "content": text}}) + "\n")
    started = time.perf_counter()
    done = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": "cc", "cwd": str(tmp / "ws"), "transcript_path": str(transcript),
        "hook_event_name": "UserPromptSubmit", "prompt": text}, hook_env(service))
    took = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    return took


def hook_env(service: Any) -> dict[str, str]:
    """The service's environment for a hook: every installed plugin (the harness adapters
    are plugins too), a budget a loaded test machine does not spend."""
    env = {k: v for k, v in service.env.items() if k != "MEMORY_PLUGINS"}
    return {**env, "MEMORY_HOOK_BUDGET_S": "10"}


def cache_of(service: Any) -> Path:
    return Path(service.env["MEMORY_DB_PATH"]).parent / CARRY_CACHE


def stale(cache: Path, n: int, days: float, prefix: str = "old") -> list[Path]:
    """`n` kept-read files last written `days` ago."""
    cache.mkdir(mode=0o700, exist_ok=True)
    at = time.time() - days * DAY_S
    made = []
    for i in range(n):
        path = cache / f"{prefix}{i:05d}.json"
        path.write_text('{"file": [1, 2], "offset": 300}')
        os.utime(path, (at, at))
        made.append(path)
    return made


def age(path: Path, days: float) -> None:
    at = time.time() - days * DAY_S
    os.utime(path, (at, at))


def test_prune_removes_what_was_not_written_for_the_days_once_a_day(tmp_path: Path) -> None:
    cache = tmp_path / CARRY_CACHE
    old = stale(cache, 3, CARRY_CACHE_DAYS + 1)
    fresh = stale(cache, 2, CARRY_CACHE_DAYS - 1, prefix="fresh")
    (cache / "killed.json.123.tmp").write_text("{")
    age(cache / "killed.json.123.tmp", CARRY_CACHE_DAYS + 1)
    (cache / "notes.txt").write_text("not ours")
    age(cache / "notes.txt", CARRY_CACHE_DAYS + 1)
    assert prune_carry_cache(str(cache)) == 4
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [_CARRY_PRUNED, "notes.txt", *(p.name for p in fresh)])
    assert not any(p.exists() for p in old)
    stale(cache, 3, CARRY_CACHE_DAYS + 1)
    assert prune_carry_cache(str(cache)) == 0  # pruned today already
    age(cache / _CARRY_PRUNED, 1.1)
    assert prune_carry_cache(str(cache)) == 3


def test_a_prompt_hook_prunes_the_cache_and_its_cost_stays_small(
        service: Any, tmp_path: Path) -> None:
    """10,000 stale files go with the first prompt that keeps a read; the transcript's own
    file and the fresh ones stay. A prompt whose prune is due (a scan of 10,000 files) costs
    within 3x of one whose prune is not (one stat): timed as medians, a ratio."""
    transcript = long_transcript(tmp_path / "t.jsonl")
    cache = cache_of(service)
    old = stale(cache, 10_000, CARRY_CACHE_DAYS + 1)
    fresh = stale(cache, 5, 1, prefix="fresh")
    prompt(service, tmp_path, transcript, "where does the build cache live?")
    assert not any(p.exists() for p in old)
    kept = sorted(p.name for p in cache.iterdir())
    assert len(kept) == len(fresh) + 2 and _CARRY_PRUNED in kept, kept  # + this transcript's

    stale(cache, 10_000, 1, prefix="busy")  # 10,000 files in use: none go
    due, not_due = [], []
    for n in range(5):
        age(cache / _CARRY_PRUNED, 2)
        due.append(prompt(service, tmp_path, transcript, f"question {n} with a prune due"))
        not_due.append(prompt(service, tmp_path, transcript, f"question {n} without"))
    assert len(list(cache.iterdir())) == len(kept) + 10_000
    ratio = statistics.median(due) / statistics.median(not_due)
    print(f"prompt hook, 10,000 cache files: prune due {statistics.median(due):.3f} s, "
          f"not due {statistics.median(not_due):.3f} s, ratio {ratio:.2f}")
    assert ratio < 3, (due, not_due)
