"""Forget means forget, for a resumed session: a hook's flush (SessionEnd, PreCompact) sends the
whole session again, so the exchanges a user forgot in between came back as new live memories
at the resumed session's end. Now text a forgotten memory of the project holds, coming from
automatic capture (source `compaction` or `tool`, sent at once or replayed from the spool), is
answered as a duplicate of that forgotten memory (`reason` "forgotten: …"), which stays
forgotten; an explicit store of the same text (`/ingest` as chat, `memory-mcp store`) is a
new memory, since a person asked again. On both stores."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from harness_support import add_turn, closed_port, hook_env, session_end
from test_service_support import Service, memory_mcp_command, start_service

pytestmark = pytest.mark.both_stores
SECRET = "The billing contact at Zyxwvutsrq Holdings is Jane Roe, on her phone 555-0199."
TESTS = "Run pnpm test in the web folder; it uses vitest for every package."


def service_for(tmp: Path, store_kind: str) -> Service:
    if store_kind == "postgresql":
        import pg

        return start_service(tmp, MEMORY_DB_URL=pg.new_database())
    return start_service(tmp, MEMORY_PLUGINS="bm25_porter,bm25_trigram")


def live_holding(service: Service, word: str) -> list[str]:
    with service.client() as http:
        return [m["uid"] for m in http.get("/api/memories", params={"limit": 100}).json()["items"]
                if word in m["content"]]


def forget_all(service: Service, word: str) -> list[str]:
    uids = live_holding(service, word)
    with service.client() as http:
        for uid in uids:
            assert http.delete(f"/api/memories/{uid}").status_code == 200
    return uids


def forgotten(service: Service) -> dict[str, str]:
    """uid -> forgotten_at of the forgotten memories."""
    with service.client() as http:
        return {m["uid"]: m["forgotten_at"] for m in http.get("/api/forgotten").json()["items"]}


def test_a_resumed_sessions_flush_does_not_bring_back_what_was_forgotten(
        tmp_path: Path, store_kind: str) -> None:
    (tmp_path / "repo").mkdir()
    transcript = tmp_path / "transcript.jsonl"
    add_turn(transcript, "Who is the billing contact at Zyxwvutsrq Holdings?", SECRET)
    add_turn(transcript, "How do we run the web tests?", TESTS)
    service = service_for(tmp_path / "svc", store_kind)
    try:
        assert "2 new" in session_end(tmp_path, service.url, transcript)["detail"]
        gone = forget_all(service, "Zyxwvutsrq")
        assert len(gone) == 1
        before = forgotten(service)
        # the session is resumed (`claude --continue`): one more exchange, then it ends again
        add_turn(transcript, "And the deploy command?", "Run make deploy from the repo root.")
        line = session_end(tmp_path, service.url, transcript)
        assert line["outcome"] == "stored" and "1 new, 2 already stored" in line["detail"], line
        assert live_holding(service, "Zyxwvutsrq") == []
        assert live_holding(service, "make deploy") != []
        assert forgotten(service) == before  # still forgotten, its grace not restarted
        # the same text sent as a flush does is answered as the forgotten memory's duplicate
        with service.client() as http:
            flushed = http.post("/ingest", json={"items": [{
                "exchange": {"user": "Who is the billing contact at Zyxwvutsrq Holdings?",
                             "reply": SECRET},
                "kind": "note", "source": "compaction", "project": "repo"}]}).json()
        piece = flushed["results"][0]["pieces"][0]
        assert (piece["status"], piece["uid"], piece["duplicate"]) == ("duplicate", gone[0], True)
        assert piece["reason"].startswith(f"forgotten: memory {gone[0]} ")
        assert flushed["new"] == 0
    finally:
        service.stop()


def test_an_explicit_store_of_forgotten_text_is_a_new_memory(tmp_path: Path,
                                                             store_kind: str) -> None:
    service = service_for(tmp_path / "svc", store_kind)
    text = "The Qwertzuiop build cache lives in /var/cache/qwertz and is wiped on Sundays"
    try:
        with service.client() as http:
            tool = http.post("/ingest", json={"content": text, "kind": "artifact",
                                              "source": "tool", "project": "web"}).json()
            assert http.delete(f"/api/memories/{tool['uid']}").status_code == 200
            again = http.post("/ingest", json={"content": text, "kind": "artifact",
                                               "source": "tool", "project": "web"}).json()
            assert (again["status"], again["uid"]) == ("duplicate", tool["uid"])
            assert again["reason"].startswith("forgotten:")
            # a person (or an agent's memory_store) asking again is heard
            asked = http.post("/ingest", json={"content": text, "project": "web"}).json()
            assert asked["status"] == "new" and asked["uid"] != tool["uid"]
            assert "reason" not in asked
        assert live_holding(service, "Qwertzuiop") == [asked["uid"]]
    finally:
        service.stop()


@pytest.mark.sqlite_only
def test_the_cli_store_of_forgotten_text_is_a_new_memory(tmp_path: Path) -> None:
    env = hook_env(tmp_path, None)
    text = "Asdfghjkl staging runs behind the VPN gateway on port 8443"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                              text=True, timeout=60)

    first = cli("store", text, "--project", "web", "--json")
    assert first.returncode == 0, first.stderr
    uid = json.loads(first.stdout)["uid"]
    assert cli("forget", uid).returncode == 0
    again = cli("store", text, "--project", "web", "--json")
    assert again.returncode == 0, again.stderr
    stored = json.loads(again.stdout)
    assert stored["status"] == "new" and stored["uid"] != uid


def test_a_spooled_flush_replayed_later_does_not_bring_back_what_was_forgotten(
        tmp_path: Path, store_kind: str) -> None:
    (tmp_path / "repo").mkdir()
    transcript = tmp_path / "transcript.jsonl"
    add_turn(transcript, "Who is the billing contact at Zyxwvutsrq Holdings?", SECRET)
    service = service_for(tmp_path, store_kind)
    try:
        assert "1 new" in session_end(tmp_path, service.url, transcript)["detail"]
        forget_all(service, "Zyxwvutsrq")
        add_turn(transcript, "And the deploy command?", "Run make deploy from the repo root.")
        # the service is unreachable at the session's end: the flush goes to the spool
        down = f"http://127.0.0.1:{closed_port()}"
        assert session_end(tmp_path, down, transcript)["outcome"] == "spooled"
        replayed = subprocess.run([*memory_mcp_command(), "spool", "replay"],
                                  env=hook_env(tmp_path, service.url), capture_output=True,
                                  text=True, timeout=60)
        assert replayed.returncode == 0, replayed.stderr
        assert live_holding(service, "make deploy") != []
        assert live_holding(service, "Zyxwvutsrq") == []
    finally:
        service.stop()
