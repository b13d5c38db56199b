"""CLAUDE_CONFIG_DIR moves Claude Code's user config (`settings.json`, `.claude.json`): install
writes the hooks and the MCP server there, and the real `claude` binary runs them; doctor and
uninstall find them there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from model_mock import ModelMock
from test_harness_e2e import FACT, QUESTION, World, binaries, block_in, claude  # noqa: F401
from test_service_support import start_service

pytestmark = pytest.mark.slow


def test_install_writes_where_claude_config_dir_points(tmp_path: Path) -> None:
    moved = tmp_path / "claude-config"
    service = start_service(tmp_path / "svc")
    try:
        world = World(tmp_path, service, CLAUDE_CONFIG_DIR=str(moved))
        world.memory_mcp("install", "claude-code")
        assert not (world.home / ".claude").exists() and not (world.home / ".claude.json").exists()
        settings = json.loads((moved / "settings.json").read_text())
        assert "memory-mcp" in settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
        assert "memory" in json.loads((moved / ".claude.json").read_text())["mcpServers"]
        doctor = world.memory_mcp("doctor")
        assert "  user     hooks: SessionStart UserPromptSubmit PreCompact SessionEnd " \
               "(not: PostToolUse) · MCP server: yes" in doctor, doctor

        uid = world.store(FACT)
        with ModelMock() as mock:
            mock.script({"text": "Port 5433."})
            claude(world, mock, QUESTION)
            block = block_in(mock.bodies()[0])
        assert FACT in block and uid in block

        world.memory_mcp("uninstall", "claude-code")
        assert not (moved / "settings.json").exists()
        # Claude Code keeps its own state in .claude.json: only our server leaves it.
        assert "memory" not in json.loads((moved / ".claude.json").read_text()).get(
            "mcpServers", {})
    finally:
        service.stop()
