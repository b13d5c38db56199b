"""Injection reports after a forget: once a memory is purged, the reports that named it lose its
uid and their `query` (the user's prompt it was recalled for); before, they kept both for as long
as MEMORY_TTL_INJECTION_DAYS (90 days). The report stays, with its time, harness and size. And
while a memory waits forgotten, the most-injected list (/api/stats, /api/injections' summary)
shows it without its text (`content` null), as it showed a purged one; it showed the text. On
both stores, through the real service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_service_support import Service, start_service

pytestmark = pytest.mark.both_stores
TOKEN = "fixbatch-g-injections-token-0123456789"
PROMPT = "who at Zyxwvutsrq Holdings signs the late invoices?"


def service_for(tmp: Path, store_kind: str) -> Service:
    if store_kind == "postgresql":
        import pg

        return start_service(tmp, MEMORY_DB_URL=pg.new_database(), MEMORY_TOKEN=TOKEN)
    return start_service(tmp, MEMORY_PLUGINS="bm25_porter,bm25_trigram", MEMORY_TOKEN=TOKEN)


def reports(service: Service) -> dict[str, dict[str, Any]]:
    """Injection reports by hook name."""
    with service.client() as http:
        return {r["hook"]: r for r in http.get("/api/injections").json()["items"]}


def test_a_purge_takes_the_memory_and_its_prompt_out_of_the_injection_reports(
        tmp_path: Path, store_kind: str) -> None:
    service = service_for(tmp_path, store_kind)
    try:
        with service.client() as http:
            secret = http.post("/ingest", json={
                "content": "Jane Roe signs the Zyxwvutsrq Holdings invoices",
                "project": "web"}).json()["uid"]
            other = http.post("/ingest", json={
                "content": "Invoices go out on the first working day", "project": "web"
            }).json()["uid"]
            for hook, query, uids in (("first", PROMPT, [secret, other]),
                                      ("second", "when do invoices go out?", [other])):
                assert http.post("/inject/report", json={
                    "harness": "claude-code", "hook": hook, "project": "web", "query": query,
                    "uids": uids, "chars": 120}).status_code == 200
            assert http.delete(f"/api/memories/{secret}").status_code == 200
            # forgotten, not purged: it may come back, so its reports are as they were
            assert reports(service)["first"]["query"] == PROMPT
            assert http.post("/api/maintenance/purge", json={}).json()["soft_deleted"] == 1
            after = reports(service)
            assert (after["first"]["query"], after["first"]["uids"]) == (None, [other])
            assert after["first"]["chars"] == 120  # the telemetry keeps its size
            assert (after["second"]["query"], after["second"]["uids"]) == (
                "when do invoices go out?", [other])
            assert http.get(f"/api/memories/{other}/injections").json()["total"] == 2
            summary = http.get("/api/stats").json()["injections"]
            assert [m["uid"] for m in summary["top_memories"]] == [other]
    finally:
        service.stop()
    if store_kind == "sqlite":
        for f in tmp_path.glob("memory.db*"):
            assert b"zyxwvutsrq" not in f.read_bytes().lower(), f.name


def test_the_most_injected_list_shows_no_forgotten_text(tmp_path: Path, store_kind: str) -> None:
    service = service_for(tmp_path, store_kind)
    try:
        with service.client() as http:
            uid = http.post("/ingest", json={
                "content": "Jane Roe signs the Zyxwvutsrq Holdings invoices"}).json()["uid"]
            http.post("/inject/report", json={"hook": "h", "query": "q", "uids": [uid]})

            def top() -> list[dict[str, Any]]:
                stats = http.get("/api/stats").json()["injections"]["top_memories"]
                assert http.get("/api/injections").json()["summary"]["top_memories"] == stats
                return stats

            assert top()[0]["content"].startswith("Jane Roe")
            assert http.delete(f"/api/memories/{uid}").status_code == 200
            assert top() == [{"uid": uid, "injections": 1, "content": None}]
            assert http.post(f"/api/memories/{uid}/unforget").status_code == 200
            assert top()[0]["content"].startswith("Jane Roe")
    finally:
        service.stop()
