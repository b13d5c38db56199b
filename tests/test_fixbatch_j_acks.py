"""An exchange whose user text only acknowledges ("thanks!", "ok", "continue", "lgtm") and whose
reply is short ("You're welcome! Let me know if you need anything else.") is not stored: a QA
pass found each stored as a memory. A short question keeps its short answer ("which port?" /
"5432", which the 40-character floor of a memory left out too), and so does an acknowledgement
whose reply says something. The opencode plugin's `flushItems` (the shipped bundle) leaves out
the same exchanges."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import hook_log
from semantic_memory.harness.transcript import ACK_REPLY_WORDS, Turn, acknowledges
from test_fixbatch_j_support import MARCH_10, claude_line, conversations, hook_flush, plugin_items
from test_service_support import Service, start_service

#: The QA pass's trivial exchanges: each was stored as a memory.
TRIVIAL = [("thanks!", "You're welcome! Let me know if you need anything else."),
           ("ok", "Great, I'll proceed with the next step then."),
           ("continue", "Continuing with the refactor now."),
           ("lgtm", "Thanks! I've committed the change and pushed it.")]
#: Exchanges that stay: a short question's short answer, a confirmation's short report of what
#: was done, and an acknowledgement whose reply says something.
KEPT = [("which port?", "5432"),
        ("yes", "Dropped the users table and re-ran the migration."),
        ("continue", "Continuing: the 14 call sites of UserService now use AccountService, "
                     "the old class is deleted and the whole test suite passes again.")]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("acks"))
    yield svc
    svc.stop()


def test_acknowledgements_and_what_is_not_one() -> None:
    for ack in ("ok", "OK.", "thanks!", "Thank you very much!", "lgtm 👍", "👍", "ty",
                "lgtm, continue", "Continue, thanks", "k", "Спасибо!", "谢谢！", "sounds good"):
        assert acknowledges(ack), ack
    for other in ("which port?", "ok?", "no", "fix it", "yes, but use port 5433", "yes",
                  "go ahead", "y", "sure, do it", "please",
                  "continue with the payments module", "thanks, now rename UserService",
                  "okthanks", "", "?", "ok " * 40):
        assert not acknowledges(other), other
    assert ACK_REPLY_WORDS == 12


def test_a_hook_flush_leaves_out_exchanges_that_only_acknowledge(service: Service,
                                                                 tmp_path: Path) -> None:
    lines = [claude_line(role, text)
             for user, reply in [("Why does the checkout test fail on CI?",
                                  "The Redis fixture flushes keys between workers."),
                                 *TRIVIAL, *KEPT]
             for role, text in (("user", user), ("assistant", reply))]
    memories = hook_flush(service, tmp_path, lines, "acks")
    assert [m["content"] for m in memories] == [
        "User: Why does the checkout test fail on CI?\n"
        "Assistant: The Redis fixture flushes keys between workers.",
        *(f"User: {user}\nAssistant: {reply}" for user, reply in KEPT)]
    assert hook_log(tmp_path)[-1]["detail"].startswith("4 chunks: 4 new")


def test_the_plugin_leaves_out_what_the_hooks_leave_out() -> None:
    acks = ["ok", "thanks!", "lgtm 👍", "👍", "yes, go ahead", "lgtm, continue", "ok?", "continue", "谢谢！",
            "which port?", "no"]
    replies = ["Done.", "5432", "You're welcome! Let me know if you need anything else.",
               "one two three four five six seven eight nine ten eleven twelve",
               "one two three four five six seven eight nine ten eleven twelve thirteen", ""]
    cases = conversations(random.Random(20261207), acks, replies)
    cases += [[Turn("user", user, MARCH_10), Turn("assistant", reply, MARCH_10 + 1)]
              for user, reply in TRIVIAL + KEPT]
    items = plugin_items(cases)
    assert items[-len(KEPT) - len(TRIVIAL):] == [[]] * len(TRIVIAL) + [
        [({"content": f"User: {user}\nAssistant: {reply}", "created_at": MARCH_10}, 1)]
        for user, reply in KEPT]
