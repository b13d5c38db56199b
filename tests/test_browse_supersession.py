"""The browse page's memory view of a superseded memory: "superseded by" links to the newer one,
which lists what it supersedes, and Undo makes the old one current again (text nodes only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect
from test_browse_page import IMG_XSS, Tab, browser, go, tab  # noqa: F401
from test_service_support import Service, start_service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("browse-supersede"))
    yield svc
    svc.stop()


def test_superseded_by_links_and_undo(tab: Tab, service: Service) -> None:  # noqa: F811
    with service.client() as http:
        old = http.post("/ingest", json={"content": f"The cache TTL is 300 seconds {IMG_XSS}",
                                         "project": "web"}).json()["uid"]
        new = http.post("/ingest", json={"content": f"The cache TTL is 600 seconds {IMG_XSS}",
                                         "project": "web"}).json()["uid"]
    page = tab.page
    go(tab, service, f"#memory/{old}")
    meta = page.locator("#memory-meta")
    expect(meta).to_contain_text(f"superseded by{new}")
    page.locator(f'#memory-meta a[href="#memory/{new}"]').click()
    expect(page.locator("#memory-title")).to_have_text(f"Memory {new}")
    expect(meta).to_contain_text(f"supersedes{old}")
    go(tab, service, f"#memory/{old}")
    page.click("#unsupersede-button")
    expect(page.locator("#notice")).to_contain_text("Current again")
    expect(meta).not_to_contain_text("superseded by")
    with service.client() as http:
        assert http.get(f"/api/memories/{old}").json()["superseded_by"] is None
    assert page.evaluate("window.__xss") is None
    assert page.locator("main img").count() == 0
    tab.assert_clean()
