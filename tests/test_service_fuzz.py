"""Property-based fuzzing of the REST inputs (hypothesis) against a real server: whatever the
body, query string or path, the answer is a JSON 2xx/4xx, never a 5xx, a traceback or a hang,
and what was stored before is still there afterwards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_service_support import Service, start_service

LIMIT = 16 * 1024
SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

# Text including lone surrogates, NULs, control characters and astral code points.
any_text = st.text(st.characters(exclude_categories=()), max_size=40)
scalars = st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) \
    | st.floats(allow_nan=True, allow_infinity=True) | any_text
json_values = st.recursive(
    scalars, lambda children: st.lists(children, max_size=4)
    | st.dictionaries(any_text, children, max_size=4), max_leaves=12)


def near(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects built from a route's own field names: mostly plausible, sometimes wrong."""
    return st.fixed_dictionaries({}, optional={
        name: strategy | json_values for name, strategy in fields.items()})


TIMESTAMPS = st.integers(-10**12, 10**12) | st.floats() | st.sampled_from(
    ["2024-01-01", "2024-01-01T00:00:00Z", "9999-12-31T23:59:59", "0", "-1", "1e308", "", "now"])
ITEM = {"content": any_text | st.text(min_size=1, max_size=200), "kind": any_text,
        "source": any_text, "project": st.none() | any_text,
        "tags": st.lists(any_text, max_size=5), "created_at": st.none() | TIMESTAMPS}
RECALL = {"query": any_text, "k": st.integers(-5, 500), "limit": st.integers(-5, 500),
          "project": st.none() | any_text, "kind": st.none() | any_text,
          "source": st.none() | any_text, "since": st.none() | TIMESTAMPS,
          "budget_chars": st.integers(-10, 10**7)}
REPORT = {"uids": st.lists(any_text, max_size=5), "harness": any_text, "hook": any_text,
          "project": any_text, "query": any_text, "chars": st.integers(-(2**70), 2**70)}

BODIES = {
    "/ingest": near(ITEM) | st.builds(lambda items: {"items": items},
                                      st.lists(near(ITEM), max_size=5)) | json_values,
    "/recall": near(RECALL) | json_values,
    "/inject/report": near(REPORT) | json_values,
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("fuzz"), MEMORY_MAX_BODY_BYTES=str(LIMIT))
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def http(service: Service) -> Iterator[httpx2.Client]:
    with service.client() as client:
        yield client


@pytest.fixture(scope="module")
def seeded(http: httpx2.Client) -> list[str]:
    items = [{"content": f"Seeded fuzz survivor number {i}: keep me", "project": "seed"}
             for i in range(20)]
    return [r["uid"] for r in http.post("/ingest", json={"items": items}).json()["results"]]


def check(response: httpx2.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    assert "Traceback" not in response.text
    if response.content:
        json.loads(response.content)


@SETTINGS
@given(path=st.sampled_from(sorted(BODIES)), data=st.data())
def test_json_bodies_never_5xx(http: httpx2.Client, seeded: list[str], path: str,
                               data: st.DataObject) -> None:
    body = data.draw(BODIES[path])
    check(http.post(path, content=json.dumps(body, allow_nan=True),
                    headers={"content-type": "application/json"}))


@SETTINGS
@given(path=st.sampled_from(["/ingest", "/recall", "/inject/report", "/api/maintenance/purge"]),
       raw=st.binary(max_size=300) | st.binary(min_size=LIMIT - 50, max_size=LIMIT + 50))
def test_raw_bytes_never_5xx(http: httpx2.Client, seeded: list[str], path: str,
                             raw: bytes) -> None:
    check(http.post(path, content=raw))


QUERY_KEYS = ["kind", "project", "source", "since", "limit", "offset", "harness", "x"]
query_values = st.text(max_size=20) | st.integers(-(2**70), 2**70).map(str) | st.sampled_from(
    ["1e3", "nan", "inf", "-0", " 5", "０", "2024-01-01"])


@SETTINGS
@given(path=st.sampled_from(["/api/memories", "/api/injections", "/api/stats", "/health"]),
       params=st.dictionaries(st.sampled_from(QUERY_KEYS), query_values, max_size=5))
def test_query_strings_never_5xx(http: httpx2.Client, seeded: list[str], path: str,
                                 params: dict[str, str]) -> None:
    check(http.get(path, params=params))


@SETTINGS
@given(uid=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=70),
       method=st.sampled_from(["GET", "DELETE"]))
def test_uid_paths_never_5xx(http: httpx2.Client, seeded: list[str], uid: str,
                             method: str) -> None:
    response = http.request(method, "/api/memories/" + quote(uid, safe=""))
    check(response)
    assert response.status_code in (200, 404, 307)


def test_nothing_stored_was_lost(service: Service, http: httpx2.Client,
                                 seeded: list[str]) -> None:
    for uid in seeded:
        assert http.get(f"/api/memories/{uid}").status_code == 200
    found = http.post("/recall", json={"query": "seeded fuzz survivor", "project": "seed",
                                       "k": 50}).json()
    assert {i["uid"] for i in found["items"]} >= set(seeded)
    assert http.get("/health").json()["ok"] is True
    log = service.stderr()
    assert "Traceback" not in log and "╭" not in log  # plain or rich: no traceback at all
