"""Which project a clone is: remotes that differ only in letter case on a host whose names are
case-insensitive (GitHub, GitLab, Bitbucket) are one project, for the hooks and for every
filter; other hosts keep the case they were written in."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import hook_env, hook_log, run_hook
from test_service_support import Service, start_service

from semantic_memory.harness.project import detect_project, normalise_remote
from semantic_memory.models import project_name


def clone(path: Path, remote: str) -> Path:
    """A git repository at `path` whose origin is `remote` (nothing fetched)."""
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True, capture_output=True)
    subprocess.run(["git", "remote", "add", "origin", remote], cwd=path, check=True,
                   capture_output=True)
    return path


@pytest.mark.parametrize(("remotes", "named"), [
    (("https://github.com/acme/app.git", "https://github.com/Acme/App",
      "git@GitHub.com:ACME/app.git"), "github.com/acme/app"),
    (("https://gitlab.com/Team/Api.git", "git@gitlab.com:team/api.git"), "gitlab.com/team/api"),
    (("https://bitbucket.org/Acme/Tool", "ssh://git@bitbucket.org/acme/tool.git"),
     "bitbucket.org/acme/tool"),
])
def test_clones_whose_remotes_differ_in_case_are_one_project(tmp_path: Path,
                                                              remotes: tuple[str, ...],
                                                              named: str) -> None:
    for n, remote in enumerate(remotes):
        assert detect_project(clone(tmp_path / str(n), remote)) == named, remote


def test_other_hosts_keep_the_case_of_their_names() -> None:
    """A self-hosted server may tell `Acme/App` from `acme/app`."""
    assert normalise_remote("https://git.acme.dev/Acme/App.git") == "git.acme.dev/Acme/App"
    assert normalise_remote("git@GIT.acme.dev:Acme/App.git") == "git.acme.dev/Acme/App"
    assert project_name("git.acme.dev/Acme/App") == "git.acme.dev/Acme/App"
    assert project_name("Acme/App") == "Acme/App"  # a folder's name, not a host's path
    assert project_name("github.com") == "github.com"


def test_a_named_repository_is_the_project_a_clone_detects() -> None:
    """A project typed by hand (`--project`, MEMORY_PROJECT, a filter) names the clone's."""
    for typed in ("github.com/Acme/App", " GitHub.com/ACME/app ", "github.com/acme/app"):
        assert project_name(typed) == normalise_remote("https://github.com/Acme/App.git")


@pytest.mark.parametrize("remote", [
    "https://github.com/Acme/App.git", "git@gitlab.com-work:Team/Api.git", "/srv/git/lib.git",
    "https://dev.azure.com/Org/Proj/_git/Repo", "git@git.acme.dev:Acme/App.git", "../rel.git/",
    "ssh://git@ssh.github.com:443/acme/app", "file:///srv/git/lib.git"])
def test_the_service_keeps_the_name_a_hook_sends(remote: str) -> None:
    """What a hook names a clone (`remotes.normalise_remote`) is a name the service stores as
    it is (`models.project_name`), and the remote typed in its place names it too."""
    named = normalise_remote(remote)
    assert project_name(named) == named == project_name(remote)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = start_service(tmp_path / "svc")
    yield running
    running.stop()


def test_a_memory_of_one_clone_is_recalled_in_a_clone_spelt_otherwise(service: Service,
                                                                       tmp_path: Path) -> None:
    """What a hook remembers in a clone of https://github.com/acme/app.git is injected in one
    of https://github.com/Acme/App (before: two projects, nothing injected)."""
    lower = clone(tmp_path / "lower", "https://github.com/acme/app.git")
    upper = clone(tmp_path / "upper", "https://github.com/Acme/App")
    env = {**hook_env(tmp_path, service.url), "MEMORY_HOOK_BUDGET_S": "5"}
    stored = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": "s-a", "cwd": str(lower), "hook_event_name": "UserPromptSubmit",
        "prompt": "remember: the kiwi staging cluster runs on eu-west-1"}, env, cwd=lower)
    assert stored.returncode == 0, stored.stderr
    asked = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": "s-b", "cwd": str(upper), "hook_event_name": "UserPromptSubmit",
        "prompt": "where does the kiwi staging cluster run?"}, env, cwd=upper)
    assert asked.returncode == 0, asked.stderr
    assert "eu-west-1" in asked.stdout, asked.stdout
    assert {entry.get("project") for entry in hook_log(tmp_path)} == {"github.com/acme/app"}
