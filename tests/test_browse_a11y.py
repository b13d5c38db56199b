"""The browse page for everyone, in real headless Chromium (test_browse_page.py's browser and
console rules): a long query or notice wraps at 320 px, the focus goes back to Edit… after Save
and Cancel, user text takes its own direction (dir="auto"), previews are cut between graphemes,
the Forget question describes the memory and its warning, fields and buttons have edges of 3:1,
a long project keeps the telemetry columns in view, an impossible `since` day is refused, and
what a search found is said in a live region."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect
from test_browse_page import WIDE, Tab, browser, go, tab  # noqa: F401
from test_service_support import Service, start_service
from test_service_support import stored as store

SMALLEST = {"width": 320, "height": 800}  # WCAG 1.4.10 (Reflow): no sideways scroll at 320 px
ARABIC = "يجب تشغيل ترحيل قاعدة البيانات قبل النشر، الإصدار 3.2."
LONG_PATH = "/very/long/path/" + "x" * 400
#: A preview's cut falls inside each of these graphemes: a surrogate pair, a ZWJ family, a flag.
ROCKET = "a" * 58 + "🚀 launch notes"
FAMILY = "b" * 55 + "👨‍👩‍👧 family notes"
FLAG = "c" * 277 + "🇯🇵 flag notes"
LONG_PROJECT = "p/" + "z" * 200


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("browse-a11y"))
    yield svc
    svc.stop()


def scroll_width(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_a_long_query_and_a_long_notice_wrap_at_320_px(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: the summary quoting an unbroken query, and the "Forgotten: …" notice of a long
    path, ran off the right edge: the page scrolled sideways (753 px wide at 320 px)."""
    uid = store(service, LONG_PATH, project="reflow")
    store(service, "x" * 60, project="reflow")
    page = tab.page
    page.set_viewport_size(SMALLEST)
    go(tab, service, "#search?project=reflow&q=" + "x" * 60)
    expect(page.locator("#search-summary")).to_contain_text(re.compile(r"Results 1–\d for “x+”"))
    assert scroll_width(page) <= SMALLEST["width"]
    go(tab, service, "#search?project=reflow&q=" + "Z9" * 40)  # no hits: "No results for “Z9Z9…”"
    expect(page.locator("#search-summary")).to_contain_text("No results for")
    assert scroll_width(page) <= SMALLEST["width"]

    go(tab, service, f"#memory/{uid}")
    page.click("#forget-button")
    page.click("#confirm-ok")
    expect(page.locator("#notice")).to_contain_text("Forgotten: /very/long/path/xxx")
    assert scroll_width(page) <= SMALLEST["width"]
    page.locator("#notice").get_by_role("button", name="Undo").click()
    expect(page.locator("#notice")).to_contain_text("Restored: /very/long/path/xxx")
    assert scroll_width(page) <= SMALLEST["width"]
    tab.assert_clean()


def test_the_focus_is_back_on_edit_after_save_and_cancel(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: Save and Cancel hid the form that held the focus, which dropped to <body>: the
    next Tab started wherever the browser chose."""
    uid = store(service, "Migrations run before the deploy", project="focus")
    page = tab.page
    go(tab, service, f"#memory/{uid}")
    edit = page.locator("#edit-button")
    edit.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#edit-content")).to_be_focused()
    page.keyboard.press("End")
    page.keyboard.type(" Always.")
    page.locator("#edit-save").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#memory-content")).to_have_text(
        "Migrations run before the deploy Always.")
    expect(page.locator("#notice")).to_contain_text("Saved:")
    expect(edit).to_be_focused()
    expect(edit).to_have_attribute("aria-expanded", "false")

    page.keyboard.press("Enter")  # Edit… again, then Cancel
    expect(page.locator("#edit-form")).to_be_visible()
    page.locator("#edit-cancel").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#edit-form")).to_be_hidden()
    expect(edit).to_be_focused()

    page.keyboard.press("Enter")  # Save with nothing changed closes the form as Cancel does
    page.locator("#edit-save").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_have_text("Nothing changed.")
    expect(edit).to_be_focused()
    tab.assert_clean()


def test_user_text_takes_its_own_direction(tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: no element had a dir: an Arabic memory was laid out left to right ("3.2." at the
    far left of the sentence), in the list, the memory view and the editor."""
    uid = store(service, ARABIC, project="مشروع", kind="note", tags=["وسم"])
    with service.client() as http:
        http.post("/inject/report", json={
            "harness": "claude-code", "hook": "UserPromptSubmit", "project": "مشروع",
            "query": "ترحيل قاعدة البيانات", "uids": [uid], "chars": 90}).raise_for_status()
    page = tab.page
    direction = "el => [el.getAttribute('dir'), getComputedStyle(el).direction]"
    go(tab, service, "#search?q=" + "ترحيل")
    hit = page.locator("#search-results .hit").first
    expect(hit.locator(".hit-content")).to_have_text(ARABIC)
    assert hit.locator(".hit-content").evaluate(direction) == ["auto", "rtl"]
    assert hit.locator(".tag.project").evaluate(direction) == ["auto", "rtl"]
    assert hit.locator(".tag.muted").evaluate(direction) == ["auto", "rtl"]
    # the query quoted in the summary, isolated inside the page's English sentence
    query = page.locator("#search-summary [dir=auto]")
    expect(query).to_have_text("ترحيل")
    assert query.evaluate(direction) == ["auto", "rtl"]
    assert page.locator("#search-summary").evaluate(direction) == [None, "ltr"]
    assert page.locator("#search-q").evaluate(direction) == ["auto", "rtl"]

    page.click(f"a[href='#memory/{uid}']")
    expect(page.locator("#memory-content")).to_have_text(ARABIC)
    assert page.locator("#memory-content").evaluate(direction) == ["auto", "rtl"]
    project = page.locator("#memory-meta dd", has_text="مشروع")
    assert project.evaluate(direction) == ["auto", "rtl"]
    cells = page.locator("#memory-injections tbody td[dir=auto]")
    expect(cells).to_have_text(["claude-code", "UserPromptSubmit", "مشروع",
                                "ترحيل قاعدة البيانات"])
    assert cells.nth(3).evaluate(direction) == ["auto", "rtl"]
    page.click("#edit-button")
    assert page.locator("#edit-content").evaluate(direction) == ["auto", "rtl"]
    assert page.locator("#edit-project").evaluate(direction) == ["auto", "rtl"]
    page.click("#edit-cancel")

    page.click("#forget-button")
    assert page.locator("#confirm-detail").evaluate(direction) == ["auto", "rtl"]
    page.click("#confirm-ok")
    shown = page.locator("#notice [dir=auto] [dir=auto]")  # the memory, in "Forgotten: …"
    expect(shown).to_have_text(re.compile("^يجب تشغيل"))
    assert shown.evaluate(direction) == ["auto", "rtl"]
    page.locator("#notice").get_by_role("button", name="Undo").click()
    expect(page.locator("#notice")).to_contain_text("Restored:")
    tab.assert_clean()


def test_previews_are_cut_between_graphemes(tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: a preview was cut by UTF-16 unit: half of 🚀 (a lone surrogate, shown as �),
    half a flag, part of a ZWJ family."""
    uids = {text: store(service, text, project="graphemes") for text in (ROCKET, FAMILY, FLAG)}
    page = tab.page
    go(tab, service, "#search?project=graphemes")
    hits = page.locator("#search-results .hit-content")
    expect(hits).to_have_count(3)
    # the list's previews: 280 units; only the flag's memory is longer
    expect(hits.filter(has_text="ccc")).to_have_text("c" * 277 + "…")
    for text, kept in ((ROCKET, "a" * 58), (FAMILY, "b" * 55)):
        go(tab, service, f"#memory/{uids[text]}")
        page.click("#forget-button")
        page.click("#confirm-ok")  # the notice's preview: 60 units
        shown = page.locator("#notice [dir=auto] [dir=auto]")
        expect(shown).to_have_text(kept + "…")
        page.locator("#notice").get_by_role("button", name="Undo").click()
        expect(page.locator("#notice")).to_contain_text("Restored:")
    tab.assert_clean()


def test_the_forget_question_describes_the_memory_and_its_warning(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: the dialog's accessible description was empty: a screen reader said "Forget
    this memory?, dialog, Cancel" and neither which memory nor that older ones come back."""
    store(service, "The cache TTL is 300 seconds", project="describe")
    newer = store(service, "The cache TTL is 600 seconds", project="describe")
    page = tab.page
    go(tab, service, f"#memory/{newer}")
    page.click("#forget-button")
    expect(page.locator("#confirm-cancel")).to_be_focused()
    cdp = page.context.new_cdp_session(page)
    nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
    dialog = next(n for n in nodes if n.get("role", {}).get("value") == "dialog")
    assert dialog["name"]["value"] == "Forget this memory?"
    description = dialog.get("description", {}).get("value", "")
    assert "The cache TTL is 600 seconds" in description
    assert "It supersedes 1 older memory" in description
    page.click("#confirm-cancel")
    tab.assert_clean()


def luminance(color: str) -> float:
    """WCAG relative luminance of a computed `rgb(r, g, b)` (opaque)."""
    channels = [int(v) / 255 for v in re.findall(r"\d+(?:\.\d+)?", color)[:3]]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(one: str, other: str) -> float:
    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_fields_and_buttons_have_edges_of_3_to_1(
        browser: Browser, service: Service, scheme: str) -> None:  # noqa: F811
    """WCAG 1.4.11: the edge that shows where a control is stands out 3:1 from the page and from
    the control's own fill. Before: 1.28:1 in light, 1.61:1 in dark."""
    uid = store(service, f"A memory with buttons, in {scheme}", project="contrast")
    context = browser.new_context(viewport=WIDE, color_scheme=scheme)
    try:
        tab = Tab(context.new_page())
        tab.page.on("console",
                    lambda m: tab.errors.append(m.text) if m.type == "error" else None)
        page = tab.page
        edges = ("el => [getComputedStyle(el).borderTopColor, "
                 "getComputedStyle(el).backgroundColor]")

        def check(*selectors: str) -> None:
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            for selector in selectors:
                border, fill = page.locator(selector).evaluate(edges)
                assert contrast(border, background) >= 3, (scheme, selector, border, background)
                assert contrast(border, fill) >= 3, (scheme, selector, border, fill)

        go(tab, service, "#search?project=contrast")
        check("#search-q", "#search-project", "#search-since", "#search-limit", "#search-reset")
        go(tab, service, f"#memory/{uid}")
        page.click("#edit-button")
        check("#edit-button", "#edit-content", "#edit-kind", "#edit-cancel")
        tab.assert_clean()
    finally:
        context.close()


def test_a_long_project_keeps_the_telemetry_columns_in_view(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: a 202-character project (the service takes 256) pushed Query, Memories and Chars
    of "Latest injections" right of the box, even at 1280 px."""
    uid = store(service, "A memory injected under a long project", project="telemetry")
    with service.client() as http:
        http.post("/inject/report", json={
            "harness": "claude-code", "hook": "UserPromptSubmit", "project": LONG_PROJECT,
            "query": "which path", "uids": [uid], "chars": 90}).raise_for_status()
    page = tab.page
    go(tab, service, "#telemetry")
    table = page.locator("#telemetry-latest")
    expect(table).to_contain_text(LONG_PROJECT)
    beyond = table.evaluate("""table => {
      const box = table.closest('.table-wrap').getBoundingClientRect();
      return [...table.querySelectorAll('th')]
        .filter((th) => th.getBoundingClientRect().right > box.right + 1)
        .map((th) => th.textContent);
    }""")
    assert beyond == []
    go(tab, service, f"#memory/{uid}")  # the memory's own injections table too
    table = page.locator("#memory-injections")
    expect(table).to_contain_text(LONG_PROJECT)
    assert table.evaluate("t => t.scrollWidth <= t.closest('.table-wrap').clientWidth")
    tab.assert_clean()


@pytest.mark.parametrize("day", ["2026-13-45", "2026-02-30"])
def test_an_impossible_day_in_the_address_is_refused(
        tab: Tab, service: Service, day: str) -> None:  # noqa: F811
    """Before: `since=2026-13-45` went as 2027-02-14 (Date rolls it over), with the date field
    empty: "No results" with no filter to be seen."""
    store(service, f"The launch checklist, looked up since {day}", project=f"since-{day}")
    page = tab.page
    go(tab, service, f"#search?project=since-{day}&since=2026-01-01")  # a real day works
    expect(page.locator("#search-results .hit")).to_have_count(1)
    page.evaluate(f"location.hash = '#search?project=since-{day}&since={day}'")
    expect(page.locator("#notice")).to_have_text(
        f"since: {day} is not a day of the calendar (expected YYYY-MM-DD, e.g. 2026-05-04).")
    expect(page.locator("#search-results .hit")).to_have_count(0)
    expect(page.locator("#search-summary")).to_have_text("")
    tab.assert_clean()


def test_what_a_search_found_is_said_in_a_live_region(
        tab: Tab, service: Service) -> None:  # noqa: F811
    """Before: after Search or Next → the focus went to the bare heading and the result line was
    in no live region: a screen reader said "Search, heading level 2" and nothing of what was
    found. The notice box, a live region, was also shown in the same moment as its text."""
    store(service, "The deploy runbook lives in the ops wiki", project="live")
    page = tab.page
    go(tab, service, "#search?project=live")
    summary = page.locator("#search-summary")
    expect(summary).to_have_attribute("role", "status")
    notice = page.locator("#notice")
    assert notice.evaluate("el => !el.hidden && el.getAttribute('role') === 'status'")
    page.fill("#search-q", "deploy runbook")
    page.press("#search-q", "Enter")
    expect(summary).to_contain_text("Results 1–1 for “deploy runbook”")
    # what a screen reader is given: a polite live region holding that line
    cdp = page.context.new_cdp_session(page)
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "#search-summary"})
    ax = cdp.send("Accessibility.getPartialAXTree",
                  {"nodeId": node["nodeId"], "fetchRelatives": False})["nodes"][0]
    properties = {p["name"]: p["value"]["value"] for p in ax.get("properties", [])}
    assert ax["role"]["value"] == "status" and properties.get("live") == "polite", ax
    page.fill("#search-q", "no such words anywhere")
    page.press("#search-q", "Enter")
    expect(summary).to_have_text("No results for “no such words anywhere”.")
    tab.assert_clean()
