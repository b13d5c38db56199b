"""Fixes from the "a new maintainer reads the code" review: a supersession cycle in an imported
file no longer hides its memories (the newest of the cycle is current, on SQLite and
PostgreSQL); remotes on IPv6-literal hosts keep their address whole and `.GIT` is `.git` on a
caseless host (Python and the opencode plugin alike); the opencode plugin reads its numeric
settings as the Python hooks do (what Python refuses it refuses, the same bounds)."""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_opencode_plugin import node_eval

from semantic_memory.harness.settings import HookSettings, SettingsError
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.remotes import normalise_remote, scp_like

# --- supersession cycles ------------------------------------------------------------------

#: uid -> (created_at, superseded_by) of an imported file with cycles in it.
CYCLES = {
    # A replaced by B, B by A: B is newer
    "a000000000000001": (1.0, "a000000000000002"), "a000000000000002": (2.0, "a000000000000001"),
    # three in a cycle, the middle one newest
    "b000000000000001": (1.0, "b000000000000002"), "b000000000000002": (3.0, "b000000000000003"),
    "b000000000000003": (2.0, "b000000000000001"),
    # a chain that runs into a cycle: the chain's head stays replaced, by the cycle's newest
    "c000000000000000": (9.0, "c000000000000001"),
    "c000000000000001": (1.0, "c000000000000002"), "c000000000000002": (2.0, "c000000000000001"),
    # no cycle: left as it is
    "d000000000000001": (1.0, "d000000000000002"), "d000000000000002": (2.0, None),
    # as old as each other: the larger uid (the rule is the same on every store)
    "e000000000000001": (5.0, "e000000000000002"), "e000000000000002": (5.0, "e000000000000001"),
}
WORDS = ["amber", "birch", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo",
         "juniper", "kestrel", "lagoon", "marble", "nickel", "opal"]


def _import(engine: MemoryEngine, memories: dict[str, tuple[float, str | None]]) -> int:
    items = [NewMemory(f"The {WORDS[n]} rack holds build cache shard {n}", uid=uid,
                       created_at=1_700_000_000 + at, updated_at=1_700_000_000 + at,
                       superseded_by=by)
             for n, (uid, (at, by)) in enumerate(memories.items())]
    results = engine.ingest(items, batch_is_session=False)
    assert all(r.status == "new" for r in results), results
    return engine.finish_import(len(items), 500)


@pytest.mark.both_stores
def test_a_supersession_cycle_leaves_its_newest_memory_current(engine: MemoryEngine) -> None:
    """Before, every memory on a cycle, or on a chain into one, was hidden for good: only a
    memory naming itself or no live memory was made current."""
    assert _import(engine, CYCLES) == 4  # one per cycle
    current = {m.uid for m in engine.list(RecallFilters(), 50, 0)}
    assert current == {"a000000000000002", "b000000000000002", "c000000000000002",
                       "d000000000000002", "e000000000000002"}
    by = {uid: engine.get(uid).superseded_by for uid in CYCLES}
    assert by == {uid: None if uid in current else replaced_by
                  for uid, (_, replaced_by) in CYCLES.items()}
    for uid in CYCLES:  # every memory's chain ends at a current one
        seen = set()
        while by[uid] is not None:
            assert uid not in seen
            seen.add(uid)
            uid = by[uid]
    with engine.store.write() as conn:
        assert engine.store.clear_dangling_supersessions(conn) == 0  # nothing left to break


@pytest.mark.both_stores
def test_an_imported_link_into_another_project_hides_nothing(engine: MemoryEngine) -> None:
    """An imported `superseded_by` naming a memory of another project (which `replaces`
    refuses with a 422) hid the memory from its own project for good (PostgreSQL QA)."""
    items = [NewMemory("The kestrel rack holds build cache shard 1", project="p",
                       uid="f000000000000001", superseded_by="f000000000000002"),
             NewMemory("The lagoon rack holds build cache shard 2", project="q",
                       uid="f000000000000002"),
             NewMemory("The marble rack holds build cache shard 3", project=None,
                       uid="f000000000000003", superseded_by="f000000000000004"),
             NewMemory("The nickel rack holds build cache shard 4", project=None,
                       uid="f000000000000004"),
             NewMemory("The opal rack holds build cache shard 5", project="p",
                       uid="f000000000000005", superseded_by="f000000000000006"),
             NewMemory("The amber rack holds build cache shard 6", project="p",
                       uid="f000000000000006")]
    results = engine.ingest(items, batch_is_session=False)
    assert all(r.status == "new" for r in results), results
    assert engine.finish_import(len(items), 500) == 1
    assert engine.get("f000000000000001").superseded_by is None
    assert "f000000000000001" in {m.uid for m in engine.list(RecallFilters(project="p"), 9, 0)}
    # a link within one project (the global one too) stays
    assert engine.get("f000000000000003").superseded_by == "f000000000000004"
    assert engine.get("f000000000000005").superseded_by == "f000000000000006"


def test_an_imported_cycle_is_found_by_recall_and_counted(tmp_path: Path) -> None:
    """The review's repro through the real CLI: A replaced by B and B by A, C by itself."""
    lines = [{"uid": "aaaaaaaaaaaaaaaa", "content": "the build cache lives on nas-1",
              "kind": "fact", "superseded_by": "bbbbbbbbbbbbbbbb"},
             {"uid": "bbbbbbbbbbbbbbbb", "content": "the build cache lives on nas-2",
              "kind": "fact", "superseded_by": "aaaaaaaaaaaaaaaa"},
             {"uid": "cccccccccccccccc", "content": "the release train leaves on fridays",
              "kind": "fact", "superseded_by": "cccccccccccccccc"}]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = {**os.environ, "HOME": str(tmp_path), "MEMORY_DB_PATH": str(tmp_path / "memory.db")}
    env.pop("MEMORY_PLUGIN_URL", None)

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert json.loads(cli("import", str(path))) == {"new": 3, "duplicate": 0, "rejected": 0,
                                                    "bad": 0, "current_again": 2}
    listed = json.loads(cli("list", "--json"))
    assert sorted(m["uid"] for m in listed) == ["bbbbbbbbbbbbbbbb", "cccccccccccccccc"]
    assert "bbbbbbbbbbbbbbbb" in cli("recall", "build cache nas")


# --- remotes on IPv6-literal hosts ---------------------------------------------------------

REMOTES = {
    "https://[fd00::1]/team/app.git": "[fd00::1]/team/app",
    "git@[fd00::1]:team/app.git": "[fd00::1]/team/app",
    "ssh://git@[FD00::1]:2222/team/app.git": "[fd00::1]/team/app",
    "ssh://git@[fd00::2]:2222/team/app.git": "[fd00::2]/team/app",
    "https://user:pw@[2001:db8::7]:8443/Team/App": "[2001:db8::7]/Team/App",
    "[fd00::3]:team/app": "[fd00::3]/team/app",
    "https://GitHub.com/Org/Repo.GIT": "github.com/org/repo",
    "git@gitlab.com:Team/Api.Git": "gitlab.com/team/api",
    "https://git.corp/Team/App.GIT": "git.corp/Team/App.GIT",  # may tell cases apart
    "https://github.com/org/repo.git": "github.com/org/repo",
}


def test_ipv6_hosts_stay_whole_and_dot_git_goes_in_any_case_where_names_are_caseless() -> None:
    """Before: `[fd00/team/app` for two servers, `[fd00/:1]:team/app` for scp-like, and
    `github.com/org/repo.git` for `.GIT`; the same in both copies."""
    assert {url: normalise_remote(url) for url in REMOTES} == REMOTES
    assert node_eval("normaliseRemote", [[url] for url in REMOTES]) == list(REMOTES.values())


SCP = re.compile(r"^(?:[^@/]+@)?(\[[^\]/\n]*\]|[^:/]+):(?!//)(.+)$")


def test_scp_like_reads_an_ipv6_host_whole_and_the_two_copies_agree() -> None:
    """The hand matcher is still its documented pattern, brackets included, and random
    remotes with brackets name the same project in Python and TypeScript."""
    rng = random.Random(5)
    samples = ["git@[fd00::1]:o/r", "[::1]:x", "[a]:", "[a:b]:", "[a/b]:x", "u@[a]b:c",
               "[a]://x", "[[a]]:x", "[a\n]:x", "[a]:x\n"]
    samples += ["".join(rng.choice("a@/:[]\n") for _ in range(rng.randint(0, 10)))
                for _ in range(20_000)]
    for url in samples:
        match = SCP.match(url)
        assert scp_like(url) == (match.groups() if match else None), repr(url)
    parts = ["git@", "ssh://", "https://", "u:p@", "[fd00::1]", "[FD00::2]", ":2222", ":",
             "/", "Team", "app", ".git", ".GIT", "github.com", "[", "]", "@"]
    urls = ["".join(rng.choice(parts) for _ in range(rng.randint(1, 7))) for _ in range(3000)]
    assert node_eval("normaliseRemote", [[url] for url in urls]) == \
        [normalise_remote(url) for url in urls]


# --- the opencode plugin's numeric settings ------------------------------------------------

#: variable -> (the plugin's setting, its unit: a Python value -> the plugin's)
NUMERIC = {
    "MEMORY_PORT": ("port", int),
    "MEMORY_PLUGIN_LIMIT": ("limit", int),
    "MEMORY_PLUGIN_BUDGET_CHARS": ("budgetChars", int),
    "MEMORY_HOOK_BUDGET_S": ("budgetMs", lambda s: math.floor(s * 1000 + 0.5)),
    "MEMORY_HOOK_BACKOFF_S": ("backoffMs", lambda s: math.floor(s * 1000 + 0.5)),
}
VALUES = ["7", " 7 ", "+7", "007", "1_0", "1__0", "_1", "1_", "0x10", "0X1F90", "1e1", "5.0",
          "5.", ".5", "1E-1", "2e0", "1e1_0", "1.5_0", "1_.5", "１０", "𝟓", "١٢", "\u20007\u3000",
          "\x857", "\ufeff7", "\x1c7", "\t8\n", "-0", "-1", "0", "inf", "-inf", "Infinity",
          "nan", "1e400", "0.05", "0.049", "60", "60.5", "3600", "3601", "49", "50", "51",
          "499", "500", "1000000", "1000001", "2000000", "9007199254740991", "1 0", "+-1", "8080", "65535",
          "65536", "0b11", "0o7", "1,5", "ten", "٫5"]


def test_the_plugin_reads_numeric_settings_as_the_python_hooks_do(tmp_path: Path) -> None:
    """Each value of each numeric variable, through `HookSettings.from_env` (which
    tests/test_hook_cpu.py holds equal to `Settings`) and the plugin's `loadSettings`: where
    Python refuses it, the plugin does (and uses its default); where Python takes it, the
    plugin takes the same number. Before, the plugin took `0x10`, `1e1`, `5.0` as numbers,
    refused full-width digits, and both now refuse a budget over 1,000,000 characters (what a
    recall's `budget_chars` takes)."""
    cases, expected = [], []
    for variable, (setting, unit) in NUMERIC.items():
        for value in VALUES:
            env = {"MEMORY_DB_PATH": str(tmp_path / "memory.db"), variable: value}
            try:
                python = HookSettings.from_env(env)
            except SettingsError:
                expected.append((variable, value, "refused"))
            else:
                expected.append((variable, value, unit(getattr(python, variable[7:].lower()))))
            cases.append((variable, value, setting, env))
    results = node_eval("loadSettings", [[env] for *_, env in cases])
    got = []
    for (variable, value, setting, _), result in zip(cases, results, strict=True):
        problems = [p["name"] for p in result["problems"]]
        assert problems in ([], [variable]), result["problems"]
        got.append((variable, value, "refused" if problems else result["settings"][setting]))
    assert got == expected
