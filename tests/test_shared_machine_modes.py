"""On a machine several OS users share, under the usual umask 022, what this project writes into
the data folder is its owner's only: folders 0700, files 0600. Before, a fresh user's first
session start with MEMORY_PLUGIN_AUTOSTART=1 made the data folder 0755 and `service.log` 0644,
and the vector channel's ANN index (`memory.db.vectors/`: a quantized copy of every memory's
embedding) was 0755 with 0644 files. Real processes: a real hook that spawns a real service,
a real `memory-mcp reindex` over MiniLM vectors (docs/security.md "Who else can read the
files")."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

from harness_support import closed_port, hook_env, run_hook
from test_ops_support import run_cli

#: The files docs/security.md lists with the umask's mode: they hold no memory and no token.
UMASKS_OWN = {"memory.db.server.json", "hooks.backoff.json"}
PLUGINS = "bm25_porter,bm25_trigram,vector,llama_cpp"


def umask_022() -> None:
    os.umask(0o022)


def modes(folder: Path) -> dict[str, int]:
    """The mode of `folder` and of everything under it, by path relative to its parent."""
    found = {folder.name: stat.S_IMODE(folder.stat().st_mode)}
    for path in folder.rglob("*"):
        if path.name not in UMASKS_OWN:
            found[str(path.relative_to(folder.parent))] = stat.S_IMODE(path.stat().st_mode)
    return found


def owners_only(folder: Path) -> dict[str, int]:
    """The paths under `folder` (itself included) that someone else may read: {} when none."""
    return {name: mode for name, mode in modes(folder).items()
            if mode != (0o700 if (folder.parent / name).is_dir() else 0o600)}


def test_autostart_into_a_fresh_home_keeps_the_data_folder_its_owners(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = hook_env(tmp_path, None, MEMORY_PLUGIN_AUTOSTART="1", MEMORY_HOOK_BUDGET_S="20",
                   MEMORY_DEVICE="cpu", MEMORY_PORT=str(closed_port()))
    del env["MEMORY_DB_PATH"]  # the default place, under a home nothing has written to yet
    folder = home / ".local" / "share" / "memory-mcp"
    run = run_hook("example", "session-start", {"session": "s", "cwd": str(tmp_path)}, env,
                   preexec_fn=umask_022)
    discovery = folder / "memory.db.server.json"
    assert run.returncode == 0, run.stderr
    pid = json.loads(discovery.read_text())["pid"]
    try:
        for _ in range(400):  # the service has made its db (and the hook its log) meanwhile
            if (folder / "memory.db").exists():
                break
            time.sleep(0.05)
        assert {"service.log", "autostart.lock", "memory.db"} <= {p.name for p in folder.iterdir()}
        assert owners_only(folder) == {}
    finally:
        os.kill(pid, signal.SIGTERM)


def test_reindex_writes_the_ann_index_for_its_owner_only(tmp_path: Path, minilm_path: Path
                                                         ) -> None:
    data = tmp_path / "data"
    env = {"MEMORY_DB_PATH": str(data / "memory.db"), "MEMORY_MODEL_PATH": str(minilm_path),
           "MEMORY_PLUGINS": PLUGINS, "MEMORY_VECTOR_ANN": "on", "HOME": str(tmp_path / "home")}
    for text in ("the deploy script lives in ops/deploy.sh",
                 "rotate the database credentials every ninety days",
                 "the staging cluster runs in eu-west-1"):
        done = run_cli(tmp_path, "store", text, preexec=umask_022, **env)
        assert done.returncode == 0, done.stderr
    done = run_cli(tmp_path, "backfill", preexec=umask_022, **env)
    assert done.returncode == 0, done.stderr
    done = run_cli(tmp_path, "reindex", preexec=umask_022, **env)
    assert done.returncode == 0, done.stderr
    vectors = data / "memory.db.vectors"
    assert [p.name for p in vectors.glob("index-*.usearch")] and (vectors / "stamp.json").exists()
    assert json.loads((vectors / "stamp.json").read_text())["count"] == 3
    assert owners_only(vectors) == {}
