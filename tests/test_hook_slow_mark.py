"""A slow service (it answers the `HEAD /` probe at once, a request only after the hook's
budget: a purge, an import's index merge, a locked store) costs one hook its budget, not every
hook of every turn: the first write that times out sets the slow mark (backoff.py), and the
writes after it go straight to the spool without a request, while recalls still try. The mark
ends by itself; a write the service takes deletes it. What was spooled is stored exactly once.

Real parts: a real service, real hook processes, and a TCP proxy in front of the service that
holds every answer but the probe's (as the QA's harness runs did)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import add_turn, hook_env, hook_log, run_hook, run_memory_mcp
from test_service_support import Service, start_service

from semantic_memory import backoff

BUDGET_S = "2"
#: Longer than the budget and its write grace: a held request never answers in time.
HOLD_S = 5.0
#: The slow mark's length here (MEMORY_HOOK_BACKOFF_S caps it): short, so the test sees it end.
MARK_S = "6"


class SlowProxy:
    """Forwards to the service; holds each answer but a HEAD's `delay` seconds. `requests`
    lists "METHOD /path" of every request forwarded, in arrival order."""

    def __init__(self, upstream: int, delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        self.requests: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(32)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            with client, socket.create_connection(("127.0.0.1", self.upstream)) as upstream:
                first = client.recv(65536)
                method, path = (first.split(b"\r\n", 1)[0].decode().split(" ") + ["", ""])[:2]
                self.requests.append(f"{method} {path}")
                upstream.sendall(first)
                hold = self.delay if method != "HEAD" else 0.0
                threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
                while chunk := upstream.recv(65536):
                    time.sleep(hold)  # before the answer's first bytes only
                    hold = 0.0
                    client.sendall(chunk)
                client.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    @staticmethod
    def _pipe(client: socket.socket, upstream: socket.socket) -> None:
        """The rest of the request body, client to service."""
        try:
            while chunk := client.recv(65536):
                upstream.sendall(chunk)
        except OSError:
            pass

    def writes(self) -> int:
        return self.requests.count("POST /ingest")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = start_service(tmp_path / "svc")
    yield running
    running.stop()


def session_end(tmp: Path, env: dict[str, str], session: str, said: str) -> dict:
    """Claude Code's SessionEnd for a one-exchange session; its hook-log line."""
    transcript = tmp / f"{session}.jsonl"
    add_turn(transcript, f"what did we decide about {said}?", f"We decided {said}.")
    done = run_hook("claude-code", "SessionEnd", {
        "session_id": session, "cwd": str(tmp), "transcript_path": str(transcript),
        "reason": "exit"}, env)
    assert (done.returncode, done.stdout) == (0, ""), done
    return hook_log(tmp)[-1]


def prompt(tmp: Path, env: dict[str, str], session: str, text: str) -> tuple[str, dict]:
    done = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": session, "cwd": str(tmp), "prompt": text}, env)
    assert done.returncode == 0, done
    return done.stdout, hook_log(tmp)[-1]


def test_after_one_write_met_a_slow_service_the_next_writes_spool_without_waiting(
        service: Service, tmp_path: Path) -> None:
    proxy = SlowProxy(int(service.url.rsplit(":", 1)[1]), HOLD_S)
    env = hook_env(tmp_path, proxy.url, MEMORY_HOOK_BUDGET_S=BUDGET_S,
                   MEMORY_HOOK_BACKOFF_S=MARK_S, MEMORY_PROJECT="slow-mark")
    state = tmp_path / "hooks.backoff.json"
    try:
        # 1. The first write waits its budget, is spooled, and the probe finds the service up.
        first = session_end(tmp_path, env, "s1", "to pin the redis fixture to database 7")
        assert first["outcome"] == "spooled", first
        assert first["detail"].endswith("slow, not hung, no back-off"), first
        assert proxy.writes() == 1
        mark = backoff.slow(state, proxy.url)
        assert mark is not None and mark.outcome == "slow", mark
        assert not state.exists(), "slow is not hung: no back-off"

        # 2. The next write, another session's, makes no request: spooled at once.
        second = session_end(tmp_path, env, "s2", "to freeze deploys on friday at noon")
        assert second["outcome"] == "spooled", second
        assert "spooled without waiting" in second["detail"], second
        assert proxy.writes() == 1, proxy.requests
        assert second["ms"] < first["ms"] / 3, (first["ms"], second["ms"])

        # 3. A recall still tries (it cannot be spooled), and a "remember" is spooled at once.
        recalls = proxy.requests.count("POST /recall")
        out, recall = prompt(tmp_path, env, "s3", "how do we pin the redis fixture?")
        assert recall["outcome"] == "timeout", recall
        assert proxy.requests.count("POST /recall") == recalls + 1
        out, remembered = prompt(tmp_path, env, "s4",
                                 "remember the canary deploy goes out at 06:00 UTC")
        assert remembered["outcome"] == "spooled", remembered
        assert "will store this as a memory" in out, out
        assert proxy.writes() == 1, proxy.requests
        assert len(list((tmp_path / "spool").glob("*.json"))) == 3

        # 4. The service is fast again: once the mark has run out, a write is made and stored,
        # and the stored write deletes the mark.
        proxy.delay = 0.0
        deadline = time.monotonic() + float(MARK_S) + 10
        while backoff.slow(state, proxy.url) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert backoff.slow(state, proxy.url) is None
        third = session_end(tmp_path, env, "s5", "to rotate the deploy key on tuesdays")
        assert third["outcome"] == "stored", third
        assert proxy.writes() >= 2, proxy.requests  # and the spool's, replayed after it
        assert not Path(backoff.slow_path(state)).exists()
    finally:
        proxy.close()

    # 5. Nothing lost or doubled: the spool replayed (by the last hook, else here), each write
    # is stored once (the first one reached the service after the hook gave up on it: its
    # replay is a duplicate).
    run_memory_mcp(hook_env(tmp_path, service.url), "spool", "replay")
    assert not list((tmp_path / "spool").glob("*.json"))
    with service.client() as http:
        stored = [m["content"] for m in http.get("/api/memories", params={
            "limit": 100, "project": "slow-mark"}).json()["items"]]
    for said in ("redis fixture to database 7", "freeze deploys on friday",
                 "canary deploy goes out at 06:00 UTC", "rotate the deploy key"):
        assert sum(said in content for content in stored) == 1, (said, stored)


def test_the_slow_mark_is_the_opencode_plugin_s_format(tmp_path: Path) -> None:
    """`hooks.slow.json` beside the back-off file, as backoff.ts reads and writes it; the
    service starting (`clear` without a URL) ends it with the back-off."""
    state = tmp_path / "hooks.backoff.json"
    url = "http://127.0.0.1:9"
    backoff.mark_slow(state, url, 20, "did not answer within the budget")
    data = json.loads((tmp_path / "hooks.slow.json").read_text())
    assert sorted(data) == ["detail", "outcome", "until", "url"]
    assert (data["outcome"], data["url"]) == ("slow", url)
    assert backoff.slow(state, url) is not None
    assert backoff.slow(state, "http://127.0.0.1:10") is None, "another URL's service"
    assert backoff.active(state, url) is None, "a slow mark is no back-off"
    assert backoff.slow(state, url, now=time.time() + 21) is None, "it runs out"
    backoff.mark_slow(state, url, 0, "0 = never")
    assert backoff.slow(state, url) is not None
    backoff.clear(state)
    assert not (tmp_path / "hooks.slow.json").exists()
    assert backoff.slow_seconds(30) == backoff.SLOW_S and backoff.slow_seconds(0) == 0
