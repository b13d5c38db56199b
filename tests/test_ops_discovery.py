"""A discovery file the service cannot write as it starts (its folder not there yet or not
writable, a full disk) is written by its look every DISCOVERY_CHECK_S once it can be, and a
failed write leaves no temporary file behind."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from test_ops_support import wait_for
from test_service_support import start_service, wait_gone

from semantic_memory.service.runner import DISCOVERY_CHECK_S


@pytest.mark.parametrize("blocker", ["file", "folder"])
def test_a_discovery_file_that_could_not_be_written_is_written_later(
        tmp_path: Path, blocker: str) -> None:
    """A file where its folder should be (the folder cannot be made), or a folder where the
    file should be (the rename fails, after the temporary file was written)."""
    folder = tmp_path / "run"
    path = folder / "memory.db.server.json"
    if blocker == "file":
        folder.write_text("in the way")
    else:
        (path / "inside").mkdir(parents=True)
    service = start_service(tmp_path / "svc", MEMORY_DISCOVERY_FILE=str(path))
    try:
        time.sleep(DISCOVERY_CHECK_S + 1)  # it tries again meanwhile, and fails again
        assert service.proc.poll() is None
        if blocker == "folder":
            assert sorted(p.name for p in folder.iterdir()) == [path.name]  # no .tmp left
            shutil.rmtree(path)
        else:
            folder.unlink()
        assert wait_for(path.is_file, 6 * DISCOVERY_CHECK_S)
        assert json.loads(path.read_text())["pid"] == service.info["pid"]
        assert sorted(p.name for p in folder.iterdir()) == [path.name]
    finally:
        assert service.stop() == 0
    assert wait_gone(path)
    log = service.stderr().splitlines()
    failures = [line for line in log if "cannot write the discovery file" in line]
    assert len(failures) == 1, log  # once, not at every look
    assert failures[0].startswith(f"memory-mcp: cannot write the discovery file {path}: ")
    assert failures[0].endswith(f"; tried again every {DISCOVERY_CHECK_S:g} s")
    assert f"memory-mcp: discovery file {path} written" in log
