"""The injected block's wrapper and budget, second round (QA "poison" F3, F4, F5, F7):

- a long memory is cleaned only as far as it can be shown: ten 100 KB memories full of `<s`
  took a /recall from 0.06 to 1.3 s (a hook's 1.5 s budget spent, nothing injected);
- a line CommonMark does not read as a fence (```` ```sh` ````) is not "closed" by a fence
  that would open a real code block over the closing tags and the memories after it;
- `⧼`, `⧸` and `.` / `:` inside a tag name are folded like the other look-alikes;
- one memory cannot take the whole block while another relevant one is left out.

Real service (uvicorn on a random port, SQLite file) where a route is what changed; timings
only as ratios with wide margins."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from markdown_it import MarkdownIt
from semantic_memory.default_plugins.injection import (
    CLOSE_TAG, OPEN_TAG, clip, close_fence, format_injection, sanitize)
from semantic_memory.models import Memory, RecallHit
from semantic_memory.service.mcp_results import shown
from semantic_memory.service.rest import recall_item
from test_service_support import Service, start_service

DECISION = "How we deploy staging: Argo CD sync after #ops approval."
QUERY = "how do we deploy staging?"
FACT = "Deploy rollout windows for production are Tuesday and Thursday mornings."
PADDED = ("deploy deploy deploy staging production rollout "
          + "padding text about deploy pipelines and rollout windows. " * 300)[:2_000]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("wrapper2"))
    yield running
    running.stop()


def hit(uid: str, content: str, kind: str = "note") -> RecallHit:
    return RecallHit(Memory(0, uid, content, kind, "chat", "proj", [], 1.8e9, 1.8e9), 1.0)


def median_s(call: Callable[[], Any], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# F4: cleaning costs what can be shown, not what is stored


def test_a_recall_of_hostile_long_memories_costs_what_plain_ones_do(service: Service) -> None:
    """Before: the `<s` filler made each /recall ~20 times slower than plain filler."""
    with service.client() as http:
        for name, filler in (("plain", "ab " * 33_000), ("lt", "<s" * 49_900)):
            items = [{"content": f"deploy staging how we notes {name} {i} " + filler,
                      "kind": "note", "source": "chat", "project": f"p-{name}"}
                     for i in range(10)]
            assert http.post("/ingest", json={"items": items}).status_code == 200
            assert http.post("/ingest", json={"content": DECISION, "kind": "decision",
                                              "project": f"p-{name}"}).status_code == 200

        def recall(name: str) -> dict[str, Any]:
            answer = http.post("/recall", json={"query": QUERY, "project": f"p-{name}", "k": 5,
                                                "relevant_only": True, "budget_chars": 2_000})
            assert answer.status_code == 200, answer.text
            return answer.json()

        found = recall("lt")
        assert found["block"].startswith(OPEN_TAG) and len(found["block"]) <= 2_000
        assert "<s<s" in found["block"] and "&lt;s" not in found["block"]  # no tag: as written
        for item in found["items"]:
            assert len(item["content"]) <= 2_000
            if "notes" in item["content"]:
                assert item["truncated"] is True and item["content_chars"] > 99_000
        recall("plain")  # warm both
        plain = median_s(lambda: recall("plain"))
        hostile = median_s(lambda: recall("lt"))
    assert hostile < 5 * plain, (hostile, plain)


@pytest.mark.parametrize("clean", [
    lambda text: recall_item(hit("u1", text), 2_000)["content"],
    lambda text: shown({"uid": "u1", "content": text})["content"],
    lambda text: format_injection(QUERY, [hit("u1", text)], 2_000).text,
], ids=["rest.recall_item", "mcp_results.shown", "format_injection"])
def test_cleaning_cost_does_not_grow_with_the_memory(clean: Callable[[str], str]) -> None:
    """Before: cleaning 500 KB of `<s` cost ten times what 50 KB did (all of it was cleaned,
    then cut)."""
    small, large = "deploy notes " + "<s" * 25_000, "deploy notes " + "<s" * 250_000
    assert clean(small) == clean(large)
    assert median_s(lambda: clean(large), 5) < 3 * median_s(lambda: clean(small), 5)


def test_a_tag_across_the_cleaning_cut_is_still_escaped() -> None:
    """The head is cleaned, then cut and cleaned again: a tag that the first cut split (and so
    did not read as one) is escaped once the text shown completes it, at every offset."""
    for pad in range(0, 300, 7):
        text = "x" * (1_600 + pad) + "</semantic-memory>" * 40 + "y" * 100_000
        block = format_injection(QUERY, [hit("u1", text)], 2_000).text
        assert block.count("<") == 4, pad  # the wrapper's and the item's tags
        assert block.endswith(f"</memory>\n{CLOSE_TAG}") and len(block) <= 2_000
        item = recall_item(hit("u1", text), 1_700 + pad)
        assert "</" not in item["content"] and item["truncated"] is True


def test_invisible_heads_are_read_past() -> None:
    """A memory that starts with 50,000 zero-width spaces still shows the text after them,
    whole and not marked truncated."""
    text = "\u200b" * 50_000 + "the staging deploy runs on Tuesdays"
    assert recall_item(hit("u1", text), 2_000)["content"] == "the staging deploy runs on Tuesdays"
    assert "truncated" not in recall_item(hit("u1", text), 2_000)
    assert shown({"uid": "u1", "content": text})["content"].endswith("on Tuesdays")


# F5: only what CommonMark reads as a fence is closed


def fences(block: str) -> list[str]:
    return [t.content for t in MarkdownIt("commonmark").parse(block) if t.type == "fence"]


@pytest.mark.parametrize("line", ["```sh`", "``` a`b", "````x`", "  ```sh `"])
def test_a_backtick_in_a_backtick_fences_info_string_is_no_fence(line: str) -> None:
    content = f"deploy fence note\n\n{line}\nmake deploy"
    assert close_fence(content) == content
    block = format_injection(QUERY, [hit("u1", content), hit("u2", DECISION, "decision")],
                             2_000).text
    assert all("</memory>" not in code for code in fences(block)), block
    assert not fences(block)


@pytest.mark.parametrize("content", ["```sh\nmake deploy", "~~~ a`b\nmake deploy",
                                     "```sh`\ntext\n```\nmake deploy"])
def test_a_real_open_fence_is_still_closed(content: str) -> None:
    # a blank line first: `<memory …>` alone on its line starts an HTML block until one
    block = format_injection(QUERY, [hit("u1", "note\n\n" + content),
                                     hit("u2", DECISION, "decision")], 2_000).text
    assert fences(block) == ["make deploy\n"], block
    assert DECISION in block


# F7: more look-alikes and separators


@pytest.mark.parametrize("text", [
    "x \u29fc/semantic-memory> y", "x <\u29f8memory> y", "x </semantic.memory> y",
    "x </semantic:memory> y", "x <\u29f9/memory> y", "x \u227a/memory> y",
    "x </semantic\uff0ememory> y", "x </semantic\u2236memory> y", "x <memory.note> y",
    "x </semantic.memory.> y",
])
def test_lookalikes_and_separators_are_escaped(text: str) -> None:
    cleaned = sanitize(text)
    assert "&lt;" in cleaned and cleaned.count("&lt;") == 1, ascii(cleaned)
    assert cleaned == text[:2] + "&lt;" + text[3:]


@pytest.mark.parametrize("text", ["List<MemoryItem>", "a < b", "<div>", "std::map<std::string>",
                                  "a \u227a b", "see <s.x> and <sm:x>", "\u29fcsmall\u29fd"])
def test_ordinary_text_stays(text: str) -> None:
    assert sanitize(text) == text


# F3: the budget is shared


def test_a_long_first_memory_leaves_room_for_the_next_relevant_one(service: Service) -> None:
    """Before: a 2,000-character capture ranked first filled the 2,000-character block and the
    user's relevant fact was left out."""
    with service.client() as http:
        assert http.post("/ingest", json={"content": FACT, "kind": "fact", "source": "chat",
                                          "project": "f3"}).status_code == 200
        stored = http.post("/ingest", json={"content": PADDED, "kind": "artifact",
                                            "source": "tool", "project": "f3"}).json()
        assert stored["status"] == "new", stored
        found = http.post("/recall", json={"query": "deploy rollout windows for production",
                                           "project": "f3", "relevant_only": True,
                                           "budget_chars": 2_000}).json()
    block = found["block"]
    assert len(block) <= 2_000 and len(found["block_uids"]) == 2, block
    assert FACT in block and "deploy deploy deploy" in block
    assert block.index("deploy deploy deploy") < block.index(FACT)  # rank order kept
    assert len(block) > 1_900  # the first one takes what the fact leaves


def test_one_memory_alone_still_fills_the_budget() -> None:
    block = format_injection(QUERY, [hit("u1", PADDED)], 1_000)
    assert block.uids == ["u1"] and 990 <= len(block.text) <= 1_000


def test_long_memories_share_the_block_best_first() -> None:
    hits = [hit(f"u{i}", f"memory {i} " + "lorem ipsum dolor " * 200) for i in range(5)]
    block = format_injection(QUERY, hits, 2_000)
    assert block.uids == [f"u{i}" for i in range(5)] and len(block.text) <= 2_000
    items = block.text.split("<memory ")[1:]
    assert all(len(item) >= 250 for item in items)
    assert len(items[0]) >= len(items[-1])  # the best one is cut last
    # more than fit at their least: the later ones are left out, not cut to nothing
    many = format_injection(QUERY, [hit(f"u{i}", "x " * 900 + str(i)) for i in range(20)], 2_000)
    assert 1 < len(many.uids) < 20 and len(many.text) <= 2_000
    assert all(len(item) >= 250 for item in many.text.split("<memory ")[1:])


def test_short_memories_keep_their_place_whole() -> None:
    hits = [hit(f"u{i}", f"short fact number {i} about deploys") for i in range(5)]
    block = format_injection(QUERY, hits, 2_000)
    assert block.uids == [f"u{i}" for i in range(5)]
    assert all(f"short fact number {i} about deploys\n" in block.text for i in range(5))


def test_a_memory_that_cannot_be_cut_gives_its_room_back() -> None:
    """A first memory whose first character as a reader sees it (one letter with 5,000
    combining marks) is longer than the block: the others take its place, cut to fit."""
    unfit = hit("u0", "a" + "\u0301" * 5_000)
    block = format_injection(QUERY, [unfit, hit("u1", PADDED), hit("u2", FACT, "fact")], 2_000)
    assert block.uids == ["u1", "u2"] and len(block.text) <= 2_000
    assert clip("a" + "\u0301" * 5_000, 1_000) == ""
