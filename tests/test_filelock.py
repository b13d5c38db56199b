"""The shared build lock (semantic_memory/filelock.py): one holder at a time, across open files
as across processes, released when its block ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from semantic_memory.filelock import exclusive


def test_one_holder_at_a_time_and_released_after(tmp_path: Path) -> None:
    lock = tmp_path / "build.lock"
    with exclusive(lock) as first:
        assert first
        with exclusive(lock) as second:  # another open file of the same lock
            assert not second
        other = subprocess.run(
            [sys.executable, "-c", "import sys; from pathlib import Path; "
             "from semantic_memory.filelock import exclusive\n"
             "with exclusive(Path(sys.argv[1])) as held: print(held)", str(lock)],
            capture_output=True, text=True, check=True)
        assert other.stdout.strip() == "False"  # nor another process
    with exclusive(lock) as again:
        assert again
