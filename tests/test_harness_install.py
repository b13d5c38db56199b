"""`memory-mcp install / uninstall / doctor` run as a user runs them, against real config files
that already hold the user's own hooks, servers and settings: install adds exactly our entries
(and trusts them where the harness asks), keeps everything else, is idempotent; uninstall gives
back the user's files byte for byte, and no backup is left where none was needed; doctor shows
the wiring."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from harness_support import closed_port, hanging_server, run_hook
from semantic_memory.harness.install import MCP_ENV_VARS
from semantic_memory.service.mcp_front import CACHE_NAME
from semantic_memory_codex import EVENT_LABELS, hook_hash
from test_service_support import Service, memory_mcp_command, start_service

OURS = ["SessionStart", "UserPromptSubmit", "PreCompact", "SessionEnd"]
#: The installed entry point (beside the interpreter), as install writes it into MCP entries.
MEMORY_MCP = memory_mcp_command()[0]
HARNESSES = ["claude-code", "codex", "example", "kimi-code"]

# --- helpers ---------------------------------------------------------------------------------


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    """No MEMORY_* from the caller; HOME, the harness homes and the db (so the hook log) in tmp.
    CODEX_HOME is a symlink: Codex keys trust by the real path of hooks.json."""
    for folder in ("home", "codex-real", "kimi", "project"):
        (tmp / folder).mkdir(exist_ok=True)
    if not (tmp / "codex").exists():
        (tmp / "codex").symlink_to(tmp / "codex-real")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(HOME=str(tmp / "home"), CODEX_HOME=str(tmp / "codex"),
               KIMI_CODE_HOME=str(tmp / "kimi"), MEMORY_DB_PATH=str(tmp / "memory.db"), **extra)
    return env


def memory_mcp(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)


def ok(env: dict[str, str], *args: str) -> str:
    done = memory_mcp(env, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def write(path: Path, content: dict[str, Any] | str) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    return path.read_bytes()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (backups included), by relative path; not the MCP proxies'
    start-up cache, which `install` fills beside the db in a detached process."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if CACHE_NAME not in p.name and p.is_file()}


def ours(doc: dict[str, Any], harness: str, event: str) -> list[dict[str, Any]]:
    """Our handlers for `event` in a Claude Code / Codex hooks document."""
    return [h for g in doc.get("hooks", {}).get(event, []) for h in g["hooks"]
            if f"memory-mcp hook {harness} {event}" in h["command"]]


def backup_of(path: Path) -> bytes:
    found = list(path.parent.glob(f"{path.name}.bak-*"))
    assert len(found) == 1, found
    return found[0].read_bytes()


def backups(root: Path) -> list[Path]:
    return sorted(root.rglob("*.bak-*"))


# The user's own configs, as install finds them.
CLAUDE_SETTINGS = {
    "theme": "dark", "model": "opus",
    "permissions": {"allow": ["Bash(git status:*)"], "deny": ["Read(.env)"]},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "~/bin/prompt-log"}]}],
        "PreToolUse": [{"matcher": "Bash",
                        "hooks": [{"type": "command", "command": "guard.sh", "timeout": 5}]}]}}
CLAUDE_STATE = {"numStartups": 41, "userID": "abc123", "projects": {"/src/x": {"history": []}},
                "mcpServers": {"github": {"type": "http", "url": "https://api.example/mcp"}}}
CODEX_USER_HANDLER = {"type": "command", "command": "/opt/hooks/log.py UserPromptSubmit",
                      "timeout": 10}
KIMI_CONFIG = """\
default_model = "kimi-k2"

[providers.moonshot]
type = "kimi"
base_url = "https://api.moonshot.ai/v1"
api_key = "sk-test"

[models.kimi-k2]
provider = "moonshot"
model = "kimi-k2-0905"

[[hooks]]
event = "PreToolUse"
command = "/usr/local/bin/kimi-guard"
matcher = "Shell"
timeout = 10
"""


def claude_files(tmp: Path, scope: str) -> tuple[Path, Path, list[str]]:
    """(settings file, MCP file, CLI scope args), each file holding the user's own entries."""
    mcp_file = tmp / "home/.claude.json"  # both scopes: the project's server is "local"
    if scope == "user":
        settings = tmp / "home/.claude/settings.json"
        args: list[str] = []
    else:
        settings = tmp / "project/.claude/settings.local.json"
        args = ["--project", str(tmp / "project")]
        # The project's shared, committed file: never written.
        write(tmp / "project/.mcp.json", {"mcpServers": CLAUDE_STATE["mcpServers"]})
    write(settings, CLAUDE_SETTINGS)
    write(mcp_file, CLAUDE_STATE)
    return settings, mcp_file, args


def claude_server(tmp: Path, scope: str) -> Any:
    """Our server entry where install puts it for `scope` (None when absent)."""
    doc = json.loads((tmp / "home/.claude.json").read_text())
    if scope == "project":
        doc = doc.get("projects", {}).get(str(tmp / "project"), {})
    return doc.get("mcpServers", {}).get("memory")


def codex_files(tmp: Path) -> tuple[Path, Path, str]:
    """hooks.json and config.toml with the user's hook, settings, server and trust entry;
    the real path that trust keys start with."""
    real = os.path.realpath(tmp / "codex-real" / "hooks.json")
    write(tmp / "codex/hooks.json",
          {"hooks": {"UserPromptSubmit": [{"hooks": [CODEX_USER_HANDLER]}]}})
    write(tmp / "codex/config.toml", f"""\
# my settings
model = "gpt-5"
approval_policy = "on-request"

[mcp_servers.github]
command = "gh-mcp"
args = ["--stdio"]

[hooks.state."{real}:user_prompt_submit:0:0"]
trusted_hash = "{hook_hash("UserPromptSubmit", CODEX_USER_HANDLER)}"
""")
    return tmp / "codex/hooks.json", tmp / "codex/config.toml", real


def trust_state(config: Path) -> dict[str, str]:
    state = tomllib.loads(config.read_text()).get("hooks", {}).get("state", {})
    return {key: value["trusted_hash"] for key, value in state.items()}


# --- Claude Code -----------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["user", "project"])
def test_claude_install_round_trip_keeps_the_users_entries(tmp_path: Path, scope: str) -> None:
    """Install adds our hooks, server and permission beside the user's; a second install and a
    second uninstall change nothing; uninstall gives back the user's exact content."""
    env = cli_env(tmp_path)
    settings, mcp_file, args = claude_files(tmp_path, scope)
    before = {p: p.read_bytes() for p in (settings, mcp_file)}
    other = claude_files(tmp_path, "project" if scope == "user" else "user")[0].parent
    other_before = snapshot(other)  # the other scope's settings, not to be touched
    shared = tmp_path / "project/.mcp.json"
    shared_before = shared.read_bytes() if shared.exists() else None

    ok(env, "install", "claude-code", *args)
    doc, servers = json.loads(settings.read_text()), json.loads(mcp_file.read_text())
    for event in OURS:
        [handler] = ours(doc, "claude-code", event)
        assert handler["timeout"] == 3 and isinstance(handler["timeout"], int)  # 1.5 s budget
        assert os.path.isabs(handler["command"].split()[0])  # no PATH lookup per hook
    assert "PostToolUse" not in doc["hooks"]
    original = json.loads(before[settings])
    assert doc["hooks"]["UserPromptSubmit"][0] == original["hooks"]["UserPromptSubmit"][0]
    assert doc["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    assert doc["permissions"] == {"allow": ["Bash(git status:*)", "mcp__memory"],
                                  "deny": ["Read(.env)"]}
    assert (doc["theme"], doc["model"]) == ("dark", "opus")
    expected = json.loads(before[mcp_file])  # other servers and unrelated state kept
    ours_entry = {"type": "stdio", "command": MEMORY_MCP, "args": ["proxy"]}
    if scope == "user":
        expected["mcpServers"]["memory"] = ours_entry
    else:  # Claude Code's local scope: this machine's path stays out of the shared .mcp.json
        expected["projects"][str(tmp_path / "project")] = {"mcpServers": {"memory": ours_entry}}
    assert servers == expected
    assert backups(tmp_path) == []  # uninstall can give each file back exactly: no backup
    assert snapshot(other) == other_before
    assert (shared.read_bytes() if shared.exists() else None) == shared_before

    installed = snapshot(tmp_path)
    assert "nothing to install" in ok(env, "install", "claude-code", *args)
    assert snapshot(tmp_path) == installed

    ok(env, "uninstall", "claude-code", *args)
    for path, content in before.items():
        assert path.read_bytes() == content
    assert backups(tmp_path) == []
    uninstalled = snapshot(tmp_path)
    assert "nothing to uninstall" in ok(env, "uninstall", "claude-code", *args)
    assert snapshot(tmp_path) == uninstalled


def test_claude_dry_run_prints_the_diff_and_changes_nothing(tmp_path: Path) -> None:
    """--dry-run shows what install would write, as a unified diff, and writes nothing."""
    env = cli_env(tmp_path)
    settings, mcp_file, _ = claude_files(tmp_path, "user")
    before = snapshot(tmp_path)
    done = memory_mcp(env, "install", "claude-code", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"--- {settings}\n+++ {settings}\n@@ " in done.stdout
    assert f"--- {mcp_file}\n+++ {mcp_file}\n@@ " in done.stdout
    assert any(line.startswith("+") and "hook claude-code SessionStart" in line
               for line in done.stdout.splitlines())
    assert '+      "type": "stdio",' in done.stdout and '+        "proxy"' in done.stdout
    assert "2 file(s) would change" in done.stderr
    assert snapshot(tmp_path) == before


def test_claude_tool_hook_only_with_tool_capture(tmp_path: Path) -> None:
    """PostToolUse costs a process per tool call: it is installed only when tool capture is
    on at install time, and a later install without it takes it out again."""
    env = cli_env(tmp_path)
    settings, _, _ = claude_files(tmp_path, "user")
    ok({**env, "MEMORY_PLUGIN_TOOL_CAPTURE": "Bash,Read"}, "install", "claude-code")
    groups = json.loads(settings.read_text())["hooks"]["PostToolUse"]
    assert [g["matcher"] for g in groups] == ["*"]
    assert ours({"hooks": {"PostToolUse": groups}}, "claude-code", "PostToolUse")
    ok(env, "install", "claude-code")
    doc = json.loads(settings.read_text())
    assert "PostToolUse" not in doc["hooks"] and all(ours(doc, "claude-code", e) for e in OURS)


def test_claude_mcp_url_and_timeout_follow_the_settings(tmp_path: Path) -> None:
    """With --mcp http the MCP server is MEMORY_PLUGIN_URL + /mcp; the hook timeout is whole
    seconds above the hook's own budget."""
    env = cli_env(tmp_path, MEMORY_PLUGIN_URL="http://127.0.0.1:9911/", MEMORY_HOOK_BUDGET_S="4")
    settings, mcp_file, args = claude_files(tmp_path, "project")
    ok(env, "install", "claude-code", *args, "--mcp", "http")
    assert claude_server(tmp_path, "project") == {"type": "http",
                                                  "url": "http://127.0.0.1:9911/mcp"}
    doc = json.loads(settings.read_text())
    assert {ours(doc, "claude-code", e)[0]["timeout"] for e in OURS} == {8}


def test_an_http_registration_follows_memory_port(tmp_path: Path) -> None:
    """Without MEMORY_PLUGIN_URL, --mcp http registered port 8765 whatever MEMORY_PORT said."""
    env = cli_env(tmp_path, MEMORY_PORT="44913")
    _, _, args = claude_files(tmp_path, "project")
    ok(env, "install", "claude-code", *args, "--mcp", "http")
    assert claude_server(tmp_path, "project") == {"type": "http",
                                                  "url": "http://127.0.0.1:44913/mcp"}


def test_claude_mcp_stdio_and_none(tmp_path: Path) -> None:
    """--mcp stdio registers `memory-mcp --stdio`; --mcp none registers no server and allows
    no tool, but still installs the hooks; installing again with the default swaps in the
    proxy."""
    env = cli_env(tmp_path)
    stdio, none = tmp_path / "project", tmp_path / "none-project"
    none.mkdir()
    ok(env, "install", "claude-code", "--project", str(stdio), "--mcp", "stdio")
    server = claude_server(tmp_path, "project")
    assert server["type"] == "stdio" and server["args"] == ["--stdio"]
    assert os.path.isabs(server["command"]) and Path(server["command"]).name == "memory-mcp"
    assert "mcp__memory" in json.loads((stdio / ".claude/settings.local.json").read_text())[
        "permissions"]["allow"]
    ok(env, "install", "claude-code", "--project", str(stdio))
    assert claude_server(tmp_path, "project") == {
        "type": "stdio", "command": MEMORY_MCP, "args": ["proxy"]}

    ok(env, "install", "claude-code", "--project", str(none), "--mcp", "none")
    assert not (none / ".mcp.json").exists()
    assert str(none) not in json.loads((tmp_path / "home/.claude.json").read_text())["projects"]
    doc = json.loads((none / ".claude/settings.local.json").read_text())
    assert "permissions" not in doc and all(ours(doc, "claude-code", e) for e in OURS)


# --- Codex -----------------------------------------------------------------------------------


def test_codex_hook_hash_matches_codex_0_171() -> None:
    """A trust hash that differs from Codex's by one byte leaves the hook untrusted (silently
    not run): this one was read back from a real Codex 0.171 config."""
    handler = {"type": "command", "command": "/tmp/research/codex/bin/hooklog.py UserPromptSubmit"}
    assert hook_hash("UserPromptSubmit", handler) == (
        "sha256:0ba48dc3dd8237c94720fe34846a6e87b0b609814abc03c4e4229a2d952ac8ca")


def test_codex_install_trusts_exactly_our_hooks(tmp_path: Path) -> None:
    """Each of our handlers gets the trust entry Codex looks for (real path, event label,
    position, hash of the handler as written); the user's hook, trust and settings stay."""
    env = cli_env(tmp_path)
    hooks_json, config, real = codex_files(tmp_path)
    ok(env, "install", "codex")

    doc = json.loads(hooks_json.read_text())
    assert doc["hooks"]["UserPromptSubmit"][0] == {"hooks": [CODEX_USER_HANDLER]}
    expected = {f"{real}:user_prompt_submit:0:0": hook_hash("UserPromptSubmit", CODEX_USER_HANDLER)}
    for event in OURS:
        assert len(ours(doc, "codex", event)) == 1
        for gi, group in enumerate(doc["hooks"][event]):
            for hi, handler in enumerate(group["hooks"]):
                if "memory-mcp hook codex" in handler["command"]:
                    expected[f"{real}:{EVENT_LABELS[event]}:{gi}:{hi}"] = hook_hash(
                        event, handler, group.get("matcher"))
    assert trust_state(config) == expected

    toml = tomllib.loads(config.read_text())
    assert (toml["model"], toml["approval_policy"]) == ("gpt-5", "on-request")
    assert toml["mcp_servers"]["github"] == {"command": "gh-mcp", "args": ["--stdio"]}
    assert toml["mcp_servers"]["memory"] == {
        "command": MEMORY_MCP, "args": ["proxy"], "env_vars": list(MCP_ENV_VARS),
        "tools": {"memory_store": {"approval_mode": "approve"}}}
    assert config.read_text().startswith("# my settings\n")


def test_codex_round_trip_dry_run_and_project_note(tmp_path: Path) -> None:
    """Dry run writes nothing; --project says it does not apply; install is idempotent and
    uninstall gives back the user's files."""
    env = cli_env(tmp_path)
    hooks_json, config, _ = codex_files(tmp_path)
    before = {p: p.read_text() for p in (hooks_json, config)}
    original = snapshot(tmp_path)
    dry = ok(env, "install", "codex", "--dry-run")
    assert f"+++ {hooks_json}" in dry and "+[mcp_servers.memory]" in dry
    assert snapshot(tmp_path) == original

    out = ok(env, "install", "codex", "--project", str(tmp_path / "project"))
    assert "--project does not apply to Codex" in out
    assert backups(tmp_path) == []
    installed = snapshot(tmp_path)
    assert "nothing to install" in ok(env, "install", "codex")
    assert snapshot(tmp_path) == installed

    ok(env, "uninstall", "codex")
    assert (hooks_json.read_text(), config.read_text()) == (before[hooks_json], before[config])
    assert backups(tmp_path) == []
    uninstalled = snapshot(tmp_path)
    assert "nothing to uninstall" in ok(env, "uninstall", "codex")
    assert snapshot(tmp_path) == uninstalled


def test_codex_config_without_a_final_newline_installs_once_and_comes_back(
        tmp_path: Path) -> None:
    """A config.toml whose last line has no newline: the first added table got no blank line
    before it (tomlkit's added newline made that line a change carrying the header), so a
    second install moved the blank lines, a third moved them back, and uninstall after a
    re-install left a newline and a backup behind."""
    env = cli_env(tmp_path)
    config = tmp_path / "codex" / "config.toml"  # CODEX_HOME
    config.write_bytes(b'model = "o3"')
    ok(env, "install", "codex")
    text = config.read_text()
    assert text.startswith('model = "o3"\n\n['), text[:40]
    installed = snapshot(tmp_path)
    for _ in range(2):
        assert "nothing to install" in ok(env, "install", "codex", "--dry-run")
        assert "nothing to install" in ok(env, "install", "codex")
        assert snapshot(tmp_path) == installed
    ok(env, "uninstall", "codex")
    assert config.read_bytes() == b'model = "o3"'
    assert backups(tmp_path) == []


def test_codex_uninstall_rekeys_a_user_hook_that_moves(tmp_path: Path) -> None:
    """A user group added after ours moves down when ours goes: its trust entry must follow
    (same hash, new index) or Codex stops running it; the user's first entry is left alone."""
    env = cli_env(tmp_path)
    hooks_json, config, real = codex_files(tmp_path)
    ok(env, "install", "codex")
    second = {"type": "command", "command": "/opt/hooks/second.sh", "timeout": 7}
    doc = json.loads(hooks_json.read_text())
    doc["hooks"]["UserPromptSubmit"].append({"hooks": [second]})
    assert len(doc["hooks"]["UserPromptSubmit"]) == 3  # user's, ours, the new one
    write(hooks_json, doc)
    with config.open("a") as handle:
        handle.write(f'\n[hooks.state."{real}:user_prompt_submit:2:0"]\n'
                     f'trusted_hash = "{hook_hash("UserPromptSubmit", second)}"\n')

    ok(env, "uninstall", "codex")
    assert json.loads(hooks_json.read_text())["hooks"] == {
        "UserPromptSubmit": [{"hooks": [CODEX_USER_HANDLER]}, {"hooks": [second]}]}
    assert trust_state(config) == {
        f"{real}:user_prompt_submit:0:0": hook_hash("UserPromptSubmit", CODEX_USER_HANDLER),
        f"{real}:user_prompt_submit:1:0": hook_hash("UserPromptSubmit", second)}


# --- Kimi Code -------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("setsid") is None, reason="no setsid on this machine")
def test_kimi_install_appends_plain_hook_tables(tmp_path: Path) -> None:
    """Kimi drops every hook when one table has an unknown key, so ours hold exactly event,
    command and timeout; the tool hook runs detached (Kimi kills its process group)."""
    env = cli_env(tmp_path, MEMORY_PLUGIN_TOOL_CAPTURE="Bash")
    config, mcp_file = tmp_path / "kimi/config.toml", tmp_path / "kimi/mcp.json"
    write(config, KIMI_CONFIG)
    write(mcp_file, {"mcpServers": {"context7": {"url": "https://mcp.context7.com/mcp"}}})
    ok(env, "install", "kimi-code")

    doc, original = tomllib.loads(config.read_text()), tomllib.loads(KIMI_CONFIG)
    assert doc["hooks"][0] == original["hooks"][0]  # the user's hook, then their tables
    assert {**doc, "hooks": None} == {**original, "hooks": None}
    added = {entry["event"]: entry for entry in doc["hooks"][1:]}
    assert sorted(added) == sorted([*OURS, "PostToolUse"]) and len(doc["hooks"]) == 6
    for event, entry in added.items():
        assert sorted(entry) == ["command", "event", "timeout"] and entry["timeout"] == 3
        assert f"memory-mcp hook kimi-code {event}" in entry["command"]
    assert added["PostToolUse"]["command"].split()[:2] == [shutil.which("setsid"), "-f"]
    assert json.loads(mcp_file.read_text())["mcpServers"] == {
        "context7": {"url": "https://mcp.context7.com/mcp"},
        "memory": {"command": MEMORY_MCP, "args": ["proxy"]}}


def test_kimi_round_trip_restores_the_users_text(tmp_path: Path) -> None:
    """A second install changes nothing; uninstall leaves the user's TOML text as it was."""
    env = cli_env(tmp_path)
    config, mcp_file = tmp_path / "kimi/config.toml", tmp_path / "kimi/mcp.json"
    write(config, KIMI_CONFIG)
    mcp_before = write(mcp_file, {"mcpServers": {"context7": {"url": "https://c7.example/mcp"}}})
    ok(env, "install", "kimi-code")
    assert backups(tmp_path) == []
    installed = snapshot(tmp_path)
    assert "nothing to install" in ok(env, "install", "kimi-code")
    assert snapshot(tmp_path) == installed

    ok(env, "uninstall", "kimi-code")
    assert config.read_text() == KIMI_CONFIG
    assert mcp_file.read_bytes() == mcp_before
    assert backups(tmp_path) == []


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("harness, file, content", [
    ("claude-code", "home/.claude/settings.json", '{"theme": "dark",\n'),
    ("codex", "codex/config.toml", 'model = "gpt-5"\n[hooks\n'),
    ("kimi-code", "kimi/config.toml", "default_model = \n"),
    # Valid, but not laid out as the harness (or install) would ever write it.
    ("claude-code", "home/.claude/settings.json", '{"hooks": []}'),
    ("claude-code", "home/.claude/settings.json", '{"permissions": {"allow": "x"}}'),
    ("claude-code", "home/.claude/settings.json", '{"hooks": {"SessionStart": {}}}'),
    ("claude-code", "home/.claude.json", '{"mcpServers": []}'),
    ("codex", "codex/config.toml", "hooks = 3\n"),
    ("kimi-code", "kimi/config.toml", 'hooks = "x"\n'),
])
def test_malformed_config_fails_in_one_line_and_is_left_alone(
        tmp_path: Path, harness: str, file: str, content: str) -> None:
    """A file install cannot parse is the user's to fix: one line naming it, no traceback,
    nothing written anywhere (not even a backup)."""
    env = cli_env(tmp_path)
    path = tmp_path / file
    write(path, content)
    before = snapshot(tmp_path)
    done = memory_mcp(env, "install", harness)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert str(path) in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("harness, file", [
    ("claude-code", "project/.mcp.json"), ("kimi-code", "kimi/mcp.json")])
def test_someone_elses_memory_server_is_never_replaced(tmp_path: Path, harness: str,
                                                        file: str) -> None:
    """A `memory` MCP server that is not this service stays: install refuses in one line and
    writes nothing; `--mcp none` installs the hooks alone."""
    env = cli_env(tmp_path)
    path = tmp_path / file
    theirs = write(path, {"mcpServers": {"memory": {
        "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}})
    scope = ["--project", str(tmp_path / "project")] if harness == "claude-code" else []
    before = snapshot(tmp_path)
    done = memory_mcp(env, "install", harness, *scope)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "already has an MCP server named 'memory'" in line
    assert snapshot(tmp_path) == before
    ok(env, "install", harness, *scope, "--mcp", "none")
    ok(env, "uninstall", harness, *scope)
    assert path.read_bytes() == theirs


def test_a_file_uninstall_cannot_edit_back_is_backed_up_then_restored(tmp_path: Path) -> None:
    """A settings file holding only `{}` (uninstall would remove the emptied file): install
    keeps a backup, uninstall writes its bytes back and removes it. A file install created
    goes again. Backups made within one second never overwrite each other."""
    env = cli_env(tmp_path)
    settings = tmp_path / "home" / ".claude" / "settings.json"
    original = write(settings, "{}")
    out = ok(env, "install", "claude-code")
    assert f"backup:  {settings}.bak-" in out and backup_of(settings) == original
    # Installed again (other options): the backup of the file as it was is the one kept.
    again = ok({**env, "MEMORY_HOOK_BUDGET_S": "4"}, "install", "claude-code")
    assert "backup:" not in again and backup_of(settings) == original

    out = ok({**env, "MEMORY_HOOK_BUDGET_S": "4"}, "uninstall", "claude-code")
    assert "restored as it was before install (its backup settings.json.bak-" in out
    assert settings.read_bytes() == original and backups(tmp_path) == []
    claude_json = tmp_path / "home" / ".claude.json"  # created by install: removed again
    assert not claude_json.exists() and not list(claude_json.parent.glob(".claude.json.bak-*"))

    # Put back by hand and installed again (within the second): a backup beside the first.
    ok(env, "install", "claude-code")
    settings.write_bytes(original)
    ok(env, "install", "claude-code")
    assert [backup.read_bytes() for backup in backups(tmp_path)] == [original, original]


# Hand-formatted configs (odd indentation, key order, tabs, CRLF, comments, no final newline,
# blank lines): install then uninstall gives each back byte for byte, with no backup left.
HAND_FORMATTED = {
    "home/.claude/settings.json": (
        '{\n    "theme":"dark",   "model" : "opus",\n    "hooks": {\n        "PreToolUse": '
        '[ {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]} ]\n'
        '    },\n    "permissions": {"allow": ["Bash(ls)"], "deny": []}\n}'),
    "home/.claude.json": (
        '{\r\n\t"numStartups": 3,\r\n\t"mcpServers": {\r\n\t\t"github": '
        '{"url": "https://x.example/mcp"}\r\n\t}\r\n}\r\n\r\n'),
    "codex/hooks.json": ('{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command",'
                         '"command":"/opt/log.py","timeout":10}]}]}}'),
    "codex/config.toml": ('# mine\nmodel = "gpt-5"\n\n[mcp_servers.github]\n'
                          'command = "gh-mcp"   # the GitHub tools\nargs = [\n  "--stdio",\n]\n'
                          '\n\n[profiles.fast]\nmodel = "o4-mini"\n'),
    "kimi/config.toml": ('default_model = "kimi-k2"\n\n[providers.moonshot]\ntype = "kimi"\n'
                         '[[hooks]]\nevent = "PreToolUse"\ncommand = "/usr/local/bin/kimi-guard"\n'
                         'timeout = 10\n'),
    "kimi/mcp.json": '{ "mcpServers": { "context7": { "url": "https://c7.example/mcp" } } }\n',
    "xdg/opencode/opencode.json": ('{\n   "$schema": "https://opencode.ai/config.json",\n'
                                   '   "plugin": ["opencode-wakatime"],\n'
                                   '   "mcp": {"github": {"type": "remote", '
                                   '"url": "https://api.example/mcp"}}\n}'),
}


@pytest.mark.parametrize("harness", ["claude-code", "codex", "kimi-code", "opencode"])
def test_uninstall_gives_hand_formatted_configs_back_byte_for_byte(tmp_path: Path,
                                                                    harness: str) -> None:
    env = cli_env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    for name, text in HAND_FORMATTED.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    before = snapshot(tmp_path)
    out = ok(env, "install", harness)
    assert "backup:" not in out and backups(tmp_path) == []
    assert snapshot(tmp_path) != before
    ok(env, "uninstall", harness)
    assert snapshot(tmp_path) == before  # byte for byte, and no backup file


@pytest.mark.parametrize("harness", ["claude-code", "codex", "kimi-code", "opencode"])
def test_installing_again_with_other_options_still_uninstalls_byte_for_byte(
        tmp_path: Path, harness: str) -> None:
    """Install, install again with tool capture (what install's own hint says to do), then
    uninstall: each file as it was before the first install, and no backup left behind (an
    install over an installed file kept one of it, holding our entries, which uninstall could
    never restore; Codex's config.toml came back with a blank line more)."""
    env = cli_env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    for name, text in {**HAND_FORMATTED, "codex/config.toml": (
            'model = "gpt-5"\n\n[model_providers.mock]\nname = "mock"\n')}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    before = snapshot(tmp_path)
    ok(env, "install", harness)
    out = ok({**env, "MEMORY_PLUGIN_TOOL_CAPTURE": "Bash"}, "install", harness)
    assert "backup:" not in out and backups(tmp_path) == []
    ok(env, "uninstall", harness)
    assert snapshot(tmp_path) == before  # byte for byte, and no backup file


def test_a_fresh_home_is_left_as_it_was_folders_included(tmp_path: Path) -> None:
    """Install creates `~/.codex/`, `~/.kimi-code/`, `~/.config/opencode/` in a fresh home;
    uninstall removed the files and left the folders behind, empty."""
    home = tmp_path / "fresh"
    (home / ".config").mkdir(parents=True)  # a folder of the user's own: it stays
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")
           and k not in ("CODEX_HOME", "KIMI_CODE_HOME", "XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR")}
    env.update(HOME=str(home), MEMORY_DB_PATH=str(tmp_path / "memory.db"))

    def tree() -> list[str]:
        return sorted(str(p.relative_to(home)) for p in home.rglob("*"))

    before = tree()
    for harness in ("claude-code", "codex", "kimi-code", "opencode"):
        ok(env, "install", harness)
    assert len(tree()) > len(before)
    for harness in ("claude-code", "codex", "kimi-code", "opencode"):
        ok(env, "uninstall", harness)
    assert tree() == before == [".config"]


def test_kimi_hook_tables_are_set_apart_by_one_blank_line(tmp_path: Path) -> None:
    """Each [[hooks]] table install adds starts after one blank line; uninstall takes exactly
    those lines (and their blank lines) out again."""
    env = cli_env(tmp_path)
    config = tmp_path / "kimi/config.toml"
    write(config, KIMI_CONFIG)
    ok(env, "install", "kimi-code")
    text = config.read_text()
    assert text.startswith(KIMI_CONFIG + "\n[[hooks]]\n")
    assert text.count("\n\n[[hooks]]\n") == 5 and "\n\n\n" not in text
    ok(env, "uninstall", "kimi-code")
    assert config.read_text() == KIMI_CONFIG


def test_unknown_harness_names_the_installed_ones(tmp_path: Path) -> None:
    """A typo gets the list of adapters to choose from, not a traceback."""
    done = memory_mcp(cli_env(tmp_path), "install", "claude")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "'claude'" in line and all(name in line for name in HARNESSES)


# --- doctor ----------------------------------------------------------------------------------

PROMPT = {"session_id": "s", "prompt": "hello there friend"}


@pytest.fixture
def wired(tmp_path: Path) -> Iterator[tuple[Service, dict[str, str], Path]]:
    """A running service, and claude-code installed in a project pointing at it."""
    service = start_service(tmp_path / "svc")
    env = cli_env(tmp_path, MEMORY_PLUGIN_URL=service.url)
    ok(env, "install", "claude-code", "--project", str(tmp_path / "project"))
    yield service, env, tmp_path / "project"
    if service.proc.poll() is None:  # one test stops it itself
        service.stop()


def doctor(env: dict[str, str], project: Path, *args: str) -> tuple[int, str]:
    done = memory_mcp(env, "doctor", "--project", str(project), *args)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout


def test_doctor_shows_the_service_the_wiring_and_the_last_success(wired: Any) -> None:
    """After install and one hook run, doctor shows the service up, the project's entries
    installed, and the hook's last success; its text lists every installed harness."""
    _, env, project = wired
    assert run_hook("claude-code", "UserPromptSubmit", {**PROMPT, "cwd": str(project)},
                    {**env, "MEMORY_HOOK_BUDGET_S": "5"}).returncode == 0  # a loaded machine

    code, out = doctor(env, project, "--json")
    data = json.loads(out)
    assert code == 0 and data["service"]["reachable"] is True
    assert data["service"]["version"] == version("semantic-memory-core")
    claude = next(h for h in data["harnesses"] if h["harness"] == "claude-code")
    entries = claude["scopes"]["project"]["entries"]
    assert all(entries[f"{event} hook"] for event in OURS) and entries["MCP server"]
    assert entries["PostToolUse hook"] is False
    assert claude["hooks"]["UserPromptSubmit"]["success"]["outcome"] == "nothing relevant"
    assert "failure" not in claude["hooks"]["UserPromptSubmit"]

    code, text = doctor(env, project)
    assert code == 0 and "up, version" in text
    assert all(f"\n{name}  (" in text for name in HARNESSES)


def test_doctor_says_when_the_service_refuses_the_hooks_token(tmp_path: Path) -> None:
    """A service that needs a token answered /health (public) and doctor said `up`, exit 0,
    while every hook recall got 401 and its writes were spooled: it probes a route that needs
    the token, and a token missing or refused is a problem (exit 1) saying what to set."""
    token = "doctor-test-token-" + "x7Kq2" * 4
    service = start_service(tmp_path / "svc", MEMORY_TOKEN=token)
    try:
        env = cli_env(tmp_path, MEMORY_PLUGIN_URL=service.url)
        for extra, state in (({}, "token missing"), ({"MEMORY_TOKEN": "wrong"}, "token refused"),
                             ({"MEMORY_PLUGIN_TOKEN": "wrong", "MEMORY_TOKEN": token},
                              "token refused")):
            code, out = doctor({**env, **extra}, tmp_path / "project", "--json")
            data = json.loads(out)["service"]
            assert code == 1 and data["state"] == state and data["reachable"] is False, data
            assert "401" in data["error"] and "MEMORY_TOKEN" in data["error"]
            code, text = doctor({**env, **extra}, tmp_path / "project")
            assert code == 1 and f"NOT USABLE — {state}" in text, text
            assert "set MEMORY_TOKEN (or MEMORY_PLUGIN_TOKEN)" in text
        for extra in ({"MEMORY_TOKEN": token}, {"MEMORY_PLUGIN_TOKEN": token}):
            code, out = doctor({**env, **extra}, tmp_path / "project", "--json")
            data = json.loads(out)["service"]
            assert code == 0 and data["reachable"] is True and "state" not in data, data
    finally:
        service.stop()


def test_tool_capture_runs_with_the_tools_install_was_given(tmp_path: Path) -> None:
    """`MEMORY_PLUGIN_TOOL_CAPTURE=Bash memory-mcp install` (as the docs say) captures Bash
    where the agent runs without the variable: the installed command carries the list (the
    hook read the variable alone, and skipped every tool). Set where the agent runs, the
    variable replaces the list. doctor's last success is the last capture, not the skips of
    the tools not captured that follow it."""
    service = start_service(tmp_path / "svc")
    try:
        env = cli_env(tmp_path, MEMORY_PLUGIN_URL=service.url)
        settings, _, _ = claude_files(tmp_path, "user")
        ok({**env, "MEMORY_PLUGIN_TOOL_CAPTURE": "Bash"}, "install", "claude-code")
        [group] = json.loads(settings.read_text())["hooks"]["PostToolUse"]
        command = group["hooks"][0]["command"]

        def tool(name: str, output: str, **runtime: str) -> dict[str, Any]:
            payload = {"session_id": "t", "cwd": str(tmp_path), "tool_name": name,
                       "tool_input": {"command": "make test"}, "tool_response": output}
            subprocess.run(["sh", "-c", command], input=json.dumps(payload), text=True,
                           env={**env, "MEMORY_HOOK_BUDGET_S": "5", **runtime}, check=True,
                           capture_output=True, timeout=60)  # as the harness runs it
            return json.loads((tmp_path / "hooks.jsonl").read_text().splitlines()[-1])

        assert tool("Bash", "412 passed in 9.1s")["outcome"] == "stored"
        skipped = tool("Read", "the file's text")
        assert skipped["outcome"] == "skipped" and "capture: bash (" in skipped["detail"], skipped
        assert tool("Read", "the file's text, read again",
                    MEMORY_PLUGIN_TOOL_CAPTURE="Read")["outcome"] == "stored"
        assert tool("Bash", "3 failed", MEMORY_PLUGIN_TOOL_CAPTURE="Read")["outcome"] == "skipped"
        with service.client() as http:
            stored = [m["content"] for m in http.get("/api/memories").json()["items"]]
        assert sorted(stored) == ["Bash(make test):\n412 passed in 9.1s",
                                  "Read(make test):\nthe file's text, read again"]
        code, out = doctor(env, tmp_path / "project", "--json")
        claude = next(h for h in json.loads(out)["harnesses"] if h["harness"] == "claude-code")
        assert claude["hooks"]["PostToolUse"]["success"]["outcome"] == "stored"
        ok(env, "uninstall", "claude-code")
        assert json.loads(settings.read_text()) == CLAUDE_SETTINGS
    finally:
        service.stop()


def test_doctor_says_when_the_service_is_down(wired: Any) -> None:
    """With the service gone doctor exits 1 and says so, and a hook that ran meanwhile shows
    as a failure "service down"."""
    service, env, project = wired
    service.stop()

    code, text = doctor(env, project)
    assert code == 1 and "NOT REACHABLE" in text
    assert run_hook("claude-code", "UserPromptSubmit", {**PROMPT, "cwd": str(project)},
                    env).returncode == 0  # fail-open
    code, out = doctor(env, project, "--json")
    claude = next(h for h in json.loads(out)["harnesses"] if h["harness"] == "claude-code")
    assert code == 1 and claude["hooks"]["UserPromptSubmit"]["failure"]["outcome"] == \
        "service down"
    assert "last failure UserPromptSubmit" in doctor(env, project)[1]


def test_doctor_tells_a_hung_service_from_a_stopped_one(tmp_path: Path) -> None:
    """Nothing listening (refused): start the service. Something that accepts and never
    answers: name its port and how to find the process (a new service could not bind there)."""
    project = tmp_path / "project"
    code, text = doctor(cli_env(tmp_path, MEMORY_PLUGIN_URL=f"http://127.0.0.1:{closed_port()}"),
                        project)
    assert code == 1 and "NOT REACHABLE" in text and "start it with `memory-mcp`" in text
    assert "does not answer" not in text

    with hanging_server() as url:
        port = url.rsplit(":", 1)[1]
        code, out = doctor(cli_env(tmp_path, MEMORY_PLUGIN_URL=url), project, "--json")
        assert code == 1 and json.loads(out)["service"]["state"] == "hung"
        code, text = doctor(cli_env(tmp_path, MEMORY_PLUGIN_URL=url), project)
    assert code == 1 and "NOT REACHABLE" in text and "start it with" not in text
    assert f"something listens on port {port} but does not answer" in text
    assert f"lsof -i :{port}" in text and f"sport = :{port}" in text


def test_uninstall_without_install_changes_nothing(tmp_path: Path) -> None:
    """Empty containers of the user's own (`"hooks": {"Stop": []}`, `"hooks": {}`, Kimi's
    `hooks = []`) are not ours to remove, nor is a file install did not create."""
    env = cli_env(tmp_path)
    write(tmp_path / "home/.claude/settings.json", '{"hooks": {"Stop": []}}')
    write(tmp_path / "project/.claude/settings.local.json",
          '{\n  "theme": "dark",\n  "hooks": {},\n  "model": "opus"\n}\n')
    write(tmp_path / "kimi/config.toml", 'default_model = "m"\nhooks = []\n')
    before = snapshot(tmp_path)
    for args in (["claude-code"], ["claude-code", "--project", str(tmp_path / "project")],
                 ["kimi-code"]):
        ok(env, "uninstall", *args)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("options", [{"MEMORY_PLUGIN_TOOL_CAPTURE": "Bash"},
                                     {"MEMORY_HOOK_BUDGET_S": "2"}, {"--mcp": "none"}],
                         ids=["tool capture", "budget", "mcp none"])
@pytest.mark.parametrize("settings_text", ['{"hooks": {"Stop": []}}', '{"hooks": {}}'],
                         ids=["user hook list", "empty hooks"])
def test_a_plain_uninstall_undoes_an_install_made_with_other_options(
        tmp_path: Path, options: dict[str, str], settings_text: str) -> None:
    """Whatever options install ran with, uninstall gives the file back byte for byte and
    takes the backup install kept (an emptied `"hooks": {}` needs one) with it."""
    env = cli_env(tmp_path)
    settings = tmp_path / "home/.claude/settings.json"
    original = write(settings, settings_text)
    flags = [arg for key, value in options.items() if key.startswith("--") for arg in (key, value)]
    ok({**env, **{k: v for k, v in options.items() if not k.startswith("--")}},
       "install", "claude-code", *flags)
    assert "memory-mcp hook claude-code" in settings.read_text()
    ok(env, "uninstall", "claude-code")
    assert settings.read_bytes() == original
    assert backups(tmp_path) == []


def test_a_symlinked_config_is_edited_through_the_link(tmp_path: Path) -> None:
    """A settings file kept in a dotfiles folder and linked into place stays a link: install
    and uninstall edit its target."""
    env = cli_env(tmp_path)
    target = tmp_path / "dotfiles" / "claude-settings.json"
    original = write(target, {"theme": "dark", "hooks": {"Stop": []}})
    link = tmp_path / "home/.claude/settings.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    ok(env, "install", "claude-code")
    assert link.is_symlink() and "memory-mcp hook claude-code" in target.read_text()
    ok(env, "uninstall", "claude-code")
    assert link.is_symlink() and link.resolve() == target
    assert target.read_bytes() == original
    assert sorted(p.name for p in target.parent.iterdir()) == ["claude-settings.json"]


@pytest.mark.parametrize("hooks", ["hooks = []\n", 'hooks = [{event = "Stop", command = "x"}]\n'])
def test_kimi_install_into_an_inline_hooks_array(tmp_path: Path, hooks: str) -> None:
    """`hooks = []` is valid TOML: install adds inline tables to it (Kimi reads both forms),
    and uninstall gives the file back byte for byte."""
    env = cli_env(tmp_path)
    config = tmp_path / "kimi/config.toml"
    original = write(config, f'default_model = "m"\n{hooks}')
    ok(env, "install", "kimi-code")
    entries = tomllib.loads(config.read_text())["hooks"]
    assert {e["event"] for e in entries if "memory-mcp" in e["command"]} == {
        "SessionStart", "UserPromptSubmit", "PreCompact", "SessionEnd"}
    ok(env, "uninstall", "kimi-code")
    assert config.read_bytes() == original and backups(tmp_path) == []


def test_claude_project_install_moves_our_server_out_of_the_shared_mcp_json(
        tmp_path: Path) -> None:
    """An earlier install put the server, with this machine's path, into the committed
    `.mcp.json`: install takes our entry out of it (a teammate's server stays) and registers
    it in the local scope instead."""
    env = cli_env(tmp_path)
    shared = tmp_path / "project/.mcp.json"
    write(shared, {"mcpServers": {
        "github": {"type": "http", "url": "https://api.example/mcp"},
        "memory": {"type": "stdio", "command": "/home/alice/.venv/bin/memory-mcp",
                   "args": ["proxy"]}}})
    ok(env, "install", "claude-code", "--project", str(tmp_path / "project"))
    assert json.loads(shared.read_text()) == {
        "mcpServers": {"github": {"type": "http", "url": "https://api.example/mcp"}}}
    assert claude_server(tmp_path, "project")["command"] == MEMORY_MCP
    ok(env, "uninstall", "claude-code", "--project", str(tmp_path / "project"))
    assert not (tmp_path / "home/.claude.json").exists()  # install created it: gone again


def test_the_example_adapter_takes_away_the_file_it_created(tmp_path: Path) -> None:
    """The worked example's uninstall left `{"hooks": {}}` in a file install had created; it
    empties what it emptied, so the file and its folder go, as for the shipped harnesses."""
    env = cli_env(tmp_path)
    ok(env, "install", "example")
    hooks = tmp_path / "home" / ".example-agent" / "hooks.json"
    assert json.loads(hooks.read_text())["hooks"]
    ok(env, "uninstall", "example")
    assert not hooks.exists() and not hooks.parent.exists()
    kept = write(hooks, {"hooks": {"other": "their-tool --run"}, "theme": "dark"})
    ok(env, "install", "example")
    ok(env, "uninstall", "example")
    assert hooks.read_bytes() == kept  # the user's file, given back byte for byte
