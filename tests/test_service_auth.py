"""The auth matrix: Bearer token on every route but /health, the bulk-maintenance double gate,
DNS-rebinding protection (Host / Origin allow-list) and the non-loopback bind rule."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from semantic_memory.config import ConfigError, Settings
from semantic_memory.service.auth import allowed_hosts, bearer_ok, check_bind, is_loopback
from test_service_support import Service, memory_mcp_command, service_env, start_service

TOKEN = "s3cret-token-for-tests"

#: (method, path, json body) for every route that needs the token.
PROTECTED = [
    ("POST", "/ingest", {"content": "auth matrix probe"}),
    ("POST", "/recall", {"query": "auth"}),
    ("POST", "/inject/report", {"uids": []}),
    ("GET", "/api/stats", None),
    ("GET", "/api/memories", None),
    ("GET", "/api/memories/0123456789abcdef", None),
    ("DELETE", "/api/memories/0123456789abcdef", None),
    ("GET", "/api/injections", None),
    ("POST", "/api/maintenance/purge", None),
    ("POST", "/api/maintenance/backfill", None),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    ("GET", "/no-such-route", None),
]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("secured"), MEMORY_TOKEN=TOKEN,
                        MEMORY_ALLOWED_HOSTS="memory.lan, Other.Example")
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def open_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("open"))
    yield svc
    svc.stop()


def _request(svc: Service, method: str, path: str, body: object, token: str | None,
             **headers: str):
    with svc.client(token=token) as client:
        return client.request(method, path, json=body, headers={
            "accept": "application/json, text/event-stream", **headers})


def test_health_needs_no_token(secured: Service) -> None:
    with secured.client(token=None) as client:
        assert client.get("/health").json()["ok"] is True


@pytest.mark.parametrize(("method", "path", "body"), PROTECTED)
@pytest.mark.parametrize("token", [None, "wrong", TOKEN + "x", TOKEN[:-1], ""])
def test_every_other_route_needs_the_token(secured: Service, method: str, path: str,
                                           body: object, token: str | None) -> None:
    response = _request(secured, method, path, body, token)
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(("method", "path", "body"), PROTECTED)
def test_valid_token_is_accepted(secured: Service, method: str, path: str, body: object) -> None:
    response = _request(secured, method, path, body, TOKEN)
    assert response.status_code not in (401, 403), response.text
    assert response.status_code < 500


def test_other_schemes_are_refused(secured: Service) -> None:
    with secured.client(token=None) as client:
        for header in (f"Basic {TOKEN}", TOKEN, f"Bearer{TOKEN}", f"Token {TOKEN}"):
            response = client.get("/api/stats", headers={"authorization": header})
            assert response.status_code == 401, header
        assert client.get("/api/stats", headers={"authorization": f"bearer {TOKEN}"}
                          ).status_code == 200


def test_maintenance_with_token_runs(secured: Service) -> None:
    with secured.client() as client:
        uid = client.post("/ingest", json={"content": "to be purged"}).json()["uid"]
        assert client.delete(f"/api/memories/{uid}").status_code == 200
        purge = client.post("/api/maintenance/purge")
        assert purge.status_code == 200 and purge.json()["soft_deleted"] >= 1
        backfill = client.post("/api/maintenance/backfill")
        assert backfill.status_code == 200 and "embedded" in backfill.json()


def test_maintenance_is_403_without_a_configured_token(open_service: Service) -> None:
    for token in (None, "anything"):
        for path in ("/api/maintenance/purge", "/api/maintenance/backfill"):
            response = _request(open_service, "POST", path, None, token)
            assert response.status_code == 403
    # the open install still serves everything else without a token
    assert _request(open_service, "GET", "/api/stats", None, None).status_code == 200


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:80", "127.0.0.1.evil.com",
                                  "localhost.evil.com:1", "[::2]:80", ""])
def test_foreign_host_header_is_rejected(secured: Service, host: str) -> None:
    for method, path, body in [("GET", "/health", None), ("POST", "/recall", {"query": "x"}),
                               ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"})]:
        response = _request(secured, method, path, body, TOKEN, host=host)
        assert response.status_code == 421, (host, path, response.text)


def test_foreign_origin_is_rejected(secured: Service, open_service: Service) -> None:
    for svc in (secured, open_service):
        for origin in ("http://evil.example.com", "null", "http://127.0.0.1.evil.com:80"):
            response = _request(svc, "POST", "/ingest", {"content": "csrf attempt"}, TOKEN,
                                origin=origin)
            assert response.status_code == 403, origin
        same = _request(svc, "GET", "/api/stats", None, TOKEN, origin=svc.url)
        assert same.status_code == 200


def test_allowed_hosts_extend_the_list(secured: Service) -> None:
    port = secured.info["port"]
    for host in (f"memory.lan:{port}", "memory.lan", f"other.example:{port}",
                 f"localhost:{port}", f"[::1]:{port}"):
        response = _request(secured, "GET", "/api/stats", None, TOKEN, host=host)
        assert response.status_code == 200, host
    mcp = _request(secured, "POST", "/mcp", {
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}, TOKEN, host=f"memory.lan:{port}",
        origin=f"http://memory.lan:{port}")
    assert mcp.status_code == 200, mcp.text


def test_non_loopback_bind_without_token_refuses_to_start(tmp_path) -> None:
    result = subprocess.run(memory_mcp_command(), env=service_env(tmp_path, MEMORY_HOST="0.0.0.0"),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "MEMORY_TOKEN" in lines[0] and "0.0.0.0" in lines[0]
    assert not (tmp_path / "memory.db.server.json").exists()


def test_bind_rule_and_helpers() -> None:
    for host in ("127.0.0.1", "127.8.9.1", "localhost", "::1", "[::1]"):
        assert is_loopback(host)
        check_bind(Settings(host=host))
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.com", ""):
        assert not is_loopback(host)
        with pytest.raises(ConfigError, match="MEMORY_TOKEN"):
            check_bind(Settings(host=host))
        check_bind(Settings(host=host, token="t"))
    assert allowed_hosts(Settings(host="192.168.1.5", allowed_hosts="A.lan,,b")) == [
        "127.0.0.1", "localhost", "::1", "192.168.1.5", "a.lan", "b"]
    assert "0.0.0.0" not in allowed_hosts(Settings(host="0.0.0.0", token="t"))
    assert bearer_ok("Bearer abc", "abc") and not bearer_ok("Bearer abd", "abc")
    assert not bearer_ok(None, "abc") and not bearer_ok("Bearer \udcff", "abc")
