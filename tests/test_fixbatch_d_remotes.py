"""Which repository a checkout's remote names, as git reads it: a relative local remote is the
folder it points at (two unrelated repositories whose `origin` is `../shared.git` are two
projects), a `file://` URL is the path it names, a hand-edited config is read as git reads it
(quotes, trailing comments, `[Remote "origin"]`, a shorthand's `insteadOf`), and the usual
SSH host aliases and Azure DevOps' spellings name the repository as its HTTPS clone does.
The hooks (Python) and the opencode plugin (TypeScript) name every case alike."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import hook_env, hook_log, run_hook
from test_opencode_plugin import node_eval
from test_service_support import Service, start_service

from semantic_memory.harness.project import detect_project, normalise_remote


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          timeout=30, env=env)
    return done.stdout.strip()


def repo(path: Path, remote: str | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    if remote is not None:
        git(path, "remote", "add", "origin", remote)
    return path


def both(folders: list[Path]) -> list[str]:
    """Each folder's project as the hooks name it, checked equal to the plugin's."""
    named = [detect_project(folder) for folder in folders]
    assert node_eval("detectProject", [[str(f)] for f in folders]) == named
    return named


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = start_service(tmp_path / "svc")
    yield running
    running.stop()


def remember_then_ask(env: dict[str, str], stored_in: Path, asked_in: Path) -> str:
    """A "remember" prompt in one checkout, then a question in another: what is injected."""
    for cwd, text in ((stored_in, "remember: the sparrow deploy uses the blue-green script"),
                      (asked_in, "how does the sparrow deploy work?")):
        done = run_hook("claude-code", "UserPromptSubmit", {
            "session_id": f"s-{cwd.name}", "cwd": str(cwd), "hook_event_name": "UserPromptSubmit",
            "prompt": text}, env, cwd=cwd)
        assert done.returncode == 0, done.stderr
    return done.stdout


def test_two_repositories_whose_remote_is_the_same_relative_path_are_two_projects(
        service: Service, tmp_path: Path) -> None:
    """`origin = ../shared.git` in a/x and in b/y: git fetches from a/shared.git and from
    b/shared.git, so what a hook remembers in one is not injected in the other (both were
    the project `../shared`); a clone of a/shared.git by its path is a/x's project."""
    for bare in ("a", "b"):
        git(tmp_path, "init", "-q", "--bare", str(tmp_path / bare / "shared.git"))
    x, y = repo(tmp_path / "a" / "x", "../shared.git"), repo(tmp_path / "b" / "y", "../shared.git")
    by_path = repo(tmp_path / "c", str(tmp_path / "a" / "shared.git"))
    assert both([x, y, by_path]) == [str(tmp_path / "a" / "shared"),
                                     str(tmp_path / "b" / "shared"),
                                     str(tmp_path / "a" / "shared")]
    env = {**hook_env(tmp_path, service.url), "MEMORY_HOOK_BUDGET_S": "5"}
    assert "blue-green" not in remember_then_ask(env, x, y)
    assert "blue-green" in remember_then_ask(env, x, by_path)
    assert {e.get("project") for e in hook_log(tmp_path)} == {str(tmp_path / "a" / "shared"),
                                                              str(tmp_path / "b" / "shared")}


def test_a_file_url_clone_is_the_plain_path_clones_project(tmp_path: Path) -> None:
    """`git clone file:///…/lib.git` and `git clone /…/lib.git`: one repository (the first
    was `tmp/…/lib`, without its leading slash)."""
    bare = tmp_path / "lib.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    by_url = repo(tmp_path / "by-url", bare.as_uri())
    by_path = repo(tmp_path / "by-path", str(bare))
    assert both([by_url, by_path]) == [str(tmp_path / "lib")] * 2


#: Config texts git reads as the origin https://github.com/acme/shop.git (or a shorthand of it).
HAND_EDITED = {
    "quoted": '[remote "origin"]\n\turl = "https://github.com/acme/shop.git"\n',
    "semicolon": '[remote "origin"]\n\turl = https://github.com/acme/shop.git ; mirror\n',
    "hash": '[remote "origin"]\n\turl = https://github.com/acme/shop.git   # the main one\n',
    "quoted-comment": '[remote "origin"]\n\turl = "https://github.com/acme/shop.git" ; x\n',
    "section-case": '[Remote "origin"]\n\tURL = https://github.com/acme/shop.git\n',
    "old-form": "[remote.origin]\n\turl = https://github.com/acme/shop.git\n",
    "origin-first": '[remote "up"]\n\turl = https://gitlab.com/x/y\n'
                    '[REMOTE "origin"]\n\turl = https://github.com/acme/shop.git\n',
    "insteadof": '[remote "origin"]\n\turl = gh:acme/shop\n'
                 '[url "https://github.com/"]\n\tinsteadOf = gh:\n'
                 '[url "https://example.org/"]\n\tinsteadOf = g\n',
}


def test_a_hand_edited_config_is_read_as_git_reads_it(tmp_path: Path) -> None:
    """Each config names what `git ls-remote --get-url origin` says git fetches from
    (before: `github.com/acme/shop.git"`, `…shop.git ; mirror`, the folder's name for
    `[Remote "origin"]`, `gh/acme/shop`); a subsection's case counts (`[remote "Origin"]` is
    another remote)."""
    folders = []
    for name, text in HAND_EDITED.items():
        folder = repo(tmp_path / name)
        with open(folder / ".git" / "config", "a") as config:
            config.write(text)
        assert normalise_remote(git(folder, "ls-remote", "--get-url", "origin")) == \
            "github.com/acme/shop", name
        folders.append(folder)
    other_case = repo(tmp_path / "other-case")
    with open(other_case / ".git" / "config", "a") as config:
        config.write('[remote "Origin"]\n\turl = https://gitlab.com/a/b\n'
                     '[remote "origin"]\n\turl = https://github.com/acme/shop\n')
    assert both([*folders, other_case]) == ["github.com/acme/shop"] * (len(folders) + 1)


def test_a_shorthand_of_the_users_git_config_is_rewritten(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`gh:acme/shop` with `url."https://github.com/".insteadOf gh:` in ~/.gitconfig (where
    such shorthands usually live) or GIT_CONFIG_GLOBAL's file, as git reads them; a full URL
    is never rewritten (a mirror rule would rename a project whose memories are stored)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[url "https://github.com/"]\n\tinsteadOf = gh:\n'
                                     '[url "https://mirror.example/gh/"]\n'
                                     '\tinsteadOf = https://github.com/\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    short = repo(tmp_path / "short", "gh:acme/shop")
    full = repo(tmp_path / "full", "https://github.com/Acme/Shop.git")
    assert both([short, full]) == ["github.com/acme/shop"] * 2
    elsewhere = tmp_path / "elsewhere.gitconfig"
    elsewhere.write_text('[url "git@gitlab.com:"]\n\tinsteadOf = gh:\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(elsewhere))
    assert normalise_remote(git(short, "ls-remote", "--get-url", "origin")) == "gitlab.com/acme/shop"
    assert both([short]) == ["gitlab.com/acme/shop"]


#: Remotes of one repository: its HTTPS clone, SSH host aliases, SSH over port 443.
ALIASES = {
    "github.com/acme/shop": [
        "https://github.com/Acme/Shop.git", "git@github.com-work:Acme/Shop.git",
        "git@GitHub.com-personal:acme/shop", "ssh://git@ssh.github.com:443/acme/shop.git",
        "ssh://git@github.com-work/Acme/Shop.git"],
    "gitlab.com/team/api": ["https://gitlab.com/team/api.git", "git@gitlab.com-work:Team/Api.git",
                            "ssh://git@altssh.gitlab.com:443/team/api.git"],
    "bitbucket.org/team/tool": ["https://bitbucket.org/team/tool",
                                "git@bitbucket.org-ci:Team/Tool.git",
                                "ssh://git@altssh.bitbucket.org:443/team/tool.git"],
    "dev.azure.com/org/proj/repo": [
        "https://dev.azure.com/org/proj/_git/repo", "https://Org@dev.azure.com/Org/Proj/_git/Repo",
        "git@ssh.dev.azure.com:v3/org/proj/repo", "https://org.visualstudio.com/proj/_git/repo",
        "https://org.visualstudio.com/DefaultCollection/Proj/_git/Repo",
        "org@vs-ssh.visualstudio.com:v3/org/proj/repo"],
    # not an alias: a host of its own, its case kept
    "github.company.com/Acme/Shop": ["git@github.company.com:Acme/Shop.git"],
    "git.corp/org/_git/x/y": ["https://git.corp/org/_git/x/y"],
    # `.GIT` is `.git` where names are caseless, kept where a server may tell cases apart
    "github.com/org/repo": ["https://GitHub.com/Org/Repo.GIT", "git@github.com:Org/Repo.Git"],
    "git.corp/Team/App.GIT": ["https://git.corp/Team/App.GIT"],
    # an IPv6-literal host whole: two servers are two projects
    "[fd00::1]/team/app": ["https://[fd00::1]/team/app.git", "git@[fd00::1]:team/app.git",
                           "ssh://git@[FD00::1]:2222/team/app.git"],
    "[fd00::2]/team/app": ["ssh://git@[fd00::2]:2222/team/app.git"],
}


def test_ssh_host_aliases_and_azure_spellings_name_the_https_clones_project(
        tmp_path: Path) -> None:
    """The multi-account `~/.ssh/config` alias `github.com-<suffix>`, SSH over port 443 and
    Azure DevOps' three URL forms (before: `github.com-work/Acme/Shop`, `ssh.github.com/…`,
    three Azure projects)."""
    cases = [(named, remote) for named, remotes in ALIASES.items() for remote in remotes]
    assert [normalise_remote(remote) for _, remote in cases] == [named for named, _ in cases]
    assert node_eval("normaliseRemote", [[remote] for _, remote in cases]) == \
        [named for named, _ in cases]
    folders = [repo(tmp_path / str(n), remote) for n, (_, remote) in enumerate(cases)]
    assert both(folders) == [named for named, _ in cases]
