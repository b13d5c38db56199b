"""Markdown imports at scale and at the limits: a section no memory can hold is counted
`rejected` (file and heading in the reason) and the rest is imported, in a dry run too, never a
traceback; a no-op re-import costs files plus imported memories, not their product."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from semantic_memory.config import Settings
from semantic_memory.importers import folder_files, run_import
from semantic_memory.models import RecallFilters
from semantic_memory.pipeline import MemoryEngine

LIMIT = 2_000  # MEMORY_MAX_CONTENT_CHARS for these tests: a big section stays small


def big_note(chars: int) -> str:
    dump = "log line 0123456789\n" * (chars // 20 + 1)
    return (f"# Notes\n\n- first rule: use pnpm\n\n## Reference dump\n\n```\n{dump}```\n\n"
            "## After\n- last rule: run the linter\n")


def cli(db: Path, home: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMORY_DB_PATH": str(db), "HOME": str(home),
           "MEMORY_MAX_CONTENT_CHARS": str(LIMIT)}
    for name in ("CLAUDE_CONFIG_DIR", "MEMORY_DB_URL", "MEMORY_PROJECT"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def contents(engine: MemoryEngine) -> list[str]:
    return sorted(m.content for m in engine.list(RecallFilters(), 500, 0))


@pytest.fixture
def small_engine(settings: Settings) -> MemoryEngine:
    eng = MemoryEngine(replace(settings, max_content_chars=LIMIT))
    yield eng
    eng.close()


@pytest.mark.sqlite_only
def test_an_oversized_section_is_rejected_and_the_rest_imported_cli(tmp_path: Path) -> None:
    project, home, db = tmp_path / "proj", tmp_path / "home", tmp_path / "memory.db"
    (project / ".git").mkdir(parents=True)
    home.mkdir()
    (project / "CLAUDE.md").write_text(big_note(LIMIT + 500), encoding="utf-8")

    dry = cli(db, home, "import", "claude-code", "--dry-run", cwd=project)
    assert dry.returncode == 0, dry.stderr
    assert "CLAUDE.md: 2 new, 1 rejected" in dry.stdout
    assert 'CLAUDE.md under "Reference dump": content: ' in dry.stdout
    assert f"exceeds the limit of {LIMIT}" in dry.stdout

    for _ in range(2):  # a re-run goes through as well: nothing stops at the big section
        run = cli(db, home, "import", "claude-code", "--json", cwd=project)
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr
        report = json.loads(run.stdout)
        assert report["totals"]["rejected"] == 1
        [rejected] = [a for a in report["files"][0]["actions"] if a.startswith("rejected ")]
        assert 'CLAUDE.md under "Reference dump"' in rejected
    assert report["totals"]["unchanged"] == 2
    plain = cli(db, home, "import", "claude-code", cwd=project)  # a real run says why, too
    assert plain.returncode == 0 and "CLAUDE.md: 2 unchanged, 1 rejected" in plain.stdout
    [why] = plain.stderr.splitlines()
    assert 'CLAUDE.md under "Reference dump": content: ' in why, plain.stderr
    listed = cli(db, home, "list", cwd=project).stdout
    assert "first rule: use pnpm" in listed and "last rule: run the linter" in listed


@pytest.mark.both_stores
def test_a_section_grown_past_the_limit_keeps_its_stored_version(
        small_engine: MemoryEngine, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# N\n\n- small rule\n- other rule\n", encoding="utf-8")
    (notes / "b.md").write_text("# M\n\n- after rule\n", encoding="utf-8")

    def run(dry_run: bool = False) -> dict[str, int]:
        reports = run_import(small_engine, folder_files(notes, None), [f"folder:{notes}"],
                             dry_run=dry_run)
        return {key: sum(r.counts[key] for r in reports) for key in reports[0].counts}

    assert run()["new"] == 3
    (notes / "a.md").write_text(f"# N\n\n- small rule {'x' * LIMIT}\n- other rule, edited\n",
                                encoding="utf-8")
    (notes / "b.md").write_text("# M\n\n- after rule, edited\n", encoding="utf-8")
    dry = run(dry_run=True)
    assert (dry["rejected"], dry["updated"]) == (1, 2)
    counts = run()
    assert (counts["rejected"], counts["updated"], counts["forgotten"]) == (1, 2, 0)
    assert contents(small_engine) == ["M: after rule, edited", "N: other rule, edited",
                                      "N: small rule"]


@pytest.mark.both_stores
def test_an_exported_heading_no_kind_can_be_is_rejected(small_engine: MemoryEngine,
                                                         tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "web.md").write_text(
        "<!-- semantic-memory-mcp export: project=web -->\n# web\n\n## fact\n\n- kept fact\n\n"
        "## open questions!\n\n- is this a kind?\n", encoding="utf-8")
    reports = run_import(small_engine, folder_files(folder, None), [f"folder:{folder}"])
    assert (reports[0].counts["new"], reports[0].counts["rejected"]) == (1, 1)
    assert any(a.startswith("rejected ") and "kind: expected a short identifier" in a
               for a in reports[0].actions)
    assert contents(small_engine) == ["kept fact"]


def _calls_of_a_noop_reimport(engine: MemoryEngine, root: Path, files: int) -> int:
    """Python and C function calls made by a re-import of `files` notes that changes nothing:
    a count, not a time, so the box's load cannot sway it."""
    notes = root / f"vault{files}"
    notes.mkdir()
    for i in range(files):
        text = f"# Note {i}\n\n- fact a{i} of {files}\n- fact b{i} of {files}\n"
        (notes / f"n{i:04d}.md").write_text(text, encoding="utf-8")
    sources, scopes = folder_files(notes, None), [f"folder:{notes}"]
    run_import(engine, sources, scopes)
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        reports = run_import(engine, sources, scopes)
    finally:
        sys.setprofile(None)
    assert sum(r.counts["unchanged"] for r in reports) == 2 * files
    return calls


@pytest.mark.sqlite_only
def test_a_noop_reimport_grows_linearly_with_files(engine: MemoryEngine, tmp_path: Path) -> None:
    """Every imported memory of the store used to be scanned once per file read."""
    small = _calls_of_a_noop_reimport(engine, tmp_path, 100)
    # twice the files on a store holding three times the imported memories
    large = _calls_of_a_noop_reimport(engine, tmp_path, 200)
    assert large < 3.5 * small, (small, large)


@pytest.mark.sqlite_only
def test_progress_is_told_after_each_file(engine: MemoryEngine, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(3):
        (notes / f"{i}.md").write_text(f"- fact {i}\n", encoding="utf-8")
    told: list[tuple[int, int]] = []
    run_import(engine, folder_files(notes, None), [], progress=lambda *n: told.append(n))
    assert told == [(1, 3), (2, 3), (3, 3)]
