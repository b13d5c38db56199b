"""The coding-session benchmark's dataset is well formed (bench/data/coding/README.md)."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data" / "coding"
sys.path.insert(0, str(ROOT / "bench"))

import coding  # noqa: E402

TYPES = {"decision", "command", "path/identifier", "error", "preference", "temporal",
         "multi-hop"}
LICENCES = {"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC", "CC-BY-4.0"}


def _rows(name: str) -> list[dict]:
    with (DATA / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((DATA / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def memories() -> list[dict]:
    return _rows("memories.jsonl")


@pytest.fixture(scope="module")
def questions() -> list[dict]:
    return _rows("questions.jsonl")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).lower()


def test_sizes_and_counts(manifest: dict, memories: list[dict], questions: list[dict]) -> None:
    assert len(manifest["repositories"]) >= 20
    assert len(questions) >= 600
    assert sum(p.stat().st_size for p in DATA.iterdir()) < 5_000_000  # a few MB at most
    assert len({m["id"] for m in memories}) == len(memories)
    assert len({q["id"] for q in questions}) == len(questions)


def test_every_answer_exists_and_holds_its_evidence(memories: list[dict],
                                                    questions: list[dict]) -> None:
    by_id = {m["id"]: m for m in memories}
    for q in questions:
        assert q["type"] in TYPES, q["id"]
        assert q["answers"] and all(q["answers"]), q["id"]
        assert len(q["evidence"]) == len(q["answers"]), q["id"]
        for group, snippet in zip(q["answers"], q["evidence"], strict=True):
            for answer in group:
                memory = by_id[answer]  # every answer id names a memory
                assert memory["project"] == q["project"], q["id"]
                if snippet is not None:  # the quoted answer text is in the memory
                    assert _norm(snippet) in _norm(memory["content"]), (q["id"], answer)


def test_splits_are_disjoint_by_repository(manifest: dict, questions: list[dict]) -> None:
    dev, test = set(manifest["splits"]["dev"]), set(manifest["splits"]["test"])
    assert dev and test and not dev & test
    assert dev | test == {r["repo"] for r in manifest["repositories"]}
    by_split = Counter(r["split"] for r in manifest["repositories"])
    assert set(by_split) == {"dev", "test"}
    split_of = {r["repo"]: r["split"] for r in manifest["repositories"]}
    asked = Counter(split_of[q["project"]] for q in questions)
    assert min(asked.values()) >= 0.35 * len(questions)  # roughly half and half
    # both halves mix programming languages
    for split in ("dev", "test"):
        langs = {r["languages"].split("/")[0].split(" ")[0]
                 for r in manifest["repositories"] if r["split"] == split}
        assert len(langs) >= 3, split


def test_manifest_covers_every_source(manifest: dict, memories: list[dict]) -> None:
    sessions = {}
    for repo in manifest["repositories"]:
        assert repo["licence"] in LICENCES, repo["repo"]
        assert re.fullmatch(r"[0-9a-f]{40}", repo["licence_commit"])
        for source in repo["sources"]:
            assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])
            for session in source["sessions"]:
                sessions[(repo["repo"], session)] = source["path"]
    for m in memories:
        assert (m["project"], m["session"]) in sessions, m["id"]
    licences = (DATA / "LICENSES.md").read_text(encoding="utf-8")
    for repo in manifest["repositories"]:
        assert f"## {repo['repo']} " in licences


def test_the_runner_loads_both_splits_and_scores_the_baseline() -> None:
    dev, test, every = coding.load("dev"), coding.load("test"), coding.load("all")
    assert {q.project for q in dev.questions}.isdisjoint({q.project for q in test.questions})
    assert len(dev.questions) + len(test.questions) == len(every.questions)
    report = coding.score(coding.baseline(dev), dev, filtered=True, per_k=False)
    assert report["n"] == len(dev.questions)
    assert 0 < report["R@1"] <= report["R@5"] <= report["R@50"] <= 100
    with pytest.raises(coding.DataError):
        coding.load("train")


def test_the_runner_scores_the_real_engine(tmp_path: Path) -> None:
    """Two small repositories through MemoryEngine (BM25): every memory stored under its
    project, and the filtered recall finds answers (a regression guard, not a quality bar)."""
    every = coding.load("all")
    keep = {"DakineMI/mcp-gateway", "kevinslin/skillz"}
    small = coding.Dataset([m for m in every.memories if m.project in keep],
                           [q for q in every.questions if q.project in keep], every.manifest)
    engine = coding.build_engine(small, str(tmp_path), coding.BM25)
    try:
        filtered = coding.score(coding.engine_recall(engine), small, True, per_k=False)
        unfiltered = coding.score(coding.engine_recall(engine), small, False, per_k=False)
    finally:
        engine.close()
    assert filtered["n"] == unfiltered["n"] == len(small.questions)
    assert filtered["R@50"] > 50
    assert set(filtered["by_split"]) <= {"dev", "test"}
