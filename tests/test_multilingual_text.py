"""Text that is not English, or not ASCII: a stdout that cannot encode it (the CLI, the hooks),
function words of other languages at the relevance bar, decomposed (NFD) input, and the
injection block's cut at a grapheme-cluster boundary. Real CLI and hook subprocesses, a real
service, real SQLite files."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness_support import hook_env, hook_log, run_hook
from test_service_support import Service, start_service

CJK = "连接池的大小是 20，配置在 config/db.yaml"


def cli(db: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    """`memory-mcp ARGS` on the db file `db`, its output as bytes (decoded by the test)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DB_PATH=str(db), **env)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args],
                          capture_output=True, env=environment, timeout=60)


@pytest.fixture
def cjk_db(tmp_path: Path) -> Path:
    db = tmp_path / "cli.db"
    assert cli(db, "store", CJK, "--project", "web").returncode == 0
    return db


# --- 1. a stdout that cannot encode the text ----------------------------------------------------

@pytest.mark.parametrize("encoding", ["cp1252", "latin-1", "ascii"])
@pytest.mark.parametrize("args", [("recall", "连接池", "--project", "web", "--block", "800"),
                                  ("recall", "连接池", "--json"),
                                  ("list",),
                                  ("list", "--json")])
def test_the_cli_writes_utf8_to_a_pipe_its_encoding_cannot_fill(
        cjk_db: Path, encoding: str, args: tuple[str, ...]) -> None:
    """A Windows redirect (cp1252), PYTHONIOENCODING=latin-1: the answer comes out whole, as
    UTF-8, where a 38-line UnicodeEncodeError traceback came out before."""
    done = cli(cjk_db, *args, PYTHONIOENCODING=encoding, COLUMNS="200")
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode()
    out = done.stdout.decode("utf-8")
    assert ("连接池" in out) and (CJK in out or args[0] == "list" and "--json" not in args)


def test_the_cli_writes_an_ellipsis_to_a_latin1_pipe(tmp_path: Path) -> None:
    """Even "…" alone (a cut item) failed on latin-1."""
    db = tmp_path / "cli.db"
    assert cli(db, "store", "Deploys wait for the smoke tests… then go out").returncode == 0
    done = cli(db, "list", PYTHONIOENCODING="latin-1", COLUMNS="200")
    assert done.returncode == 0 and "tests… then" in done.stdout.decode("utf-8")


def test_the_cli_shows_question_marks_on_a_terminal_that_cannot_show_the_text(
        cjk_db: Path) -> None:
    """A terminal displays its own encoding: UTF-8 bytes there would be garbage, so what it
    cannot show is written "?" and the rest as it is."""
    leader, follower = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DB_PATH=str(cjk_db), PYTHONIOENCODING="latin-1")
    proc = subprocess.Popen([sys.executable, "-m", "semantic_memory", "recall", "连接池",
                             "--block", "800"], stdout=follower, stderr=subprocess.PIPE,
                            env=environment)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert proc.wait(60) == 0 and b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    assert "??????? 20???? config/db.yaml" in shown.decode("latin-1")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start_service(tmp_path_factory.mktemp("svc"))
    yield service
    service.stop()


@pytest.mark.parametrize("encoding", ["cp1252", "latin-1"])
def test_a_hook_delivers_a_cjk_block_whatever_stdout_encodes(
        service: Service, tmp_path: Path, encoding: str) -> None:
    """The Claude Code hook logged `injected` and printed nothing: every non-Latin injection
    was lost on a cp1252 stdout. Its answer is UTF-8 JSON, as the harness reads it."""
    project = tmp_path / "shop"
    project.mkdir()
    with service.client() as http:
        assert http.post("/ingest", json={"content": CJK, "project": "shop"}).status_code == 200
    run = run_hook("claude-code", "UserPromptSubmit",
                   {"session_id": encoding, "prompt": "连接池的大小是多少", "cwd": str(project)},
                   hook_env(tmp_path, service.url, PYTHONIOENCODING=encoding))
    assert run.returncode == 0
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == "injected" and "warning" not in entry, entry
    assert CJK in run.json()["hookSpecificOutput"]["additionalContext"]
