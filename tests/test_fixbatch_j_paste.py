"""A message over MESSAGE_CHARS keeps its head and tail around `[… N characters left out …]`, as
a tool's capture record does: a QA pass's pasted 7 MB log made thousands of memories of log
noise, and past MEMORY_MAX_BODY_BYTES (4 MiB) its whole exchange was refused (413, into
spool/rejected/; /tmp/qa-capture/repro_paste.sh). The opencode plugin's `flushItems` (the
shipped bundle) cuts the same characters, astral ones and whitespace at the cut too."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from semantic_memory.harness.transcript import MESSAGE_CHARS, capped
from test_fixbatch_j_support import claude_line, conversations, hook_flush, plugin_items
from test_service_support import Service, start_service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("paste"))
    yield svc
    svc.stop()


def test_a_message_keeps_its_head_and_tail() -> None:
    assert capped("x" * MESSAGE_CHARS) == "x" * MESSAGE_CHARS
    half = MESSAGE_CHARS // 2
    text = "a" * (half - 2) + "  \n" + "b" * 50_000 + "\n " + "c" * (half - 1)
    assert capped(text) == ("a" * (half - 2) + "\n[… " + str(len(text) - MESSAGE_CHARS)
                            + " characters left out …]\n" + "c" * (half - 1))


def test_a_hook_flush_keeps_the_head_and_tail_of_a_pasted_log(service: Service,
                                                              tmp_path: Path) -> None:
    """The QA pass's paste: refused whole (413, past MEMORY_MAX_BODY_BYTES) with the
    exchanges beside it; now its head and tail are stored, and nothing is refused."""
    log = "".join(f"2025-03-10 08:{i // 60 % 60:02d}:{i % 60:02d} ERROR worker-{i % 8} "
                  f"PASTEWORD ConnectionResetError: peer reset reading body #{i}\n"
                  for i in range(70_000))
    paste = f"Why does the worker keep dying? Here is the log:\n{log}"
    assert len(paste.encode()) > 6_000_000 > 4 << 20  # MEMORY_MAX_BODY_BYTES
    lines = [claude_line("user", paste),
             claude_line("assistant", "The upstream closes idle sockets after 30 s; lower the "
                                      "pool's keep-alive to 25 s."),
             claude_line("user", "Which port does the metrics exporter use?"),
             claude_line("assistant", "It listens on 9464.")]
    memories = hook_flush(service, tmp_path, lines, "paste")
    contents = [m["content"] for m in memories]
    pasted = [c for c in contents if "PASTEWORD" in c]
    # 32,000 characters of log: ~35 pieces (each headed by the question), not ~6,000.
    assert 20 < len(pasted) < 40, len(pasted)
    marker = f"[… {len(paste.strip()) - MESSAGE_CHARS} characters left out …]"
    assert sum(marker in c for c in contents) == 1
    assert contents[0].startswith("User: Why does the worker keep dying? Here is the log:\n")
    assert any("peer reset reading body #69999" in c for c in pasted)  # the tail
    assert not any("#35000" in c for c in pasted)  # the middle
    assert any("keep-alive to 25 s" in c for c in contents)
    assert contents[-1] == ("User: Which port does the metrics exporter use?\n"
                            "Assistant: It listens on 9464.")
    assert not list((tmp_path / "spool").glob("rejected/*"))


def test_the_plugin_cuts_what_the_hooks_cut() -> None:
    big = ["🙂" * (MESSAGE_CHARS + 1), "x" * MESSAGE_CHARS, "y" * (MESSAGE_CHARS + 1),
           "a " * 20_000, "head\n" + " " * 40_000 + "tail", "é🙂" * 20_000 + " \n end",
           "z" * (MESSAGE_CHARS // 2 - 1) + "\n\n 🙂" + "w" * 50_000]
    cases = conversations(random.Random(20261208), big, big, count=40)
    items = plugin_items(cases)
    assert sum(any("characters left out" in json.dumps(item, ensure_ascii=False)
                   for item, _ in found) for found in items) > 10
