"""`export --markdown` onto a disk that fills leaves the earlier export's file as it was: each
file is written beside its place and renamed over it once whole (the writer `export -o` uses),
and the error names the file. It used to write in place, leaving a cut file whose cut last
entry (no uid comment) `import DIR` then stored as a new memory. A full disk is simulated with a
file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) in a real subprocess; real SQLite file."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import string
import subprocess
import sys
from pathlib import Path

import pytest

#: Below the second export's file (about 350 KB), above the first's (about 50 KB).
LIMIT = 128 * 1024


def cli(tmp: Path, *args: str, stdin: str | None = None,
        limited: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(tmp / "db" / "memory.db"), HOME=str(tmp / "home"))
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], input=stdin,
                          capture_output=True, text=True, env=env, timeout=120,
                          preexec_fn=cap if limited else None)


def cap() -> None:
    """In the child: a write past LIMIT fails with EFBIG, as a full disk fails one."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def facts(first: int, count: int) -> str:
    rng = random.Random(first)
    return "".join(json.dumps({"content": f"fact {n} " + " ".join(
        "".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(60)),
        "project": "bulk"}) + "\n" for n in range(first, first + count))


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, bytes]:
    """A first export (100 memories) in `md/`, then a store grown to 700: (its file, bytes)."""
    assert cli(tmp_path, "import", "-", stdin=facts(0, 100)).returncode == 0
    first = cli(tmp_path, "export", "--markdown", str(tmp_path / "md"))
    assert first.returncode == 0, first.stderr
    [file] = (tmp_path / "md").glob("bulk-*.md")
    assert file.stat().st_size < LIMIT
    assert cli(tmp_path, "import", "-", stdin=facts(100, 600)).returncode == 0
    return file, file.read_bytes()


SCRIPT = """
import json, resource, signal, sys
from pathlib import Path
from semantic_memory.cli import _open_output
from semantic_memory.config import Settings
from semantic_memory.importers import export_markdown
from semantic_memory.pipeline import MemoryEngine

engine = MemoryEngine(Settings(db_path=sys.argv[1], device="cpu"))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]),) * 2)
try:
    export_markdown(engine, Path(sys.argv[2]), _open_output)
except OSError as exc:
    print(json.dumps({"errno": exc.errno, "filename": exc.filename}))
"""


def test_a_failed_export_leaves_the_earlier_file_and_names_its_file(
        tmp_path: Path, exported: tuple[Path, bytes]) -> None:
    """Engine level, with the writer the CLI's `export -o` uses."""
    file, before = exported
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "db" / "memory.db"),
                           str(file.parent), str(LIMIT)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"errno": 27, "filename": str(file)}  # EFBIG
    assert file.read_bytes() == before
    assert sorted(p.name for p in file.parent.iterdir()) == [file.name]  # no temp file left
    back = json.loads(cli(tmp_path, "import", str(file.parent), "--json").stdout)["totals"]
    assert (back["new"], back["unchanged"]) == (0, 100)


def test_the_cli_on_a_full_disk_keeps_the_earlier_export(
        tmp_path: Path, exported: tuple[Path, bytes]) -> None:
    file, before = exported
    failed = cli(tmp_path, "export", "--markdown", str(file.parent), limited=True)
    assert failed.returncode == 1
    assert failed.stderr.strip().endswith(f"cannot write {file}: File too large"), failed.stderr
    assert file.read_bytes() == before
    assert sorted(p.name for p in file.parent.iterdir()) == [file.name]
    back = json.loads(cli(tmp_path, "import", str(file.parent), "--json").stdout)["totals"]
    assert (back["new"], back["unchanged"]) == (0, 100)
    # with room again, the export goes through and reads back unchanged
    assert cli(tmp_path, "export", "--markdown", str(file.parent)).returncode == 0
    again = json.loads(cli(tmp_path, "import", str(file.parent), "--json").stdout)["totals"]
    assert (again["new"], again["unchanged"]) == (0, 700)
