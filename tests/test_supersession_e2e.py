"""Supersession inside the real Claude Code binary (against tests/model_mock.py and a real
service): a fact remembered in one session and restated with a new value in a later one is
replaced in the next session's injection; the old value stays in history."""

from __future__ import annotations

import pytest
from model_mock import ModelMock
from test_harness_e2e import BLOCK, World, binaries, block_in, claude, world  # noqa: F401

pytestmark = pytest.mark.slow


def test_claude_code_a_restated_fact_replaces_the_old_one(world: World) -> None:  # noqa: F811
    world.memory_mcp("install", "claude-code", "--project", str(world.project))
    old, new = ("the staging database listens on port 6543",
                "the staging database now listens on port 6544")
    with ModelMock() as mock:
        mock.script({"text": "Noted."})
        claude(world, mock, f"remember that {old}")
        mock.script({"text": "Noted."})
        claude(world, mock, f"remember that {new}")  # a later session
        assert world.outcomes("UserPromptSubmit")[:2] == ["stored", "stored"]
        seen = len(mock.requests)
        mock.script({"text": "Port 6544."})
        claude(world, mock, "which port does the staging database listen on?")
        block = block_in(mock.bodies()[seen])
    assert "port 6544" in block and "port 6543" not in block, block
    with world.service.client() as http:  # type: ignore[union-attr]
        history = http.get("/api/memories", params={"source": "chat",
                                                    "include_superseded": "true"}).json()
        current = http.get("/api/memories", params={"source": "chat"}).json()
    assert {m["content"] for m in history["items"]} == {old, new}
    assert [m["content"] for m in current["items"]] == [new]
    [superseded] = [m for m in history["items"] if m["content"] == old]
    assert superseded["superseded_by"] == current["items"][0]["uid"]
