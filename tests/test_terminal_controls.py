"""Terminal control sequences in captured tool output: taken out at ingest, and again where a
memory stored before is shown (the injection block, the CLI's tables)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from semantic_memory.config import Settings
from semantic_memory.errors import InvalidMemory
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.safety.terminal import strip_terminal_controls
from test_core_cli import run
from timing import assert_linear

ESC = "\x1b"
#: A coloured test failure as `npm test` prints it to a terminal.
COLOURED = (f"npm test failed: {ESC}[31mError: Cannot find module 'lodash'{ESC}[39m in "
            f"{ESC}[1msrc/app.js{ESC}[22m\r\n{ESC}[2K{ESC}[1G3 tests run")


@pytest.mark.parametrize("raw,clean", [
    (COLOURED, "npm test failed: Error: Cannot find module 'lodash' in src/app.js\n3 tests run"),
    (f"{ESC}]52;c;ZWNobyBwd25lZA=={ESC}\\clipboard", "clipboard"),  # OSC 52, ST-terminated
    (f"{ESC}]0;new title\x07after", "after"),  # OSC, BEL-terminated
    (f"{ESC}]8;;https://evil.example\x07docs{ESC}]8;;\x07", "docs"),  # a hyperlink
    (f"{ESC}]0;never terminated, the text stays", "0;never terminated, the text stays"),
    ("\x9b31mC1 CSI\x9b0m", "C1 CSI"),
    (f"{ESC}(Bcharset {ESC}7saved{ESC}8", "charset saved"),
    ("down 10%\rdown 100%", "down 10%\ndown 100%"),
    ("bold by overstrike: b\x08bo\x08ol\x08ld\x08d", "bold by overstrike: bboolldd"),
    ("tabs\tand\nnewlines stay", "tabs\tand\nnewlines stay"),
    ("NUL is for validation to refuse: \x00", "NUL is for validation to refuse: \x00"),
    ("plain text, untouched", "plain text, untouched"),
])
def test_control_sequences_go_and_the_text_stays(raw: str, clean: str) -> None:
    assert strip_terminal_controls(raw) == clean


@pytest.mark.parametrize("hostile", [
    (f"{ESC}]" + "a" * 5000) * 200,  # unterminated string controls
    f"{ESC}[" + "0;" * 500_000,  # one endless parameter list
    (f"{ESC}[31m" + "x" * 7) * 100_000,
])
def test_a_hostile_megabyte_is_cleaned_in_linear_time(hostile: str) -> None:
    assert_linear(strip_terminal_controls, hostile)


@pytest.mark.both_stores
def test_ingest_stores_tool_output_without_its_colours(engine: MemoryEngine) -> None:
    stored = engine.store_one(NewMemory(COLOURED, source="tool", project=f"web{ESC}[0m",
                                        tags=[f"{ESC}[1mnpm"]))
    memory = engine.get(stored.uid)
    assert ESC not in memory.content and "\r" not in memory.content
    assert (memory.project, memory.tags) == ("web", ["npm"])
    hits = engine.recall("Error cannot find module lodash")
    assert hits and hits[0].memory.uid == stored.uid
    with pytest.raises(InvalidMemory, match="content: must not be empty"):  # nothing left
        engine.store_one(NewMemory(f"{ESC}[2J{ESC}[H"))
    edited = engine.update(stored.uid, content=f"{ESC}[32mall 3 tests pass{ESC}[0m")
    assert engine.get(edited.memory.uid).content == "all 3 tests pass"


def _stored_raw(db: Path, content: str) -> None:
    """A memory as a release before this one stored it: escapes and all."""
    engine = MemoryEngine(Settings(db_path=str(db)))
    uid = engine.store_one(NewMemory("placeholder for the array index [/i]")).uid
    engine.close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE memories SET content = ? WHERE uid = ?", (content, uid))
    conn.commit()
    conn.close()


def test_a_memory_stored_before_is_shown_without_its_escapes(tmp_path: Path) -> None:
    """The block an agent gets and the CLI's tables; rich markup in a memory (`[/i]` raised
    MarkupError, a traceback instead of the list) is shown as written."""
    db = tmp_path / "old.db"
    _stored_raw(db, f"array index [/i] and [red]x[/red]: {COLOURED}")
    engine = MemoryEngine(Settings(db_path=str(db)))
    try:
        block = engine.injection_block("array index", engine.recall("array index"), 2000)
    finally:
        engine.close()
    assert "Cannot find module" in block and ESC not in block and "\r" not in block
    for args in (("list",), ("recall", "array index")):
        out = run(db, *args)
        assert out.returncode == 0, out.stderr
        assert "[/i]" in out.stdout and "[red]x[/red]" in out.stdout
        assert ESC not in out.stdout and "Error: Cannot" in out.stdout


def test_stats_shows_paths_and_names_as_written(tmp_path: Path) -> None:
    """A db path or project with brackets was read as rich markup: `[x]` vanished and `[/x]`
    ended `memory-mcp stats` in a traceback."""
    db = tmp_path / "[/x]" / "memory.db"
    stored = run(db, "store", "a note", "--project", "[bold]web")
    assert stored.returncode == 0, stored.stderr
    out = run(db, "stats")
    assert out.returncode == 0, out.stderr
    assert "[/x]" in out.stdout.replace("\n", "") and "project: [bold]web=1" in out.stdout


def test_bidi_overrides_are_shown_as_code_points_in_the_cli_and_dropped_in_the_block(
        tmp_path: Path) -> None:
    """A right-to-left override makes a terminal print what follows backwards ("Trojan
    Source"): `list` showed `... git push --force #` for a memory whose stored text reads
    otherwise, while the agent's block drops the override. The CLI now writes each bidi
    control as its code point; the stored text keeps it."""
    db = tmp_path / "memory.db"
    hidden = "deploy note: run make deploy \u202e# ecrof-- hsup tig ; \u202c then check \u2067x\u2069"
    stored = run(db, "store", hidden, "--project", "bidi")
    assert stored.returncode == 0, stored.stderr
    for args in (("list", "--project", "bidi"), ("recall", "make deploy", "--project", "bidi")):
        out = run(db, *args)
        assert out.returncode == 0, out.stderr
        shown = out.stdout.replace("\n", "")
        assert "<U+202E># ecrof-- hsup tig ; <U+202C>" in shown, out.stdout
        assert "<U+2067>x<U+2069>" in shown
        assert not any(c in out.stdout for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    block = run(db, "recall", "make deploy", "--project", "bidi", "--block", "2000")
    assert block.returncode == 0 and "make deploy" in block.stdout
    assert "\u202e" not in block.stdout and "<U+202E>" not in block.stdout
    engine = MemoryEngine(Settings(db_path=str(db)))
    try:
        assert [m.content for m in engine.list(RecallFilters(project="bidi"))] == [hidden]
    finally:
        engine.close()
