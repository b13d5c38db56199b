"""Storing text a memory already holds, with another kind or new tags, answered `duplicate`
and kept the memory's kind and tags: the caller believed it had tagged the memory. A
duplicate still only refreshes the memory (a plain store of known text, whose kind is the
default, must not rewrite what a person chose), and its result now says what was not applied
(`not_applied`) and which update applies it (`reason`). Real engines on both stores (the
batch path, and the row-by-row path a near-duplicate channel takes), a real service's REST
and /mcp, and the CLI."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from semantic_memory.channels import Channel, Deferrable, Prepares
from semantic_memory.config import Settings
from semantic_memory.hookspecs import hookimpl
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from test_service_mcp import call
from test_service_support import (Service, http_session, memory_mcp_command, service_env,
                                  start_service)

PNPM = "Use pnpm in the web repo"


class NearDuplicates(Channel, Prepares):
    """A channel that prepares a value per memory: ingest then takes the row-by-row path.
    Its `find_duplicate` answers the oldest live memory holding the same words in any order
    and any project, as a careless plugin might."""

    name = "anyorder"

    def prepare(self, memories: Any) -> list[Any]:
        return [None] * len(memories)

    def index(self, conn: Any, memories: Any, prepared: Any = None) -> None:
        pass

    def search(self, conn: Any, query: str, k: int, filters: Any) -> list[Any]:
        return []

    def find_duplicate(self, conn: Any, memory: NewMemory, prepared: Any) -> int | None:
        words = sorted(memory.content.lower().split())
        rows = conn.execute("SELECT id, content FROM memories WHERE deleted = 0 "
                            "ORDER BY id").fetchall()
        return next((i for i, text in rows if sorted(text.lower().split()) == words), None)


class Plugin:
    @staticmethod
    @hookimpl
    def register_channels(register: Any, settings: Settings) -> None:
        register(NearDuplicates())


class Queued(NearDuplicates, Deferrable):
    """The same, prepared later by the embedding queue (`Writer.catch_up`), as vectors are
    where the service runs."""

    name = "anyorder-queued"

    def __init__(self) -> None:
        self.done: set[int] = set()

    def prepare(self, memories: Any) -> list[Any]:
        return [m.content for m in memories]  # a value the queue stores (a vector's place)

    def index(self, conn: Any, memories: Any, prepared: Any = None) -> None:
        if prepared:  # not at ingest, which defers this channel: by the queue
            self.done.update(m.id for m in memories)

    def pending_ids(self, conn: Any, limit: int) -> list[int]:
        rows = conn.execute("SELECT id FROM memories WHERE deleted = 0 ORDER BY id").fetchall()
        return [i for (i,) in rows if i not in self.done][:limit]

    def pending_count(self, conn: Any) -> int:
        return len(self.pending_ids(conn, 1_000_000))


class QueuedPlugin:
    @staticmethod
    @hookimpl
    def register_channels(register: Any, settings: Settings) -> None:
        register(Queued())


@pytest.fixture(params=["batch", "row-by-row"])
def engines(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryEngine]:
    plugins = [Plugin] if request.param == "row-by-row" else []
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "memory.db")), plugins=plugins)
    yield engine
    engine.close()


@pytest.mark.both_stores
def test_a_duplicate_says_which_kind_and_tags_it_did_not_apply(engine: MemoryEngine) -> None:
    first = engine.store_one(NewMemory(PNPM, project="web", tags=["js"])).uid
    again = engine.store_one(NewMemory(PNPM, project="web", kind="preference",
                                       tags=["js", "tooling"]))
    assert (again.status, again.uid) == ("duplicate", first)
    assert again.not_applied == {"kind": "preference", "tags": ["tooling"]}
    assert again.reason is not None and "\n" not in again.reason
    assert f"memory {first} already holds this text, as kind 'fact' with tags ['js']" \
        in again.reason
    assert f"`memory-mcp update {first} --kind preference --tag js --tag tooling`" \
        in again.reason
    held = engine.get(first)
    assert held is not None and (held.kind, held.tags) == ("fact", ["js"])  # unchanged
    # what the memory has already (or fewer tags) is no news: a plain duplicate
    plain = engine.store_one(NewMemory(PNPM, project="web"))
    assert (plain.status, plain.not_applied, plain.reason) == ("duplicate", None, None)
    assert set(plain.to_dict()) == {"status", "uid"}
    # nor is the default kind, which a store naming no kind has: no request to say was lost
    chosen = engine.store_one(NewMemory("Deploys are frozen on Fridays", kind="decision")).uid
    unnamed = engine.store_one(NewMemory("Deploys are frozen on Fridays"))
    assert (unnamed.uid, unnamed.not_applied, unnamed.reason) == (chosen, None, None)
    assert engine.get(chosen).kind == "decision"  # type: ignore[union-attr]


def test_both_write_paths_and_a_batch_say_it(engines: MemoryEngine) -> None:
    engine = engines
    first = engine.store_one(NewMemory(PNPM, project="web")).uid
    results = engine.ingest([NewMemory(PNPM, project="web", tags=["tooling"]),
                             NewMemory("Lint with biome", project="web"),
                             NewMemory("Lint with biome", project="web", kind="decision")])
    assert [r.status for r in results] == ["duplicate", "new", "duplicate"]
    assert results[0].uid == first and results[0].not_applied == {"tags": ["tooling"]}
    # the same text earlier in the same batch
    assert results[2].uid == results[1].uid and results[2].not_applied == {"kind": "decision"}


def test_a_near_duplicate_of_another_project_is_not_merged(tmp_path: Path) -> None:
    """A channel's near-duplicate in another project is not believed: the memory is stored
    in its own project (merged, it would be filed, and recalled, under the other one)."""
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "memory.db")), plugins=[Plugin])
    try:
        api = engine.store_one(NewMemory("deploys run on Fridays", project="api")).uid
        web = engine.store_one(NewMemory("Fridays deploys run on", project="web"))
        same = engine.store_one(NewMemory("Fridays deploys run on", project="api"))
    finally:
        engine.close()
    assert web.status == "new" and web.uid != api
    assert (same.status, same.uid) == ("duplicate", api)  # the channel works within one


def test_the_embedding_queue_merges_no_near_duplicate_of_another_project(
        tmp_path: Path) -> None:
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "memory.db")),
                          plugins=[QueuedPlugin])
    try:
        engine.writer.defer = True  # what the service's embedding queue sets
        api = engine.store_one(NewMemory("deploys run on Fridays", project="api")).uid
        web = engine.store_one(NewMemory("Fridays deploys run on", project="web")).uid
        twin = engine.store_one(NewMemory("Fridays deploys run on", project="api")).uid
        assert engine.writer.catch_up() == 3
        kept = {uid: engine.get(uid) for uid in (api, web, twin)}
    finally:
        engine.close()
    assert not kept[api].deleted and not kept[web].deleted  # type: ignore[union-attr]
    assert kept[twin].deleted  # type: ignore[union-attr]  # merged within its project


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("notapplied"))
    yield running
    running.stop()


def test_rest_and_mcp_pass_it_on(service: Service) -> None:
    with service.client() as http:
        first = http.post("/ingest", json={"content": PNPM, "project": "rest"}).json()["uid"]
        again = http.post("/ingest", json={"content": PNPM, "project": "rest",
                                           "kind": "preference", "tags": ["tooling"]}).json()
    assert again["status"] == "duplicate" and again["uid"] == first
    assert again["not_applied"] == {"kind": "preference", "tags": ["tooling"]}
    assert f"memory-mcp update {first} --kind preference --tag tooling" in again["reason"]

    async def main() -> dict[str, Any]:
        async with http_session(service.mcp_url) as session:
            await call(session, "memory_store", {"content": PNPM, "project": "mcp"})
            return await call(session, "memory_store", {
                "content": PNPM, "project": "mcp", "kind": "preference", "tags": ["tooling"]})

    told = anyio.run(main)
    assert told["status"] == "duplicate"
    assert told["not_applied"] == {"kind": "preference", "tags": ["tooling"]}
    assert "memory_update" in told["reason"]


def test_cli_store_json_says_it(tmp_path: Path) -> None:
    env = service_env(tmp_path)

    def store(*args: str) -> dict[str, Any]:
        done = subprocess.run([*memory_mcp_command(), "store", PNPM, "--json", *args], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = store()["uid"]
    again = store("--kind", "preference", "--tag", "tooling")
    assert (again["status"], again["uid"]) == ("duplicate", first)
    assert again["not_applied"] == {"kind": "preference", "tags": ["tooling"]}
    plain = subprocess.run([*memory_mcp_command(), "store", PNPM, "--kind", "decision"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and plain.stdout == f"duplicate {first}\n", plain
    assert plain.stderr.startswith("not applied: kind 'decision'"), plain.stderr
    assert f"memory-mcp update {first} --kind decision" in plain.stderr, plain.stderr
