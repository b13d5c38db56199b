"""Importing what agents already remember (CLAUDE.md, Claude Code's auto-memory, AGENTS.md, a
notes folder) and exporting to markdown: engine-level on both stores, then the real CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from semantic_memory.importers import (
    claude_auto_memory_dir,
    export_markdown,
    folder_files,
    harness_files,
    harness_scopes,
    run_import,
    split_markdown,
)
from semantic_memory.models import RecallFilters
from semantic_memory.pipeline import MemoryEngine

pytestmark = pytest.mark.both_stores

USER_CLAUDE = """# Style
- Answer in English
- Never paste tokens <private>my token is hunter2</private>

## Testing
Run the tests with pytest.

- use pnpm
  with --frozen-lockfile
"""
PROJECT_CLAUDE = """# Web repo
Deploys go through Argo.

## Decisions
- We picked Postgres over MySQL
"""
AUTO_INDEX = """- [Staging port](staging_port.md) — where the staging database listens
- The user likes short answers
"""
AUTO_PORT = """---
name: staging port
description: where the staging database listens
type: project
---
The staging database listens on port 6543.
"""
AUTO_FEEDBACK = """---
name: no mocks
type: feedback
---
Integration tests hit a real database, never mocks.
"""


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fake HOME with Claude Code, Codex and opencode files and a project folder."""
    home = tmp_path / "home"
    project = tmp_path / "web"
    (home / ".claude").mkdir(parents=True)
    (project / ".claude").mkdir(parents=True)
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = git@github.com:acme/web.git\n', encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "KIMI_CODE_HOME"):
        monkeypatch.delenv(name, raising=False)
    (home / ".claude" / "CLAUDE.md").write_text(USER_CLAUDE, encoding="utf-8")
    (project / "CLAUDE.md").write_text(PROJECT_CLAUDE, encoding="utf-8")
    (project / "CLAUDE.local.md").write_text("- My sandbox is at ~/sandbox\n", encoding="utf-8")
    auto = claude_auto_memory_dir(project.resolve())
    auto.mkdir(parents=True)
    (auto / "MEMORY.md").write_text(AUTO_INDEX, encoding="utf-8")
    (auto / "staging_port.md").write_text(AUTO_PORT, encoding="utf-8")
    (auto / "no_mocks.md").write_text(AUTO_FEEDBACK, encoding="utf-8")
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    (codex_home / "AGENTS.md").write_text("- Prefer ripgrep over grep\n", encoding="utf-8")
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "AGENTS.md").write_text(
        "## Shell\n- Use fish syntax in examples\n", encoding="utf-8")
    (project / "AGENTS.md").write_text("# Build\n- Build with make\n", encoding="utf-8")
    return {"home": home, "project": project.resolve(), "auto": auto, "codex": codex_home}


def claude(engine: MemoryEngine, world: dict[str, Path], dry_run: bool = False) -> dict[str, int]:
    files = harness_files("claude-code", world["project"], "github.com/acme/web")
    reports = run_import(engine, files, harness_scopes("claude-code", "github.com/acme/web"),
                         dry_run=dry_run)
    return {key: sum(r.counts[key] for r in reports) for key in reports[0].counts}


def memories(engine: MemoryEngine) -> dict[str, object]:
    return {m.content: m for m in engine.list(RecallFilters(), 500, 0)}


def test_claude_code_files_become_memories(engine: MemoryEngine, world: dict[str, Path]) -> None:
    assert claude(engine, world)["new"] == 10
    found = memories(engine)
    english = found["Style: Answer in English"]
    assert english.kind == "preference" and english.project is None and english.source == "import"
    assert english.tags == ["heading:Style", "import:claude-code", "loaded-by:claude-code",
                            "path:~/.claude/CLAUDE.md"]
    assert found["Style > Testing: use pnpm\nwith --frozen-lockfile"].tags[0] == "heading:Testing"
    assert "Style > Testing: Run the tests with pytest." in found
    decision = found["Web repo > Decisions: We picked Postgres over MySQL"]
    assert decision.kind == "decision" and decision.project == "github.com/acme/web"
    assert "path:CLAUDE.md" in decision.tags
    assert found["My sandbox is at ~/sandbox"].tags[-1] == "path:CLAUDE.local.md"
    port = found["The staging database listens on port 6543."]  # front matter: type project
    assert port.kind == "fact" and "heading:staging port" in port.tags
    # Claude Code loads its CLAUDE.md files and the MEMORY.md index itself, not the other files
    assert port.loaded_by("claude-code") is False and decision.loaded_by("claude-code")
    assert found["The user likes short answers"].loaded_by("claude-code")
    assert found["Integration tests hit a real database, never mocks."].kind == "preference"
    assert "The user likes short answers" in found  # MEMORY.md: only what is not an index line
    assert not any("Staging port" in content for content in found)
    assert all(len(tag) <= 64 for m in found.values() for tag in m.tags)


def test_private_text_never_reaches_the_store(engine: MemoryEngine,
                                              world: dict[str, Path]) -> None:
    claude(engine, world)
    assert not any("hunter2" in content for content in memories(engine))
    assert "Style: Never paste tokens " in memories(engine)
    assert claude(engine, world)["unchanged"] == 10  # the stripped text compares equal


def test_twice_changes_nothing_and_an_edit_keeps_the_uid(engine: MemoryEngine,
                                                         world: dict[str, Path]) -> None:
    claude(engine, world)
    before = {m.uid: m.content for m in memories(engine).values()}
    assert claude(engine, world) == {"new": 0, "updated": 0, "unchanged": 10, "forgotten": 0,
                                     "duplicate": 0, "rejected": 0, "skipped": 0}
    uid = memories(engine)["Style: Answer in English"].uid
    path = world["home"] / ".claude" / "CLAUDE.md"
    path.write_text(USER_CLAUDE.replace("Answer in English", "Answer in British English"),
                    encoding="utf-8")
    counts = claude(engine, world)
    assert (counts["updated"], counts["new"], counts["unchanged"]) == (1, 0, 9)
    assert engine.get(uid).content == "Style: Answer in British English"
    assert [r["content"] for r in engine.revisions(uid)] == ["Style: Answer in English"]
    assert {m.uid for m in memories(engine).values()} == set(before)


def test_a_removed_section_or_file_is_forgotten_and_may_come_back(
        engine: MemoryEngine, world: dict[str, Path]) -> None:
    claude(engine, world)
    decision_uid = memories(engine)["Web repo > Decisions: We picked Postgres over MySQL"].uid
    (world["project"] / "CLAUDE.md").write_text("# Web repo\nDeploys go through Argo.\n",
                                               encoding="utf-8")
    (world["project"] / "CLAUDE.local.md").unlink()
    assert claude(engine, world)["forgotten"] == 2
    assert engine.get(decision_uid).deleted
    assert "My sandbox is at ~/sandbox" not in memories(engine)
    (world["project"] / "CLAUDE.md").write_text(PROJECT_CLAUDE, encoding="utf-8")
    assert claude(engine, world)["new"] == 1  # back under a new uid; the forgotten one stays so
    back = memories(engine)["Web repo > Decisions: We picked Postgres over MySQL"]
    assert back.uid == f"{decision_uid}-1" and engine.get(decision_uid).deleted
    assert claude(engine, world)["unchanged"] == 9


def test_dry_run_writes_nothing(engine: MemoryEngine, world: dict[str, Path]) -> None:
    assert claude(engine, world, dry_run=True)["new"] == 10
    assert engine.count() == 0
    claude(engine, world)
    (world["project"] / "CLAUDE.md").write_text("# Web repo\nDeploys go through Flux.\n",
                                               encoding="utf-8")
    counts = claude(engine, world, dry_run=True)
    assert (counts["updated"], counts["forgotten"]) == (1, 1)
    assert "Web repo: Deploys go through Argo." in memories(engine)
    assert engine.count() == 10


def test_agents_md_for_codex_opencode_and_kimi(engine: MemoryEngine,
                                               world: dict[str, Path]) -> None:
    project = "github.com/acme/web"

    def run(harness: str) -> dict[str, int]:
        reports = run_import(engine, harness_files(harness, world["project"], project),
                             harness_scopes(harness, project))
        return {key: sum(r.counts[key] for r in reports) for key in reports[0].counts}

    assert run("codex")["new"] == 2
    assert run("opencode")["new"] == 1  # the project's AGENTS.md is shared: already there
    assert run("kimi-code") == {"new": 0, "updated": 0, "unchanged": 1, "forgotten": 0,
                                "duplicate": 0, "rejected": 0, "skipped": 0}
    found = memories(engine)
    assert found["Prefer ripgrep over grep"].project is None
    assert "import:codex" in found["Prefer ripgrep over grep"].tags
    assert found["Shell: Use fish syntax in examples"].tags == [
        "heading:Shell", "import:opencode", "loaded-by:opencode",
        "path:~/.config/opencode/AGENTS.md"]
    build = found["Build: Build with make"]
    assert build.project == project and build.kind == "preference"
    assert build.tags == ["heading:Build", "import:agents-md", "loaded-by:codex",
                          "loaded-by:kimi-code", "loaded-by:opencode", "path:AGENTS.md"]


def test_notes_folder_and_markdown_export_round_trip(engine: MemoryEngine, tmp_path: Path,
                                                     world: dict[str, Path]) -> None:
    notes = tmp_path / "notes"
    (notes / "infra").mkdir(parents=True)
    (notes / "infra" / "db.md").write_text(
        "# Databases\nStaging runs Postgres 16.\n\n- Backups run nightly\n", encoding="utf-8")
    (notes / ".hidden").mkdir()
    (notes / ".hidden" / "x.md").write_text("- not imported\n", encoding="utf-8")
    reports = run_import(engine, folder_files(notes, None), [f"folder:{notes}"])
    assert [r.label for r in reports] == ["infra/db.md"] and reports[0].counts["new"] == 2
    backups = memories(engine)["Databases: Backups run nightly"]
    assert backups.kind == "fact" and "path:infra/db.md" in backups.tags
    claude(engine, world)
    total = engine.count()
    out = tmp_path / "export"
    written = export_markdown(engine, out)
    assert {p.name.split("-")[0] for p, _ in written} == {"_global.md", "github.com_acme_web"}
    text = (out / "_global.md").read_text(encoding="utf-8")
    assert "## preference" in text and "## fact" in text
    assert re.search(r"- Databases: Backups run nightly <!-- uid:imp[0-9a-f]+ -->", text)
    export_scope = [f"folder:{out}"]
    reports = run_import(engine, folder_files(out, None), export_scope)
    counts = {key: sum(r.counts[key] for r in reports) for key in reports[0].counts}
    assert counts["unchanged"] == total and counts["new"] == 0 and engine.count() == total
    # a person edits the export: the memory it names changes in place, kind included
    edited = text.replace("- Databases: Backups run nightly",
                          "- Databases: Backups run hourly")
    (out / "_global.md").write_text(edited + "\n## decision\n\n- We keep 30 days of backups\n",
                                    encoding="utf-8")
    reports = run_import(engine, folder_files(out, None), export_scope)
    counts = {key: sum(r.counts[key] for r in reports) for key in reports[0].counts}
    assert (counts["updated"], counts["new"]) == (1, 1)
    assert engine.get(backups.uid).content == "Databases: Backups run hourly"
    assert memories(engine)["We keep 30 days of backups"].kind == "decision"


def test_an_export_round_trip_keeps_odd_projects_and_refuses_ambiguous_files(
        engine: MemoryEngine, tmp_path: Path) -> None:
    """A project holding `-->` came back cut at it; content ending in a newline came back
    `updated`; a malformed header raised; a uid on two entries silently kept the last."""
    from semantic_memory.importers import ImportFailed
    from semantic_memory.models import NewMemory

    engine.ingest([NewMemory("arrow project note", project="a -->b"),
                   NewMemory("ends with a newline\n", project="a -->b")])
    out = tmp_path / "export"
    [(path, _)] = export_markdown(engine, out)
    scope = [f"folder:{out}"]
    [report] = run_import(engine, folder_files(out, None), scope)
    assert report.counts["unchanged"] == 2 and report.counts["updated"] == 0
    assert {m.project for m in engine.list(RecallFilters(), 10, 0)} == {"a -->b"}
    text = path.read_text(encoding="utf-8")
    entry = next(line for line in text.splitlines() if line.startswith("- arrow"))
    path.write_text(text + entry.replace("arrow", "copied arrow") + "\n", encoding="utf-8")
    with pytest.raises(ImportFailed, match="on two entries"):
        run_import(engine, folder_files(out, None), scope)
    path.write_text(text.replace(" -->\n", "\n", 1), encoding="utf-8")  # the header's end
    with pytest.raises(ImportFailed, match="export header"):
        run_import(engine, folder_files(out, None), scope)
    assert [m.content for m in engine.list(RecallFilters(), 10, 0)].count(
        "arrow project note") == 1  # nothing was written by the refused imports


def test_splitting_rules() -> None:
    sections = split_markdown(
        "intro line\n\n# A\n```\n# not a heading\n- not a bullet\n```\n## B\n1. first\n"
        "   - nested\n2. second\n", "fact")
    assert [s.content for s in sections] == [
        "intro line", "A: ```\n# not a heading\n- not a bullet\n```",
        "A > B: first\n - nested", "A > B: second"]


# --- the real CLI ------------------------------------------------------------------------------


def cli(db: Path, home: Path, *args: str, cwd: Path | None = None,
        extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMORY_DB_PATH": str(db), "HOME": str(home), **(extra or {})}
    for name in ("MEMORY_PLUGINS", "MEMORY_PROJECT", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME",
                 "KIMI_CODE_HOME"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], capture_output=True,
                          text=True, env=env, timeout=60, cwd=cwd)


@pytest.mark.sqlite_only
def test_cli_import_export_and_errors(tmp_path: Path, world: dict[str, Path]) -> None:
    db, home = tmp_path / "cli.db", world["home"]
    extra = {"CODEX_HOME": str(world["codex"])}
    dry = cli(db, home, "import", "claude-code", "--project", str(world["project"]), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would be (dry run): 10 new" in dry.stdout and "hunter2" not in dry.stdout
    assert not db.exists() or json.loads(cli(db, home, "stats", "--json").stdout)["memories"] == 0
    first = cli(db, home, "import", "claude-code", "--json", cwd=world["project"])
    assert json.loads(first.stdout)["totals"]["new"] == 10
    again = cli(db, home, "import", "claude-code", "--project", str(world["project"]))
    assert "total: 0 new, 0 updated, 10 unchanged" in again.stdout
    assert "CLAUDE.md: 2 unchanged" in again.stdout
    codex = cli(db, home, "import", "codex", "--project", str(world["project"]), extra=extra)
    assert "total: 2 new" in codex.stdout, codex.stdout + codex.stderr
    out = tmp_path / "md"
    exported = cli(db, home, "export", "--markdown", str(out))
    assert exported.returncode == 0 and "_global.md: 5 memories" in exported.stdout
    back = json.loads(cli(db, home, "import", str(out), "--json").stdout)["totals"]
    assert back["unchanged"] == 12 and back["new"] == 0
    (world["project"] / "CLAUDE.md").write_bytes(b"# bad \xff\n")
    bad = cli(db, home, "import", "claude-code", "--project", str(world["project"]))
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0
    assert "not UTF-8 text" in bad.stderr and "Traceback" not in bad.stderr
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text('{"content": "a json line"}\n', encoding="utf-8")
    assert json.loads(cli(db, home, "import", str(jsonl)).stdout)["new"] == 1
    mixed = cli(db, home, "import", str(jsonl), "--dry-run")
    assert mixed.returncode == 1 and "markdown imports" in mixed.stderr


@pytest.mark.sqlite_only
def test_cli_imports_one_notes_file_as_its_folder_would(tmp_path: Path) -> None:
    """`import notes.md` was read as JSON lines (every line bad); now it is that file's
    markdown, with the identity its folder's import gives it, and the folder's other files
    left as they are."""
    db, notes = tmp_path / "cli.db", tmp_path / "notes"
    notes.mkdir()
    (notes / "web.md").write_text("# Web\r\n\r\n- Use pnpm\r\n- Node 22\r\n", encoding="utf-8")
    (notes / "ops.md").write_text("# Ops\n\n- Deploys go through staging\n", encoding="utf-8")
    assert "total: 2 new" in cli(db, tmp_path, "import", str(notes / "web.md")).stdout
    folder = json.loads(cli(db, tmp_path, "import", str(notes), "--json").stdout)["totals"]
    assert (folder["new"], folder["unchanged"]) == (1, 2)
    (notes / "web.md").write_text("# Web\n\n- Use pnpm\n", encoding="utf-8")
    alone = json.loads(cli(db, tmp_path, "import", str(notes / "web.md"), "--json").stdout)
    assert alone["totals"] == {"new": 0, "updated": 0, "unchanged": 1, "forgotten": 1,
                               "duplicate": 0, "rejected": 0, "skipped": 0}
    stored = json.loads(cli(db, tmp_path, "list", "--json").stdout)
    assert sorted(m["content"] for m in stored) == ["Ops: Deploys go through staging",
                                                   "Web: Use pnpm"]


@pytest.mark.sqlite_only
def test_a_dry_run_shows_file_text_without_its_terminal_sequences(tmp_path: Path) -> None:
    """The dry run previews what each file would store, before ingest cleans it: a window
    title (OSC 0) or a colour in a notes file is shown as text, never sent to the terminal."""
    db, notes = tmp_path / "cli.db", tmp_path / "notes"
    notes.mkdir()
    (notes / "ops.md").write_text("# Ops\n\n- \x1b]0;pwned\x07Deploys go through "
                                  "\x1b[31mstaging\x1b[0m\n", encoding="utf-8")
    dry = cli(db, tmp_path, "import", str(notes), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Deploys go through staging" in dry.stdout and "would be (dry run): 1 new" in dry.stdout
    assert "\x1b" not in dry.stdout and "\x07" not in dry.stdout


def stored(db: Path, home: Path) -> dict[str, dict]:
    """The current memories of the store at `db`, by uid."""
    listed = cli(db, home, "list", "--json", "--limit", "100")
    assert listed.returncode == 0, listed.stderr
    return {m["uid"]: m for m in json.loads(listed.stdout)}


def store(db: Path, home: Path, text: str, *args: str) -> str:
    result = cli(db, home, "store", text, "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["uid"]


@pytest.mark.sqlite_only
def test_a_markdown_export_leaves_superseded_memories_out(tmp_path: Path) -> None:
    """The export wrote a superseded memory as an ordinary bullet: imported into a fresh store
    (or edited and imported back) the replaced value was current again."""
    db, fresh, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "md"
    old = store(db, tmp_path, "The staging database listens on port 6543", "--project", "web")
    new = store(db, tmp_path, "The staging database now listens on port 6544",
                "--project", "web")
    assert cli(db, tmp_path, "export", "--markdown", str(out)).returncode == 0
    [path] = out.glob("*.md")
    text = path.read_text(encoding="utf-8")
    assert "6543" not in text and f"<!-- uid:{new} -->" in text
    assert cli(db, tmp_path, "import", str(out)).returncode == 0
    history = [json.loads(line) for line in cli(db, tmp_path, "export").stdout.splitlines()]
    assert {m["uid"]: m.get("superseded_by") for m in history} == {old: new, new: None}
    assert list(stored(db, tmp_path)) == [new]
    assert cli(fresh, tmp_path, "import", str(out)).returncode == 0
    assert [m["content"] for m in stored(fresh, tmp_path).values()] == [
        "The staging database now listens on port 6544"]


@pytest.mark.sqlite_only
def test_an_entry_naming_a_forgotten_memory_stays_forgotten(tmp_path: Path) -> None:
    """Export, `forget UID`, edit another entry, import: the forgotten memory was stored again
    under a new `imp…` uid ("1 new, 1 updated"); it is skipped and counted as such."""
    db, out = tmp_path / "a.db", tmp_path / "md"
    gone = store(db, tmp_path, "Deploys go through Argo", "--project", "web")
    kept = store(db, tmp_path, "Use pnpm for the web app", "--project", "web")
    assert cli(db, tmp_path, "export", "--markdown", str(out)).returncode == 0
    assert cli(db, tmp_path, "forget", gone).returncode == 0
    [path] = out.glob("*.md")
    path.write_text(path.read_text(encoding="utf-8").replace("Use pnpm", "Use pnpm 9"),
                    encoding="utf-8")
    dry = cli(db, tmp_path, "import", str(out), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"skip {gone} (forgotten) Deploys go through Argo" in dry.stdout
    assert "would be (dry run): 0 new, 1 updated" in dry.stdout and "1 skipped" in dry.stdout
    real = json.loads(cli(db, tmp_path, "import", str(out), "--json").stdout)["totals"]
    assert (real["new"], real["updated"], real["skipped"]) == (0, 1, 1)
    assert {uid: m["content"] for uid, m in stored(db, tmp_path).items()} == {
        kept: "Use pnpm 9 for the web app"}


@pytest.mark.sqlite_only
def test_an_export_imported_into_another_store_keeps_its_uids(tmp_path: Path) -> None:
    """An entry whose uid the store does not know was stored under a new `imp…` uid; it keeps
    its own. A uid comment that holds no uid stops the import."""
    db, fresh, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "md"
    web = store(db, tmp_path, "Use pnpm for the web app", "--project", "web")
    anywhere = store(db, tmp_path, "Answer in English", "--kind", "preference")
    assert cli(db, tmp_path, "export", "--markdown", str(out)).returncode == 0
    first = json.loads(cli(fresh, tmp_path, "import", str(out), "--json").stdout)["totals"]
    assert first["new"] == 2
    copied = stored(fresh, tmp_path)
    assert sorted(copied) == sorted([web, anywhere])
    assert (copied[web]["project"], copied[anywhere]["kind"]) == ("web", "preference")
    again = json.loads(cli(fresh, tmp_path, "import", str(out), "--json").stdout)["totals"]
    assert (again["new"], again["unchanged"]) == (0, 2)
    bad = out / "_global.md"
    bad.write_text(bad.read_text(encoding="utf-8") + "- Use tabs <!-- uid:not a uid! -->\n",
                   encoding="utf-8")
    refused = cli(tmp_path / "c.db", tmp_path, "import", str(out))
    assert refused.returncode == 1 and refused.stderr.strip().count("\n") == 0
    assert "_global.md" in refused.stderr and "uid comment" in refused.stderr


@pytest.mark.sqlite_only
def test_a_uid_comment_inside_a_memory_survives_the_round_trip(tmp_path: Path) -> None:
    """A memory whose text holds `<!-- uid:… -->` made its export unimportable: the comment's
    parse began at the first `<!-- uid:` of the line, so the whole folder was refused ("its
    uid comment holds no uid"). The entry's own comment is the line's last: imported into a
    fresh store every memory comes back as it was, and back into its own store nothing
    changes."""
    db, fresh, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "md"
    texts = [
        "Mark generated files with <!-- uid:abc123 --> so the linter skips them",
        "The template ends with <!-- uid:deadbeefdeadbeef -->",
        "Two markers <!-- uid:one --> and <!-- uid:two --> on one line",
        "A broken marker <!-- uid:not a uid! --> stays text",
        "An open marker <!-- uid:",
        "First line <!-- uid:x -->\nsecond line <!-- uid:y -->",
    ]
    uids = [store(db, tmp_path, text, "--project", "web", "--kind", "decision")
            for text in texts[:3]]
    uids += [store(db, tmp_path, text) for text in texts[3:]]
    assert cli(db, tmp_path, "export", "--markdown", str(out)).returncode == 0
    before = stored(db, tmp_path)
    imported = cli(fresh, tmp_path, "import", str(out), "--json")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["totals"]["new"] == len(texts)
    fields = ("uid", "content", "kind", "project")
    assert {uid: [m[f] for f in fields] for uid, m in stored(fresh, tmp_path).items()} == \
        {uid: [before[uid][f] for f in fields] for uid in uids}
    assert [before[uid]["content"] for uid in uids] == texts
    again = cli(db, tmp_path, "import", str(out), "--json")
    assert again.returncode == 0, again.stderr
    totals = json.loads(again.stdout)["totals"]
    assert (totals["unchanged"], totals["new"], totals["updated"]) == (len(texts), 0, 0)
    assert stored(db, tmp_path) == before


@pytest.mark.sqlite_only
def test_an_earlier_exports_stale_file_is_refused_not_imported(tmp_path: Path) -> None:
    """After `update UID --project other`, exporting into the same folder left `web-….md`
    behind and importing the folder quietly moved the memory back to web. The export refuses
    such a folder, and an import refuses a uid that two files name."""
    db, out = tmp_path / "a.db", tmp_path / "md"
    uid = store(db, tmp_path, "Deploys go through Argo", "--project", "web")
    assert cli(db, tmp_path, "export", "--markdown", str(out)).returncode == 0
    [web_file] = out.glob("*.md")
    assert cli(db, tmp_path, "update", uid, "--project", "ops").returncode == 0
    again = cli(db, tmp_path, "export", "--markdown", str(out))
    assert again.returncode == 1 and again.stderr.strip().count("\n") == 0
    assert web_file.name in again.stderr and "earlier export" in again.stderr
    assert list(out.glob("*.md")) == [web_file]  # nothing written
    ops_dir = tmp_path / "md-ops"
    assert cli(db, tmp_path, "export", "--markdown", str(ops_dir)).returncode == 0
    [ops_file] = ops_dir.glob("*.md")
    (out / ops_file.name).write_bytes(ops_file.read_bytes())  # the stale file beside the new
    imported = cli(db, tmp_path, "import", str(out))
    assert imported.returncode == 1 and imported.stderr.strip().count("\n") == 0
    assert web_file.name in imported.stderr and ops_file.name in imported.stderr
    assert stored(db, tmp_path)[uid]["project"] == "ops"
    web_file.unlink()  # the person removes the stale file: the export and import go through
    assert cli(db, tmp_path, "export", "--markdown", str(out)).returncode == 0
    back = json.loads(cli(db, tmp_path, "import", str(out), "--json").stdout)["totals"]
    assert back["unchanged"] == 1 and stored(db, tmp_path)[uid]["project"] == "ops"
    notes = out / "_global.md"  # a person's own file where the export would write: kept
    notes.write_text("# My notes\n- keep me\n", encoding="utf-8")
    store(db, tmp_path, "Answer in English")
    mine = cli(db, tmp_path, "export", "--markdown", str(out))
    assert mine.returncode == 1 and "_global.md" in mine.stderr
    assert notes.read_text(encoding="utf-8") == "# My notes\n- keep me\n"


@pytest.mark.sqlite_only
def test_an_entry_added_to_an_export_may_move_to_another_file(tmp_path: Path) -> None:
    """An entry a person added to an exported file is stored under an `imp…` uid of that file;
    moved to another project, the next export writes it into that project's file, and the
    import forgot it as "gone from its file" before reaching the file that holds it."""
    db, out = tmp_path / "a.db", tmp_path / "md"
    store(db, tmp_path, "Answer in English")
    assert cli(db, tmp_path, "export", "--markdown", str(out)).returncode == 0
    notes = out / "_global.md"
    notes.write_text(notes.read_text(encoding="utf-8") + "- Use tabs\n", encoding="utf-8")
    assert cli(db, tmp_path, "import", str(out)).returncode == 0
    [added] = [uid for uid, m in stored(db, tmp_path).items() if m["content"] == "Use tabs"]
    assert cli(db, tmp_path, "update", added, "--project", "ops").returncode == 0
    assert cli(db, tmp_path, "export", "--markdown", str(out)).returncode == 0
    back = json.loads(cli(db, tmp_path, "import", str(out), "--json").stdout)["totals"]
    assert (back["unchanged"], back["forgotten"]) == (2, 0)
    assert stored(db, tmp_path)[added]["project"] == "ops"


def test_a_markdown_export_is_written_a_project_at_a_time(
        engine: MemoryEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file from its project's memories, read a page at a time (never the whole store
    at once: it held 838 MB at 1M memories), each kind's bullets spilled to a temporary file
    past SPOOL_BYTES: the text the export always wrote, kinds in their order."""
    import semantic_memory.importers as importers
    from semantic_memory.models import NewMemory

    monkeypatch.setattr(importers, "SPOOL_BYTES", 8)
    ingested = engine.ingest([
        NewMemory("Deploys go through Argo", kind="fact", project="web"),
        NewMemory("We use pnpm\nwith --frozen-lockfile", kind="decision", project="web"),
        NewMemory("Answer in English", kind="preference", project="web"),
        NewMemory("Staging runs Postgres 16.\n\nBackups run nightly", kind="fact", project="web"),
        NewMemory("Restart with systemctl restart web", kind="runbook", project="web"),
        NewMemory("Scratch: look at the flaky test", kind="note", project="web"),
        NewMemory("The office wifi is guest-5g", kind="fact"),
        NewMemory("A note forgotten later", kind="fact", project="web"),
    ], batch_is_session=False)
    uid = [r.uid for r in ingested]
    assert engine.forget(uid[7])

    def whole_store(include_deleted: bool) -> None:
        raise AssertionError("the markdown export read the whole store at once")

    monkeypatch.setattr(engine.store, "export", whole_store)
    written = export_markdown(engine, tmp_path / "out")
    assert [(p.name, n) for p, n in written] == [("_global.md", 1),
                                                 (importers._file_name("web"), 6)]
    assert written[1][0].read_text(encoding="utf-8") == (
        "<!-- semantic-memory-mcp export: project=web -->\n# web\n\n"
        f"## preference\n\n- Answer in English <!-- uid:{uid[2]} -->\n\n"
        f"## decision\n\n- We use pnpm <!-- uid:{uid[1]} -->\n  with --frozen-lockfile\n\n"
        f"## fact\n\n- Deploys go through Argo <!-- uid:{uid[0]} -->\n"
        f"- Staging runs Postgres 16. <!-- uid:{uid[3]} -->\n\n  Backups run nightly\n\n"
        f"## note\n\n- Scratch: look at the flaky test <!-- uid:{uid[5]} -->\n\n"
        f"## runbook\n\n- Restart with systemctl restart web <!-- uid:{uid[4]} -->\n")
    assert written[0][0].read_text(encoding="utf-8") == (
        "<!-- semantic-memory-mcp export: project= -->\n# Memories without a project\n\n"
        f"## fact\n\n- The office wifi is guest-5g <!-- uid:{uid[6]} -->\n")


@pytest.mark.sqlite_only
def test_an_import_in_a_subfolder_or_another_clone_forgets_nothing_of_the_project(
        tmp_path: Path, world: dict[str, Path]) -> None:
    """A project's scope is keyed by its name, which every clone and worktree shares: `import
    claude-code` in a monorepo's packages/foo read no CLAUDE.md there and forgot the root's,
    and an import in a second clone forgot the first clone's auto-memory notes as files gone.
    The project's files are read from the checkout's top folder, and a clone's import answers
    only for its own auto-memory folder."""
    db, home = tmp_path / "cli.db", world["home"]
    sub = world["project"] / "packages" / "foo"
    sub.mkdir(parents=True)
    first = json.loads(cli(db, home, "import", "claude-code", "--json", cwd=world["project"]
                           ).stdout)["totals"]
    assert first["new"] == 10
    inside = json.loads(cli(db, home, "import", "claude-code", "--json", cwd=sub).stdout)
    assert inside["totals"]["forgotten"] == 0 and inside["totals"]["unchanged"] == 10
    clone = tmp_path / "web-clone"
    (clone / ".git").mkdir(parents=True)
    shutil.copy(world["project"] / ".git" / "config", clone / ".git" / "config")
    for name in ("CLAUDE.md", "CLAUDE.local.md"):
        shutil.copy(world["project"] / name, clone / name)
    own = claude_auto_memory_dir(clone.resolve())
    own.mkdir(parents=True)
    (own / "clone_note.md").write_text("The clone runs the e2e suite nightly\n", encoding="utf-8")
    other = json.loads(cli(db, home, "import", "claude-code", "--json", cwd=clone).stdout)
    # the first clone's auto-memory notes are not this clone's to judge
    assert other["totals"]["forgotten"] == 0, other["files"]
    assert other["totals"]["new"] == 1
    # the first clone's own auto-memory file, deleted there, is forgotten by its own import
    (world["auto"] / "no_mocks.md").unlink()
    again = json.loads(cli(db, home, "import", "claude-code", "--json", cwd=world["project"]
                           ).stdout)
    gone = [f["path"] for f in again["files"] if f["forgotten"]]
    assert len(gone) == 1 and gone[0].endswith("-web/memory/no_mocks.md (gone)"), gone
