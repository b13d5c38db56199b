"""The HTTP side of the browse page, on a real `memory-mcp` process with MEMORY_TOKEN: its three
static files (public, with a strict Content-Security-Policy), and the read API it needs beyond
the sidecar's: recall a page at a time with each hit's channel ranks, the injections of one
memory, per-day telemetry, the forgotten memories and taking a forget back."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta

import httpx2
import pytest
from test_service_support import Service, start_service

TOKEN = "browse-rest-token"
CSP_DIRECTIVES = {
    "default-src": "'none'", "script-src": "'self'", "style-src": "'self'",
    "img-src": "'self' data:", "connect-src": "'self'", "frame-ancestors": "'none'",
    "base-uri": "'none'", "form-action": "'none'",
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("browse-rest"), MEMORY_TOKEN=TOKEN,
                        MEMORY_FORGET_GRACE_DAYS="7")
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def stored(service: Service) -> dict[str, str]:
    """Twelve deploy notes in project `web` (three of them decisions), one in `infra`."""
    uids = {}
    with service.client() as http:
        for i in range(12):
            kind = "decision" if i % 4 == 0 else "note"
            body = {"content": f"Deploy step {i}: the web deploy pipeline runs check {i}",
                    "project": "web", "kind": kind}
            uids[f"web{i}"] = http.post("/ingest", json=body).json()["uid"]
        infra = {"content": "The infra deploy pipeline uses Terraform", "project": "infra"}
        uids["infra"] = http.post("/ingest", json=infra).json()["uid"]
    return uids


@pytest.fixture
def http(service: Service) -> Iterator[httpx2.Client]:
    with service.client() as client:
        yield client


# --- the page's files -------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "media_type", "needle"), [
    ("/", "text/html", '<script type="module" src="/ui/app.js">'),
    ("/ui/app.js", "text/javascript", "textContent"),
    ("/ui/app.css", "text/css", ":root"),
])
def test_page_files_are_public_and_locked_down(service: Service, path: str, media_type: str,
                                               needle: str) -> None:
    with service.client(token=None) as anonymous:
        response = anonymous.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(media_type)
        assert needle in response.text
        assert response.headers["x-content-type-options"] == "nosniff"
        policy = dict(part.strip().split(" ", 1) for part in
                      response.headers["content-security-policy"].split(";"))
        assert policy == CSP_DIRECTIVES
        assert anonymous.head(path).status_code == 200


def test_page_holds_no_inline_script_or_style(service: Service) -> None:
    with service.client(token=None) as anonymous:
        html = anonymous.get("/").text
        js = anonymous.get("/ui/app.js").text
    assert not re.search(r"<script(?![^>]*\bsrc=)", html)  # every script is a file
    assert "<style" not in html and not re.search(r"\s(style|on[a-z]+)=", html)
    # The DOM is built from text nodes: no HTML parsing of data, no code from strings.
    code = re.sub(r"^\s*//.*$", "", js, flags=re.MULTILINE)  # the comments may name them
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|"
                         r"new Function", code)


def test_only_reads_of_the_page_are_public(service: Service) -> None:
    with service.client(token=None) as anonymous:
        assert anonymous.post("/", content=b"x").status_code == 401
        assert anonymous.get("/api/stats").status_code == 401
        assert anonymous.get("/api/search?q=deploy").status_code == 401
        assert anonymous.get("/ui/other.js").status_code == 401  # not a page file: no hint
        health = anonymous.get("/health").json()
        assert health["auth"] is True


# --- GET /api/search --------------------------------------------------------------------------


def test_search_shows_why_each_hit_was_recalled(http: httpx2.Client,
                                                stored: dict[str, str]) -> None:
    data = http.get("/api/search", params={"q": "Terraform pipeline"}).json()
    assert data["items"][0]["uid"] == stored["infra"]
    top = data["items"][0]
    assert top["ranks"]["porter"] == 1 and top["score"] > 0
    assert top["content"] == "The infra deploy pipeline uses Terraform"
    assert {"porter", "trigram"} <= set(data["channels"])
    assert set(top["ranks"]) <= set(data["channels"])


def test_search_pages_through_recall(http: httpx2.Client, stored: dict[str, str]) -> None:
    seen = []
    offset = 0
    while True:
        page = http.get("/api/search", params={"q": "deploy pipeline", "project": "web",
                                               "limit": 5, "offset": offset}).json()
        assert page["limit"] == 5 and page["offset"] == offset
        seen += [item["uid"] for item in page["items"]]
        if not page["has_more"]:
            break
        offset += 5
    assert sorted(seen) == sorted(uid for key, uid in stored.items() if key.startswith("web"))
    assert len(set(seen)) == len(seen)  # pages do not overlap
    whole = http.get("/api/search", params={"q": "deploy pipeline", "project": "web",
                                            "limit": 100}).json()
    assert [item["uid"] for item in whole["items"]] == seen  # the same order, page by page


def test_search_filters(http: httpx2.Client, stored: dict[str, str]) -> None:
    decisions = http.get("/api/search", params={"q": "deploy", "kind": "decision"}).json()
    assert {i["uid"] for i in decisions["items"]} == {stored[f"web{i}"] for i in (0, 4, 8)}
    assert http.get("/api/search", params={"q": "deploy", "since": "2999-01-01"}
                    ).json()["items"] == []
    infra = http.get("/api/search", params={"q": "deploy", "project": "infra"}).json()
    assert [i["uid"] for i in infra["items"]] == [stored["infra"]]


@pytest.mark.parametrize(("params", "field"), [
    ({}, "q"), ({"q": ""}, "q"), ({"q": "x", "limit": "0"}, "limit"),
    ({"q": "x", "limit": "many"}, "limit"), ({"q": "x", "offset": "200"}, "offset"),
    ({"q": "x", "since": "last week"}, "since"),
])
def test_search_refuses_bad_queries(http: httpx2.Client, params: dict[str, str],
                                    field: str) -> None:
    response = http.get("/api/search", params=params)
    assert response.status_code == 422
    body = response.json()
    assert body["field"] == field and "\n" not in body["error"]


# --- one memory's injections, per-day telemetry ---------------------------------------------


def test_memory_injections_and_per_day_summary(http: httpx2.Client,
                                               stored: dict[str, str]) -> None:
    uid, other = stored["web1"], stored["web2"]
    before = http.get("/api/injections").json()["summary"]
    for hook, uids in (("UserPromptSubmit", [uid, other]), ("SessionStart", [uid]),
                       ("UserPromptSubmit", [other])):
        assert http.post("/inject/report", json={
            "harness": "claude-code", "hook": hook, "project": "web", "query": "deploy?",
            "uids": uids, "chars": 400}).status_code == 200
    mine = http.get(f"/api/memories/{uid}/injections").json()
    assert mine["uid"] == uid and mine["total"] == 2
    assert [row["hook"] for row in mine["items"]] == ["SessionStart", "UserPromptSubmit"]
    assert all(uid in row["uids"] for row in mine["items"])
    paged = http.get(f"/api/memories/{uid}/injections", params={"limit": 1, "offset": 1}).json()
    assert [row["id"] for row in paged["items"]] == [mine["items"][1]["id"]]
    assert paged["total"] == 2

    summary = http.get("/api/injections").json()["summary"]
    assert summary["total"] == before["total"] + 3
    assert summary["last_7_days_chars"] == before["last_7_days_chars"] + 1200
    assert summary["last_7_days_approx_tokens"] == summary["last_7_days_chars"] // 4
    days = summary["per_day"]
    assert len(days) == 30 and days == sorted(days, key=lambda d: d["day"])
    assert days[-1]["count"] == summary["last_7_days"] and days[-1]["chars"] >= 1200
    assert sum(d["count"] for d in days[:-1]) == 0


def test_memory_injections_of_unknown_or_forgotten_memory_is_404(
        http: httpx2.Client, stored: dict[str, str]) -> None:
    response = http.get("/api/memories/0123456789abcdef/injections")
    assert response.status_code == 404 and response.json()["field"] == "uid"
    uid = http.post("/ingest", json={"content": "short-lived note"}).json()["uid"]
    assert http.delete(f"/api/memories/{uid}").status_code == 200
    assert http.get(f"/api/memories/{uid}/injections").status_code == 404


# --- forgotten memories, unforget --------------------------------------------------------------


def test_forgotten_and_unforget_need_the_token(service: Service, http: httpx2.Client) -> None:
    uid = http.post("/ingest", json={"content": "Token-guarded forget probe",
                                     "project": "guarded"}).json()["uid"]
    assert http.delete(f"/api/memories/{uid}").status_code == 200
    for token in (None, "wrong-token"):
        with service.client(token=token) as stranger:
            listed = stranger.get("/api/forgotten")
            assert listed.status_code == 401 and "Traceback" not in listed.text
            taken = stranger.post(f"/api/memories/{uid}/unforget", json={})
            assert taken.status_code == 401
    items = http.get("/api/forgotten", params={"project": "guarded"}).json()["items"]
    assert [m["uid"] for m in items] == [uid]  # the refused calls changed nothing
    when = {k: datetime.fromisoformat(items[0][k].replace("Z", "+00:00"))
            for k in ("forgotten_at", "purged_after")}
    assert when["purged_after"] - when["forgotten_at"] == timedelta(days=7)  # the grace set
    restored = http.post(f"/api/memories/{uid}/unforget", json={})
    assert restored.status_code == 200 and restored.json()["status"] == "restored"
    assert http.get(f"/api/memories/{uid}").status_code == 200
