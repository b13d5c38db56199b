"""The service while another process holds the SQLite store's write lock (lock_support.py):

- writes waiting for the lock never hold up `/health`, `/recall` or MCP reads (they wait in
  threads of their own: service/threads.py), through REST and MCP alike;
- the service answers before its start-up maintenance, which runs once the lock is free and
  reclaims space (merge, VACUUM) only for a real share of the store;
- SIGTERM with writes waiting answers them JSON 503, stores none and exits at once; a request
  cut off by the shutdown gets JSON, not uvicorn's plain-text 500.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from lock_support import PLUGINS, cli, held, seed, serving, write_lock_held
from test_service_support import http_session, start_service

from semantic_memory.config import Settings
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.service.edges import BodyGuard

#: More writes than anyio's default thread pool (40): before, they took every thread.
WRITES = 60


def give_up_after(url: str, budget_s: float, content: str) -> None:
    """A hook's write: it gives up after its budget (the service goes on with the request)."""
    try:
        httpx2.post(f"{url}/ingest", json={"content": content}, timeout=budget_s)
    except httpx2.HTTPError:
        pass



def test_health_and_recall_answer_while_writes_wait_for_the_lock(tmp_path: Path) -> None:
    service = start_service(tmp_path)
    try:
        with service.client() as client:
            client.post("/ingest", json={"content": "the deploy script lives in ops/deploy.sh"}
                        ).raise_for_status()
            with write_lock_held(tmp_path / "memory.db") as holder:
                hooks = [threading.Thread(target=give_up_after,
                                          args=(service.url, 1.0, f"build cache note {i}"))
                         for i in range(WRITES)]
                for hook in hooks:
                    hook.start()
                for hook in hooks:
                    hook.join()  # every write is in the service, waiting for the lock
                health = client.get("/health")
                recall = client.post("/recall", json={"query": "deploy script"})
                assert held(holder), "/health and /recall waited for the write lock"
            assert health.status_code == 200 and health.json()["ok"]
            assert recall.status_code == 200
            assert "ops/deploy.sh" in recall.json()["block"]
    finally:
        service.stop()


def test_mcp_writes_waiting_for_the_lock_hold_up_no_read(tmp_path: Path) -> None:
    service = start_service(tmp_path)
    stored: list[bool] = []
    try:
        with service.client() as client:
            client.post("/ingest", json={"content": "the deploy script lives in ops/deploy.sh"}
                        ).raise_for_status()

            async def scenario(holder: subprocess.Popen[str]) -> tuple[Any, Any, bool]:
                async with http_session(service.mcp_url) as session:
                    async def store(i: int) -> None:
                        result = await session.call_tool(
                            "memory_store", {"content": f"release checklist item {i}"})
                        stored.append(not result.is_error)

                    async with anyio.create_task_group() as tg:
                        for i in range(WRITES):
                            tg.start_soon(store, i)
                        await anyio.sleep(1.0)  # the calls on their way in
                        recall = await session.call_tool("memory_recall",
                                                         {"query": "deploy script"})
                        health = await anyio.to_thread.run_sync(client.get, "/health")
                        still_held = held(holder)
                        assert holder.stdin is not None
                        holder.stdin.close()  # release: the stores go through
                    return recall, health, still_held

            with write_lock_held(tmp_path / "memory.db") as holder:
                recall, health, still_held = anyio.run(scenario, holder)
            assert still_held, "memory_recall or /health waited for the write lock"
            assert not recall.is_error and "ops/deploy.sh" in recall.content[0].text
            assert health.status_code == 200
            assert stored == [True] * WRITES
    finally:
        service.stop()


def test_the_service_answers_before_its_start_up_maintenance(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    seed(db, [f"note {i} about the release process" for i in range(30)], forget=1)
    with write_lock_held(db) as holder:
        service = start_service(tmp_path, MEMORY_PLUGINS=PLUGINS, MEMORY_FORGET_GRACE_DAYS="0")
        try:
            with service.client() as client:
                counts = client.get("/health").json()["counts"]
            assert held(holder), "the service waited for the lock before answering"
        except BaseException:
            service.stop()
            raise
    try:
        assert counts["forgotten"] == 1  # not purged yet: the maintenance waits its turn
        with service.client() as client:
            for _ in range(300):  # released: the maintenance runs in the background
                counts = client.get("/health").json()["counts"]
                if counts["forgotten"] == 0:
                    break
                time.sleep(0.1)
        assert counts == {"memories": 29, "forgotten": 0, "injections": 0}
    finally:
        service.stop()
    # One forgotten memory in 30 is no reason to hold the lock for a VACUUM.
    assert "'soft_deleted': 1" in service.stderr() and "'vacuumed': False" in service.stderr()


def test_start_up_maintenance_reclaims_space_only_for_a_real_share(tmp_path: Path) -> None:
    for forget, vacuumed in ((1, False), (10, True)):
        db = tmp_path / f"forget-{forget}.db"
        seed(db, [f"note {i} about the release process" for i in range(30)], forget=forget)
        engine = MemoryEngine(Settings(db_path=str(db), device="cpu", plugins=PLUGINS,
                                       forget_grace_days=0))
        try:
            report = engine.startup_maintenance()
        finally:
            engine.close()
        assert report is not None and report.soft_deleted == forget
        assert report.vacuumed is vacuumed


def test_sigterm_with_writes_waiting_for_the_lock(tmp_path: Path) -> None:
    service = start_service(tmp_path, MEMORY_PLUGINS=PLUGINS)
    answers: list[httpx2.Response | Exception] = []
    connected = threading.Barrier(11)

    def write(i: int) -> None:
        with service.client() as client:
            client.get("/health")  # connected: the write goes out on this connection
            connected.wait()
            try:
                answers.append(client.post("/ingest", json={"content": f"shutdown note {i}"}))
            except httpx2.HTTPError as exc:
                answers.append(exc)

    db = tmp_path / "memory.db"
    with write_lock_held(db) as holder:
        writers = [threading.Thread(target=write, args=(i,)) for i in range(10)]
        for writer in writers:
            writer.start()
        connected.wait()
        time.sleep(0.5)  # the writes on their way in
        service.proc.send_signal(signal.SIGTERM)
        for writer in writers:
            writer.join()
        code = service.proc.wait(60)
        exited_while_held = held(holder)
    service.stop()
    assert code == 0
    assert exited_while_held, "the service waited for the write lock to exit"
    for answer in answers:
        assert isinstance(answer, httpx2.Response), answer
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"] == "application/json"
    assert not [m for m in cli(tmp_path, "export").stdout.splitlines() if "shutdown note" in m]


def test_a_request_cut_off_by_the_shutdown_gets_json(tmp_path: Path) -> None:
    """Whatever still runs when uvicorn's graceful shutdown times out is cancelled; uvicorn
    would answer a plain-text 500 while a write's thread may go on to store it."""
    entered = threading.Event()

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        entered.set()
        await anyio.sleep_forever()

    settings = Settings(db_path=str(tmp_path / "memory.db"), device="cpu", plugins=PLUGINS)
    answers: list[httpx2.Response] = []
    engine = MemoryEngine(settings)
    try:
        with serving(engine, graceful_s=0.5, app=BodyGuard(slow, settings)) as (url, server):
            asking = threading.Thread(target=lambda: answers.append(
                httpx2.post(f"{url}/ingest", json={"content": "x"}, timeout=60)))
            asking.start()
            assert entered.wait(30)
            server.should_exit = True
            asking.join()
    finally:
        engine.close()
    assert answers[0].status_code == 503
    assert answers[0].headers["content-type"] == "application/json"
    assert "stopped before answering" in answers[0].json()["error"]
