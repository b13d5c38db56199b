"""`import claude-code` reads Claude Code's auto-memory from the folder Claude Code itself uses:
a mangled name over 200 characters is cut there plus `-` and a hash of the path, a non-BMP
character is two dashes (one per UTF-16 code unit), and a git worktree uses its main checkout's
folder. The expected names are the real Claude Code 2.1.332 binary's answers (asked offline, the
path is in the system prompt it sends); the slow test asks it live."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness_support import HARNESS_BIN
from model_mock import ModelMock

from semantic_memory.harness.project import find_repository
from semantic_memory.importers import claude_auto_memory_dir

#: (the folder Claude Code was started in, the folder name under ~/.claude/projects it used)
PINNED = [
    ("/tmp/ccpin/app", "-tmp-ccpin-app"),
    ("/tmp/ccpin/rocket-🚀-proj", "-tmp-ccpin-rocket----proj"),
    ("/tmp/ccpin/日本語-repo", "-tmp-ccpin-----repo"),
    ("/tmp/ccpin/" + "a" * 189, "-tmp-ccpin-" + "a" * 189),  # 200: not cut
    ("/tmp/ccpin/" + "a" * 190, "-tmp-ccpin-" + "a" * 189 + "-3oo0kf"),
    ("/tmp/ccpin/" + "/".join(f"very-long-folder-name-{i:02d}" for i in range(1, 10))
     + "/project",
     "-tmp-ccpin-" + "-".join(f"very-long-folder-name-{i:02d}" for i in range(1, 8))
     + "-very-long-fold-2j4hgz"),
    ("/tmp/qa_fs/ccpath/" + "/".join(f"very-long-folder-name-{i:02d}" for i in range(1, 10))
     + "/project",
     "-tmp-qa-fs-ccpath-" + "-".join(f"very-long-folder-name-{i:02d}" for i in range(1, 8))
     + "-very-lo-jex9lo"),
    ("/tmp/ccpin/" + "/".join(f"deep-{i:02d}-🚀" for i in range(1, 25)),
     "-tmp-ccpin-" + "".join(f"deep-{i:02d}----" for i in range(1, 18)) + "de-6evzh4"),
]
GIT = ["git", "-c", "user.email=a@b", "-c", "user.name=a", "-c", "protocol.file.allow=always"]


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(folder))
    return folder


@pytest.mark.parametrize(("path", "name"), PINNED, ids=lambda v: str(v)[:24])
def test_the_folder_name_is_claude_codes(config: Path, path: str, name: str) -> None:
    assert claude_auto_memory_dir(Path(path)) == config / "projects" / name / "memory"


def git(*args: str) -> None:
    subprocess.run([*GIT, *args], check=True, capture_output=True, timeout=60)


def repositories(root: Path) -> dict[str, Path]:
    """A checkout with a worktree, a bare repository with a worktree, a submodule."""
    main, bare, outer = root / "app", root / "repo.git", root / "super"
    git("init", "-q", str(main))
    git("-C", str(main), "commit", "-q", "--allow-empty", "-m", "first")
    git("-C", str(main), "worktree", "add", "-q", str(root / "app-wt"))
    git("clone", "-q", "--bare", str(main), str(bare))
    git("-C", str(bare), "worktree", "add", "-q", str(root / "bare-wt"))
    git("init", "-q", str(outer))
    git("-C", str(outer), "submodule", "add", "-q", str(main), "sub")
    return {"main": main, "worktree": root / "app-wt", "bare": bare,
            "bare-worktree": root / "bare-wt", "submodule": outer / "sub"}


def folder_name(path: Path) -> str:
    return claude_auto_memory_dir(path).parent.name


def test_a_worktree_shares_its_main_checkouts_folder(tmp_path: Path, config: Path) -> None:
    """As Claude Code does: a linked worktree is keyed by its main checkout, a bare
    repository's worktree by that repository; a submodule keeps its own folder."""
    found = repositories(tmp_path.resolve())
    assert folder_name(found["worktree"]) == folder_name(found["main"])
    assert folder_name(found["bare-worktree"]) == folder_name(found["bare"])
    assert folder_name(found["bare"]).endswith("-repo-git")
    assert folder_name(found["submodule"]).endswith("-super-sub")
    # a `.git` file naming a gitdir that does not point back is not taken for a worktree
    fake = tmp_path / "fake"
    fake.mkdir()
    admin = found["main"] / ".git" / "worktrees" / "app-wt"
    (fake / ".git").write_text(f"gitdir: {admin}\n", encoding="utf-8")
    assert folder_name(fake) != folder_name(found["main"])


# --- live, against the real binary -------------------------------------------------------------


def claude_folder(cwd: Path, home: Path) -> list[str]:
    """The auto-memory folder names in what Claude Code sends, started in `cwd`."""
    with ModelMock() as mock:
        env = {**os.environ, "HOME": str(home), "ANTHROPIC_BASE_URL": mock.url,
               "ANTHROPIC_API_KEY": "dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_AUTOUPDATER": "1"}
        env.pop("CLAUDE_CONFIG_DIR", None)
        subprocess.run([str(HARNESS_BIN / "claude"), "-p", "hi"], cwd=cwd, env=env,
                       capture_output=True, timeout=180, stdin=subprocess.DEVNULL)
        text = "\n".join(mock.bodies())
    marker = str(home / ".claude" / "projects") + "/"
    names = set()
    for piece in text.split(marker)[1:]:
        name, sep, _ = piece.partition("/memory")
        if sep and "/" not in name:
            names.add(name)
    return sorted(names)


@pytest.mark.slow
def test_the_real_claude_code_agrees_and_its_notes_are_imported(tmp_path: Path) -> None:
    """Claude Code started in each folder names its auto-memory folder; a note put there is
    what `memory-mcp import claude-code`, run in the same folder, imports."""
    import test_harness_e2e

    test_harness_e2e._install_binaries()
    root = tmp_path.resolve()
    found = repositories(root)
    home = root / "home"
    home.mkdir()
    long = root.joinpath(*[f"a-rather-long-folder-name-{i:02d}" for i in range(1, 9)], "project")
    emoji = root / "rocket-🚀-proj"
    for folder in (long, emoji, found["worktree"] / "src"):
        folder.mkdir(parents=True)
    cases = [found["main"], found["worktree"], found["worktree"] / "src", long, emoji]
    assert len(folder_name(long)) > 200
    for n, cwd in enumerate(cases):
        names = claude_folder(cwd, home)
        top = find_repository(cwd)[0] or cwd
        assert names == [folder_name(top)], (cwd, names)
        notes = home / ".claude" / "projects" / names[0] / "memory"
        notes.mkdir(parents=True, exist_ok=True)
        (notes / f"note{n}.md").write_text(f"Deploys of case {n} go out on Thursdays\n",
                                           encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
        env.update(HOME=str(home), MEMORY_DB_PATH=str(root / f"db{n}" / "memory.db"))
        env.pop("CLAUDE_CONFIG_DIR", None)
        done = subprocess.run([sys.executable, "-m", "semantic_memory", "import", "claude-code",
                               "--json"], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        files = [f["path"] for f in report["files"]]
        assert any(p.endswith(f"/memory/note{n}.md") for p in files), (cwd, files)
