"""The browse page's Edit action in real headless Chromium (test_browse_page.py's browser and
console rules): the form saves through PATCH /api/memories/{uid}, the memory's page then shows
the new text and the earlier version with its times, a refused edit says why and changes
nothing, and stored markup in an earlier version stays inert text."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect
from test_browse_page import IMG_XSS, NARROW, WIDE, Tab, browser, go, tab  # noqa: F401
from test_service_support import Service, start_service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("browse-edit"))
    yield svc
    svc.stop()


def store(service: Service, content: str, **fields: object) -> str:
    with service.client() as http:
        response = http.post("/ingest", json={"content": content, **fields})
        assert response.json()["status"] == "new", response.text
        return response.json()["uid"]


def test_edit_saves_and_shows_the_earlier_version(tab: Tab, service: Service) -> None:  # noqa: F811
    uid = store(service, f"The staging database listens on port 6543 {IMG_XSS}",
                project="infra", kind="fact", tags=["db"])
    page = tab.page
    go(tab, service, f"#memory/{uid}")
    expect(page.locator("#memory-revisions")).to_contain_text("None: never edited.")
    expect(page.locator("#edit-form")).to_be_hidden()
    page.click("#edit-button")
    expect(page.locator("#edit-form")).to_be_visible()
    expect(page.locator("#edit-content")).to_be_focused()
    expect(page.locator("#edit-kind")).to_have_value("fact")
    expect(page.locator("#edit-project")).to_have_value("infra")
    expect(page.locator("#edit-tags")).to_have_value("db")
    tab.shot("edit-form-1280.png")
    page.fill("#edit-content", "The staging database now listens on port 6544")
    page.fill("#edit-tags", "db, postgres")
    page.click("#edit-save")
    expect(page.locator("#notice")).to_contain_text("Saved: The staging database now listens")
    expect(page.locator("#edit-form")).to_be_hidden()
    expect(page.locator("#memory-content")).to_have_text(
        "The staging database now listens on port 6544")
    expect(page.locator("#memory-meta")).to_contain_text("db, postgres")
    expect(page.locator("#memory-title")).to_have_text(f"Memory {uid}")  # the uid stays
    expect(page.locator("#memory-revisions-title")).to_have_text("Earlier versions (1)")
    revision = page.locator("#memory-revisions li.revision")
    expect(revision).to_have_count(1)
    expect(revision).to_contain_text(f"port 6543 {IMG_XSS}")  # inert text
    expect(revision.locator("time")).to_have_count(2)  # replaced, written
    tab.shot("edit-1280.png")
    page.set_viewport_size(NARROW)
    tab.shot("edit-420.png")
    page.set_viewport_size(WIDE)
    with service.client() as http:
        shown = http.get(f"/api/memories/{uid}").json()
    assert shown["content"].endswith("6544") and shown["tags"] == ["db", "postgres"]
    assert page.evaluate("window.__xss") is None
    assert page.locator("main img").count() == 0
    tab.assert_clean()


def test_a_refused_edit_says_why_and_changes_nothing(
        tab: Tab, service: Service) -> None:  # noqa: F811
    first = store(service, "Code review needs two approvals")
    second = store(service, "Releases are cut on Mondays")
    page = tab.page
    go(tab, service, f"#memory/{second}")
    page.click("#edit-button")
    page.fill("#edit-content", "Code review needs two approvals")
    page.click("#edit-save")
    expect(page.locator("#edit-error")).to_be_visible()
    expect(page.locator("#edit-error")).to_contain_text(f"Not saved: content: memory {first}")
    page.click("#edit-cancel")
    expect(page.locator("#edit-form")).to_be_hidden()
    expect(page.locator("#memory-content")).to_have_text("Releases are cut on Mondays")
    page.click("#edit-button")  # saving without a change asks nothing of the service
    page.click("#edit-save")
    expect(page.locator("#notice")).to_contain_text("Nothing changed.")
    with service.client() as http:
        assert http.get(f"/api/memories/{second}").json()["revisions"] == []
    # the service answered 409: the console reports the failed fetch, nothing else
    tab.assert_clean(allowed=r"409")
