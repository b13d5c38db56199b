"""A memory dated ahead of this machine's clock: an import from a machine whose clock ran a year
fast was stored as given, sorted first by recency for a year and never reached its TTL. Up to a
day ahead is clock skew and taken; further is a bad line / a 422 naming the field."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from test_core_cli import run
from test_service_support import Service, start_service

DAY = 86_400


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("future"))
    yield svc
    svc.stop()


@pytest.fixture
def http(service: Service) -> Iterator[httpx2.Client]:
    with service.client() as client:
        yield client


def test_a_time_more_than_a_day_ahead_is_422_naming_the_field(http: httpx2.Client) -> None:
    field = "created_at"
    ahead = time.time() + 2 * DAY
    response = http.post("/ingest", json={"content": f"dated ahead by {field}", field: ahead})
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    assert "more than a day ahead" in response.json()["error"]
    batch = http.post("/ingest", json={"items": [
        {"content": "a batch item from the future", field: ahead},
        {"content": "a batch item of today"}]}).json()
    assert [r["status"] for r in batch["results"]] == ["rejected", "new"]


def test_clock_skew_within_a_day_is_taken(http: httpx2.Client) -> None:
    skewed = time.time() + 3_600
    data = http.post("/ingest", json={"content": "written on a laptop an hour fast",
                                      "created_at": skewed}).json()
    assert data["status"] == "new"
    memory = http.get(f"/api/memories/{data['uid']}").json()
    assert memory["content"] == "written on a laptop an hour fast"


def test_an_import_line_dated_next_year_is_a_bad_line_and_the_rest_is_stored(
        tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    next_year = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 365 * DAY))
    lines = [{"content": "kept before the future line"},
             {"content": "dated next year", "created_at": next_year},
             {"content": "edited next year", "updated_at": next_year},
             {"content": "kept after the future line"}]
    path = tmp_path / "skewed.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = run(db, "import", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert json.loads(result.stdout) == {"new": 2, "duplicate": 0, "rejected": 0, "bad": 2}
    assert "line 2: created_at:" in result.stderr and "ahead" in result.stderr
    assert "line 3: updated_at:" in result.stderr
    listed = run(db, "export")
    assert "next year" not in listed.stdout and "kept after" in listed.stdout
