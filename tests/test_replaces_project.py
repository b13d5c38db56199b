"""`replaces` names a memory of the new memory's own project (global for global): filed in
`web`, a correction of an `api` fact hid that fact from api's recall while only web recalled
the new text, and a project memory replacing a global one hid it from every project. Such a
write is refused in one line saying where the memory is and what to do instead (store the
new text there, or forget it), over every interface, and nothing is stored. Automatic
supersession (a restated fact) never crosses projects either. Real engines on both stores,
a real service, its /mcp, the proxy, the CLI and the spool replay."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from semantic_memory import spool
from semantic_memory.errors import InvalidMemory
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.service.mcp_proxy import SPOOL_SOURCE
from test_service_mcp import call, call_error
from test_service_mcp_proxy import proxy_session
from test_service_support import Service, http_session, memory_mcp_command, start_service

ALEMBIC = "Database migrations are managed by Alembic; run alembic upgrade head"
RUNNER = "Use the new migration runner"


def assert_refused(message: str, uid: str, replaced: str | None, new: str | None) -> None:
    """The one line: where the replaced memory is, and what to do instead."""
    assert "\n" not in message.strip() and "…" not in message, message
    there = "as a global memory" if replaced is None else f"in project {replaced!r}"
    assert (f"replaces: memory {uid} is {'global' if replaced is None else there}, not "
            f"{'global' if new is None else repr(new)}: store the new text {there} instead, "
            f"or forget {uid}") in message, message


@pytest.mark.both_stores
@pytest.mark.parametrize(("replaced", "new"), [("api", "web"), (None, "web"), ("api", None)],
                         ids=["project->project", "global<-project", "project<-global"])
def test_replaces_across_projects_is_refused_and_stores_nothing(
        engine: MemoryEngine, replaced: str | None, new: str | None) -> None:
    old = engine.store_one(NewMemory(ALEMBIC, project=replaced)).uid
    before = engine.stats()["memories"]
    with pytest.raises(InvalidMemory) as refused:
        engine.store_one(NewMemory(RUNNER, project=new, replaces=old))
    assert_refused(str(refused.value), old, replaced, new)
    assert engine.stats()["memories"] == before
    # the fact stays current where it lives, and nothing went anywhere else
    hits = engine.recall("alembic migrations", k=5, filters=RecallFilters(project=replaced)
                         if replaced else RecallFilters(global_only=True))
    assert [h.memory.uid for h in hits] == [old]
    assert engine.get(old).superseded_by is None  # type: ignore[union-attr]
    assert not engine.recall("runner", k=5)


@pytest.mark.both_stores
@pytest.mark.parametrize("project", ["api", None], ids=["project", "global"])
def test_replaces_within_one_project_still_supersedes(engine: MemoryEngine,
                                                      project: str | None) -> None:
    old = engine.store_one(NewMemory(ALEMBIC, project=project)).uid
    new = engine.store_one(NewMemory(RUNNER, project=project, replaces=old))
    assert new.status == "new" and new.supersedes == [old]
    assert engine.get(old).superseded_by == new.uid  # type: ignore[union-attr]


@pytest.mark.both_stores
@pytest.mark.parametrize(("first", "second"), [("api", "web"), (None, "web"), ("api", None)],
                         ids=["project->project", "global->project", "project->global"])
def test_a_restated_fact_never_supersedes_across_projects(
        engine: MemoryEngine, first: str | None, second: str | None) -> None:
    """The rule's own supersession stays within one project; the same pair in one project is
    superseded (the rule does fire on it)."""
    old = engine.store_one(NewMemory("The staging database listens on port 5432",
                                     project=first)).uid
    newer = engine.store_one(NewMemory("The staging database listens on port 5433",
                                       project=second))
    assert newer.status == "new" and newer.supersedes is None
    assert engine.get(old).superseded_by is None  # type: ignore[union-attr]
    same = engine.store_one(NewMemory("The staging database listens on port 5434",
                                      project=first))
    assert same.supersedes == [old]


# --- every interface says the same line; nothing is stored -----------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("replaces"))
    yield running
    running.stop()


def ingest(service: Service, content: str, project: str | None = None) -> str:
    body: dict[str, Any] = {"content": content}
    if project is not None:
        body["project"] = project
    with service.client() as http:
        answer = http.post("/ingest", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()["uid"]


def total(service: Service) -> int:
    with service.client() as http:
        return http.get("/api/memories", params={"include_superseded": "true",
                                                 "limit": 1}).json()["total"]


def still_current(service: Service, uid: str) -> bool:
    with service.client() as http:
        return http.get(f"/api/memories/{uid}").json().get("superseded_by") is None


def test_rest_refuses_in_one_line_single_and_batch(service: Service) -> None:
    old = ingest(service, f"{ALEMBIC} (rest)", "api")
    before = total(service)
    with service.client() as http:
        single = http.post("/ingest", json={"content": RUNNER, "project": "web",
                                            "replaces": old})
        batch = http.post("/ingest", json={"items": [
            {"content": f"{RUNNER} (batch)", "project": "web", "replaces": old},
            {"content": "The web app deploys from main (batch)", "project": "web"}]})
    assert single.status_code == 422, single.text
    assert_refused(single.json()["error"], old, "api", "web")
    assert batch.status_code == 200, batch.text
    refused, stored = batch.json()["results"]
    assert refused["status"] == "rejected" and stored["status"] == "new"
    assert_refused(refused["reason"], old, "api", "web")
    assert total(service) == before + 1  # the batch's other item alone
    assert still_current(service, old)


def test_mcp_and_proxy_refuse_as_a_tool_error(service: Service, tmp_path: Path) -> None:
    """/mcp serves every folder: the engine's line. The proxy (bound to its workspace's
    project, `web`) may replace global memories, so a global one is what reaches the engine's
    check there."""
    api = ingest(service, f"{ALEMBIC} (mcp)", "api")
    shared = ingest(service, f"{ALEMBIC} (shared)")
    before = total(service)

    async def main() -> tuple[str, str]:
        async with http_session(service.mcp_url) as session:
            over_mcp = await call_error(session, "memory_store", {
                "content": RUNNER, "project": "web", "replaces": api})
        async with proxy_session(tmp_path / "proxy", service.url,
                                 MEMORY_PROJECT="web") as session:
            proxied = await call_error(session, "memory_store", {
                "content": RUNNER, "replaces": shared})
            # a replacement in the right place goes through
            fixed = await call(session, "memory_store", {
                "content": f"{RUNNER} (shared)", "project": "", "replaces": shared})
            assert fixed["supersedes"] == [shared], fixed
        return over_mcp, proxied

    over_mcp, proxied = anyio.run(main)
    assert_refused(over_mcp, api, "api", "web")
    assert_refused(proxied, shared, None, "web")
    assert total(service) == before + 1  # the global replacement alone
    assert still_current(service, api)


def test_cli_store_exits_1_with_the_line(tmp_path: Path) -> None:
    from test_service_support import service_env

    env = service_env(tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                              text=True, timeout=120)

    stored = cli("store", ALEMBIC, "--project", "api", "--json")
    assert stored.returncode == 0, stored.stderr
    old = json.loads(stored.stdout)["uid"]
    refused = cli("store", RUNNER, "--project", "web", "--replaces", old)
    assert refused.returncode == 1, refused
    assert_refused(refused.stderr, old, "api", "web")
    listed = cli("list", "--json", "--include-superseded")
    items = json.loads(listed.stdout)
    items = items["items"] if isinstance(items, dict) else items
    assert [i["uid"] for i in items] == [old] and "superseded_by" not in items[0]


def test_a_spooled_store_is_refused_at_replay_with_the_line(tmp_path: Path) -> None:
    """What the proxy spools while the service is down (its body, its harness) replays
    through /ingest's code: refused, it lands in `rejected/` with the line, and is not
    stored."""
    first = start_service(tmp_path)
    old = ingest(first, ALEMBIC, "api")
    first.stop()
    spool.append(tmp_path / "spool", "/ingest", {
        "content": RUNNER, "kind": "fact", "source": "chat", "tags": [], "project": "web",
        "replaces": old}, harness=SPOOL_SOURCE, event="memory_store")
    second = start_service(tmp_path)
    try:
        deadline = time.monotonic() + 30
        while not spool.pending(tmp_path / "spool" / spool.REJECTED) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        [refused] = spool.pending(tmp_path / "spool" / spool.REJECTED)
        assert_refused(json.loads(refused.read_text())["rejected"], old, "api", "web")
        assert total(second) == 1 and still_current(second, old)
    finally:
        second.stop()
