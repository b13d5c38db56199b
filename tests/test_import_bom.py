"""Markdown saved with a UTF-8 byte order mark (Notepad++ "UTF-8-BOM", Windows PowerShell 5.1,
Visual Studio): the importer reads past it. An export edited in such an editor used to be read
as plain notes (every entry stored again as a new global memory, the header line as one more),
and a CLAUDE.md's first heading or front matter became a memory. Real CLI, real SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BOM = b"\xef\xbb\xbf"


def cli(tmp: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(tmp / "db" / "memory.db"), HOME=str(tmp / "home"))
    env.pop("CLAUDE_CONFIG_DIR", None)
    done = subprocess.run([sys.executable, "-m", "semantic_memory", *args], capture_output=True,
                          text=True, env=env, timeout=120, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done


def listed(tmp: Path) -> list[dict]:
    return json.loads(cli(tmp, "list", "--json", "--limit", "100").stdout)


def with_bom(path: Path) -> None:
    """What a BOM-writing editor saves."""
    path.write_bytes(BOM + path.read_bytes())


def test_an_export_saved_with_a_bom_round_trips(tmp_path: Path) -> None:
    for n in (1, 2, 3):
        cli(tmp_path, "store", "--project", "web", f"bom roundtrip fact {n} about pelicans")
    out = tmp_path / "md"
    cli(tmp_path, "export", "--markdown", str(out))
    [file] = out.glob("web-*.md")
    with_bom(file)
    before = {m["uid"]: m for m in listed(tmp_path)}

    back = json.loads(cli(tmp_path, "import", str(out), "--json").stdout)
    assert back["totals"]["new"] == 0 and back["totals"]["unchanged"] == 3, back
    assert back["files"][0]["project"] == "web"
    assert {m["uid"]: m for m in listed(tmp_path)} == before

    # an entry edited in that editor updates its memory in place
    text = file.read_bytes().replace(b"fact 2 about pelicans", b"fact 2 about herons")
    file.write_bytes(text)
    edited = json.loads(cli(tmp_path, "import", str(out), "--json").stdout)["totals"]
    assert (edited["new"], edited["updated"], edited["unchanged"]) == (0, 1, 2)
    after = listed(tmp_path)
    assert sorted(m["uid"] for m in after) == sorted(before)
    assert "bom roundtrip fact 2 about herons" in {m["content"] for m in after}
    assert all(m["project"] == "web" and "\ufeff" not in m["content"] for m in after)


def test_an_export_saved_with_a_bom_is_rewritten_by_the_next_export(tmp_path: Path) -> None:
    """The next export into the folder takes that file for the earlier export it is."""
    cli(tmp_path, "store", "--project", "web", "the staging port is 6543")
    out = tmp_path / "md"
    cli(tmp_path, "export", "--markdown", str(out))
    [file] = out.glob("web-*.md")
    with_bom(file)
    cli(tmp_path, "store", "--project", "web", "deploys go out on Thursdays")
    again = cli(tmp_path, "export", "--markdown", str(out))
    assert f"{file}: 2 memories" in again.stdout
    assert file.read_text(encoding="utf-8").startswith("<!-- semantic-memory-mcp export:")


def test_claude_md_files_with_a_bom(tmp_path: Path) -> None:
    """The first heading stays the bullets' context, front matter stays out."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "CLAUDE.md").write_bytes(BOM + b"# Web\n\n- use pnpm, never npm\n")
    (repo / "CLAUDE.local.md").write_bytes(BOM + b"---\nname: local\n---\n- local rule: port 3001\n")
    cli(tmp_path, "import", "claude-code", cwd=repo)
    assert sorted(m["content"] for m in listed(tmp_path)) == ["Web: use pnpm, never npm",
                                                             "local rule: port 3001"]
