"""The browse page as a person reviewing their agent's memory uses it, in real headless Chromium
(test_browse_page.py's browser and console rules): a view's own link loads it again (after the
service was stopped and started), the focus goes back to the button a cancelled question came
from, bidi controls show as their code points, the search filters list what was stored since the
page loaded, "(no project)" lists the global memories alone, recall's 200-result cap is said,
and text typed in the editor survives a navigation."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Dialog, expect
from test_browse_page import Tab, browser, go, tab  # noqa: F401
from test_service_support import Service, start_service
from test_service_support import stored as store

#: What the page may log while the service is stopped: the refused connections.
SERVICE_DOWN = r"request failed|ERR_CONNECTION_REFUSED"
BIDI_CHARS = re.compile("[\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("browse-review"))
    yield svc
    svc.stop()


def test_a_views_own_link_loads_it_again_once_the_service_is_back(
        tab: Tab, tmp_path: Path) -> None:  # noqa: F811
    """Before: a click on the tab already shown fired no hashchange, so it did nothing: the
    "does not answer" error stayed after the service was started again (and, while it was
    down, the tab kept its old numbers with no word)."""
    folder = tmp_path / "service"
    own = start_service(folder)
    port = str(urlsplit(own.url).port)
    try:
        store(own, "A memory the overview counts")
        page = tab.page
        notice = page.locator("#notice")
        stopped = f"The service at {own.url} does not answer — is memory-mcp running?"
        memories = page.locator("#overview-cards .card").filter(
            has_text="Memories").locator(".card-value")
        go(tab, own, "#overview")
        expect(memories).to_have_text("1")

        own.stop()
        page.click("nav a[data-view=overview]")
        expect(notice).to_have_text(stopped)
        expect(page.locator("#overview-cards")).to_be_empty()  # not the old numbers
        own = start_service(folder, MEMORY_PORT=port)  # the same store, the same address
        page.click("nav a[data-view=overview]")
        expect(memories).to_have_text("1")
        expect(notice).to_be_hidden()
        expect(page.locator("#overview-title")).to_be_focused()

        page.click("nav a[data-view=forgotten]")
        expect(page.locator("#forgotten-list")).to_contain_text("Nothing forgotten")
        own.stop()
        page.click("nav a[data-view=forgotten]")
        expect(notice).to_have_text(stopped)
        expect(page.locator("#forgotten-list")).to_be_empty()
        own = start_service(folder, MEMORY_PORT=port)
        page.click("nav a[data-view=forgotten]")
        expect(page.locator("#forgotten-list")).to_contain_text("Nothing forgotten")
        expect(notice).to_be_hidden()
        tab.assert_clean(allowed=SERVICE_DOWN)
    finally:
        own.stop()


def test_cancelling_forget_gives_the_focus_back_to_its_button(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: Forget… was disabled while its question was open, so on Cancel or Escape the
    focus fell to the page's top and the next Tab started over."""
    uid = store(service, "The focus test memory stays", project="focus")
    page = tab.page
    go(tab, service, f"#memory/{uid}")
    forget = page.locator("#forget-button")
    forget.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#confirm-cancel")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#confirm-dialog")).to_be_hidden()
    expect(forget).to_be_focused()
    page.keyboard.press("Enter")  # asked again: Enter on the focused Cancel
    expect(page.locator("#confirm-cancel")).to_be_focused()
    page.keyboard.press("Enter")
    expect(forget).to_be_focused()
    page.keyboard.press("Shift+Tab")  # the keyboard goes on from there
    expect(page.locator("#edit-button")).to_be_focused()
    with service.client() as http:
        assert http.get(f"/api/memories/{uid}").status_code == 200
    tab.assert_clean()



def test_a_question_asked_again_at_once_is_answered_by_its_own_buttons(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """A dialog's "close" event is queued, not sent at once: closed by Escape and asked again
    by Enter before it arrived (a loaded machine; the full suite met it on Purge…), the stale
    close answered the new question "no", and its OK then did nothing. Here both happen in
    one task, so the old close arrives while the new question is open."""
    uid = store(service, "The asked-twice memory goes", project="focus")
    page = tab.page
    go(tab, service, f"#memory/{uid}")
    page.locator("#forget-button").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#confirm-cancel")).to_be_focused()
    page.evaluate("""() => {
        document.getElementById("confirm-dialog").close();  // as Escape closes it
        document.getElementById("forget-button").click();   // asked again, same task
    }""")
    expect(page.locator("#confirm-dialog")).to_be_visible()
    page.click("#confirm-ok")
    expect(page.locator("#confirm-dialog")).to_be_hidden()
    with service.client() as http:
        for _ in range(100):  # the forget's request, then its answer
            if http.get(f"/api/memories/{uid}").json().get("forgotten"):
                break
            page.wait_for_timeout(100)
        assert http.get(f"/api/memories/{uid}").json().get("forgotten"), "not forgotten"


#: A right-to-left override and an isolate: obeyed, the first reads "bidi test .txt exe.live".
BIDI_CONTENT = "bidi test \u202eevil.exe txt.\u202c normal after \u2067iso\u2069"
BIDI_SHOWN = "bidi test <U+202E>evil.exe txt.<U+202C> normal after <U+2067>iso<U+2069>"


def test_bidi_controls_show_as_code_points_not_obeyed(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: the page obeyed the override, so it showed a string other than the one stored
    and given to the agent ("Trojan Source"), in the text, the project and the tags."""
    project = "bidi-\u202eproj"
    uid = store(service, BIDI_CONTENT, project=project, tags=["\u202etagrev"])
    page = tab.page
    go(tab, service, f"#memory/{uid}")
    expect(page.locator("#memory-content")).to_have_text(BIDI_SHOWN)
    expect(page.locator("#memory-meta")).to_contain_text("bidi-<U+202E>proj")
    expect(page.locator("#memory-meta")).to_contain_text("<U+202E>tagrev")
    page.click("#forget-button")
    expect(page.locator("#confirm-detail")).to_have_text(BIDI_SHOWN)
    page.click("#confirm-cancel")
    page.click("#edit-button")  # the form edits the stored characters themselves
    assert page.input_value("#edit-content") == BIDI_CONTENT
    assert page.input_value("#edit-project") == project
    page.click("#edit-cancel")

    go(tab, service, "#search?q=evil.exe")
    hit = page.locator("#search-results .hit").filter(has_text="evil.exe")
    expect(hit.locator(".hit-content")).to_have_text(BIDI_SHOWN)
    expect(hit.locator(".tag.project")).to_have_text("bidi-<U+202E>proj")
    expect(hit).to_contain_text("#<U+202E>tagrev")
    expect(page.locator("#search-summary")).to_contain_text("“evil.exe”")
    # The filter shows the marker and filters by the stored name.
    option = page.locator("#search-project option", has_text="bidi-<U+202E>proj")
    expect(option).to_have_attribute("value", project)
    page.select_option("#search-project", project)
    page.fill("#search-q", "")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#search-summary")).to_have_text("Newest-updated memories: 1–1 of 1.")
    go(tab, service, "#overview")
    expect(page.locator("#overview-projects")).to_contain_text("bidi-<U+202E>proj")
    every_view = page.evaluate("document.querySelector('main').textContent")
    assert not BIDI_CHARS.search(every_view), every_view
    tab.assert_clean()


def test_search_filters_list_what_was_stored_since_the_page_loaded(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: the Project, Kind and Source choices were those of the last overview shown,
    while the list beside them showed the memory of a new project."""
    page = tab.page
    go(tab, service, "#search")
    expect(page.locator("#search-project option", has_text="fresh-project")).to_have_count(0)
    store(service, "Written after the page loaded", project="fresh-project", kind="runbook",
          source="fresh-source")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#search-results")).to_contain_text("Written after the page loaded")
    expect(page.locator("#search-project option", has_text="fresh-project")).to_have_count(1)
    expect(page.locator("#search-kind option", has_text="runbook")).to_have_count(1)
    expect(page.locator("#search-source option", has_text="fresh-source")).to_have_count(1)
    tab.assert_clean()


def test_no_project_lists_the_global_memories_alone(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: "(no project)" in the overview was no link, and `#search?project=` listed every
    memory, while the API's `project=""` is the global memories alone."""
    store(service, "A global memory about pnpm caches")
    store(service, "A project memory about pnpm caches", project="not-global")
    with service.client() as http:
        globals_ = http.get("/api/memories", params={"project": "", "limit": 100}).json()
        everything = http.get("/api/memories", params={"limit": 1}).json()["total"]
    assert globals_["total"] < everything
    page = tab.page
    hits = page.locator("#search-results .hit")
    summary = page.locator("#search-summary")
    go(tab, service, "#overview")
    page.locator("#overview-projects a", has_text="(no project)").click()
    expect(summary).to_have_text(
        f"Newest-updated memories: 1–{globals_['total']} of {globals_['total']}.")
    assert page.url.endswith("#search?project=")
    expect(hits.locator(".tag.project")).to_have_count(0)
    expect(page.locator("#search-project option:checked")).to_have_text("(no project)")
    page.click("#search-form button[type=submit]")  # the form keeps it
    expect(page.locator("#search-project option:checked")).to_have_text("(no project)")
    expect(summary).to_contain_text(f"of {globals_['total']}.")
    page.fill("#search-q", "pnpm caches")
    page.press("#search-q", "Enter")
    expect(summary).to_contain_text("“pnpm caches”")
    expect(hits).to_have_text([re.compile("A global memory about pnpm caches")])
    page.select_option("#search-project", label="Any project")
    page.click("#search-form button[type=submit]")
    expect(hits).to_have_count(2)
    assert "project=" not in page.url
    tab.assert_clean()


def test_the_summary_says_recall_stops_at_200_and_when_nothing_is_found(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: the second page of 100 ended at 200 with Next disabled and no word that more
    memories match; no hit read "Results none for …, best first: each shows …"."""
    with service.client() as http:
        answer = http.post("/ingest", json={"items": [
            {"content": f"Capped note {i} about the release train", "project": "capped"}
            for i in range(210)]})
        assert answer.status_code == 200, answer.text
    page = tab.page
    summary = page.locator("#search-summary")
    cap = "Recall returns at most the 200 best"
    go(tab, service, "#search?q=release+train&project=capped&limit=100")
    expect(summary).to_contain_text("Results 1–100 for “release train”")
    expect(summary).not_to_contain_text(cap)
    page.click("#search-pager >> text=Next →")
    expect(summary).to_have_text(
        "Results 101–200 for “release train”, best first: each shows its fused score and its "
        "rank in every channel (– where a channel did not find it). Recall returns at most the "
        "200 best: refine the query or the filters, or clear the query to page through every "
        "memory, newest first.")
    expect(page.locator("#search-pager >> text=Next →")).to_be_disabled()
    page.fill("#search-q", "")
    page.click("#search-form button[type=submit]")  # the list has no cap
    expect(summary).to_have_text("Newest-updated memories: 1–100 of 210.")
    go(tab, service, "#search?q=zzzqqxx")
    expect(summary).to_have_text("No results for “zzzqqxx”.")
    expect(page.locator("#search-results")).to_have_text("Nothing found.")
    tab.assert_clean()


def test_text_typed_in_the_editor_survives_a_navigation(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: Overview then Back closed the editor, and Edit… refilled it from the stored
    memory: the typed text was gone, with no prompt."""
    uid = store(service, "The build cache lives on the CI runner", project="draft")
    other = store(service, "The docs site is built nightly", project="draft")
    page = tab.page
    content = page.locator("#edit-content")
    notice = page.locator("#notice")
    go(tab, service, f"#memory/{uid}")
    page.click("#edit-button")
    content.fill("The build cache lives in S3 now")
    page.click("nav a[data-view=overview]")
    expect(page.locator("#overview-title")).to_be_focused()
    page.go_back()
    expect(page.locator("#memory-title")).to_have_text(f"Memory {uid}")
    expect(page.locator("#edit-form")).to_be_visible()
    expect(content).to_have_value("The build cache lives in S3 now")
    expect(notice).to_have_text(
        "Your unsaved edit is back in the form: Save it, or Cancel to drop it.")

    page.evaluate(f"location.hash = '#memory/{other}'")  # another memory's view meanwhile
    expect(page.locator("#memory-title")).to_have_text(f"Memory {other}")
    expect(page.locator("#edit-form")).to_be_hidden()
    with service.client() as http:  # and the memory is changed elsewhere meanwhile
        assert http.patch(f"/api/memories/{uid}", json={
            "content": "The build cache lives on the CI runner, 200 GB"}).status_code == 200
    page.go_back()
    expect(page.locator("#memory-content")).to_have_text(
        "The build cache lives on the CI runner, 200 GB")
    expect(content).to_have_value("The build cache lives in S3 now")
    expect(notice).to_contain_text("Above: the version stored now. The form keeps your text")

    page.click("#edit-cancel")  # Cancel drops it
    page.click("nav a[data-view=overview]")
    expect(page.locator("#overview-title")).to_be_focused()
    page.go_back()
    expect(page.locator("#memory-title")).to_have_text(f"Memory {uid}")
    expect(page.locator("#edit-form")).to_be_hidden()
    expect(notice).to_be_hidden()

    page.click("#edit-button")  # a reload or a close of the tab asks first
    content.fill("Typed, then the tab is closed")
    asked: list[str] = []

    def answer(dialog: Dialog) -> None:
        asked.append(dialog.type)
        dialog.accept()

    page.on("dialog", answer)
    tab.assert_clean()
    with page.expect_event("close"):
        page.close(run_before_unload=True)
    assert asked == ["beforeunload"]
