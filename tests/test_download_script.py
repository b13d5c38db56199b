"""scripts/download_model.sh, served a local GGUF through a file:// URL (no network here)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "download_model.sh"


def run(url: str, dest: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MEMORY_MODEL_URL=url)
    return subprocess.run(["bash", str(SCRIPT), str(dest)], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)


def test_downloads_once_and_prints_the_export_line(tmp_path: Path) -> None:
    source = tmp_path / "model.gguf"
    source.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    dest = tmp_path / "models"
    first = run(source.as_uri(), dest)
    assert first.returncode == 0, first.stderr
    exported = first.stdout.strip().splitlines()[-1]
    assert exported.startswith("export MEMORY_MODEL_PATH=")
    path = Path(shlex.split(exported.split("=", 1)[1])[0])
    assert path == dest / "model.gguf" and path.read_bytes() == source.read_bytes()
    assert "memory-mcp backfill" in first.stderr
    again = run(source.as_uri(), dest)
    assert again.returncode == 0 and "already present" in again.stderr
    assert again.stdout == first.stdout


def test_refuses_what_is_not_a_gguf_file(tmp_path: Path) -> None:
    page = tmp_path / "error.html"
    page.write_text("<html>rate limited</html>")
    result = run(page.as_uri(), tmp_path / "models")
    assert result.returncode == 1
    assert "did not return a GGUF file" in result.stderr
    assert list((tmp_path / "models").iterdir()) == []  # no partial file left behind
