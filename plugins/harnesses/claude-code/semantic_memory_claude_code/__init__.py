"""Claude Code adapter: `memory-mcp hook claude-code <Event>` and `memory-mcp install claude-code`.

Hook facts (Claude Code 2.1.332, checked against the binary; tests/test_harness_e2e.py):

- stdin: `session_id, transcript_path, cwd, hook_event_name` plus, per event, `prompt`
  (UserPromptSubmit), `source` (SessionStart: startup | resume | compact | fork), `trigger`
  (PreCompact: manual | auto), `tool_name, tool_input, tool_response` (PostToolUse).
- Context goes in as `{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`; over
  10,000 characters it is parked in a file and the model sees a preview, so blocks stay below.
  PreCompact must print nothing (its stdout becomes summary instructions). Exit code 2 would
  block the prompt: hooks always exit 0.
- The transcript (JSON lines; `user` / `assistant` entries with `message.content`) does not
  exist before a new session's first answer; compaction writes a `system` entry with subtype
  `compact_boundary`. PreCompact(auto) may fire without a compaction following, or twice:
  flushing is idempotent (the store dedups by content).
- Hook `timeout` is in seconds. Project hooks go in `.claude/settings.local.json` (personal:
  the command holds this machine's path), user hooks in `~/.claude/settings.json`; MCP servers
  in `.mcp.json` (project) or `~/.claude.json` (user). `-p` runs refuse MCP tool calls that are
  not allowed, so install allows `mcp__memory` there too.
- `CLAUDE_CONFIG_DIR` moves both user files: `$CLAUDE_CONFIG_DIR/settings.json` and
  `$CLAUDE_CONFIG_DIR/.claude.json` (the binary's `getGlobalClaudeFile`).
"""

from __future__ import annotations

import os

from semantic_memory.harness import HarnessAdapter, HookCall, Turn, hookimpl
from semantic_memory.harness.adapter import additional_context, escape_tags
from semantic_memory.harness.transcript import text_of, transcript_time

TYPE_CHECKING = False  # typing costs a hook process more than its own work
if TYPE_CHECKING:  # the installer is imported by `config_files`, never on a hook's path
    from pathlib import Path
    from typing import Any

    from semantic_memory.harness import ConfigFile, InstallTarget

SERVER = "memory"
PERMISSION = f"mcp__{SERVER}"
#: Claude Code parks additional context over 10,000 characters in a file.
MAX_CONTEXT_CHARS = 9_500


def config_home(target: InstallTarget) -> Path:
    """Claude Code's user config folder: `$CLAUDE_CONFIG_DIR`, else `~/.claude`."""
    from pathlib import Path

    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or target.home / ".claude")


def global_file(target: InstallTarget) -> Path:
    """Claude Code's user file of MCP servers and per-project state: `.claude.json` in
    `$CLAUDE_CONFIG_DIR`, else in the home folder."""
    from pathlib import Path

    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or target.home) / ".claude.json"


class ClaudeCodeAdapter(HarnessAdapter):
    name = "claude-code"
    binary = "claude"
    events = {"SessionStart": "session_start", "UserPromptSubmit": "prompt",
              "PreCompact": "compact", "SessionEnd": "compact", "PostToolUse": "tool"}
    compaction_marker = b'"subtype":"compact_boundary"'
    # Additional context reaches the model in a `<system-reminder>` block, and the system
    # prompt names `<user-prompt-submit-hook>` as hook feedback (2.1.332's binary).
    wrapper_tags = ("system-reminder", "user-prompt-submit-hook")
    max_context_chars = MAX_CONTEXT_CHARS

    # --- reading -----------------------------------------------------------------------------

    def compactions(self, payload: dict[str, Any]) -> int:
        done = super().compactions(payload)
        # SessionStart(compact) runs before the compaction's boundary is written.
        return done + 1 if payload.get("source") == "compact" else done

    def transcript_turn(self, entry: dict[str, Any]) -> Turn | None:
        kind = entry.get("type")
        if kind not in ("user", "assistant") or entry.get("isMeta") \
                or entry.get("isCompactSummary") or entry.get("isSidechain"):
            return None
        message = entry.get("message")
        if not isinstance(message, dict):
            return None
        text = text_of(message.get("content"))  # tool calls and results are not turns
        if not text.strip():
            return None
        return Turn(kind, text, transcript_time(entry.get("timestamp")))  # ISO 8601, UTC

    # --- writing -----------------------------------------------------------------------------

    def context_output(self, call: HookCall, text: str) -> str:
        # Recall asks for no more than this (`max_context_chars`): the cut is a last resort.
        return additional_context(call.event,
                                  escape_tags(text, self.wrapper_tags)[:MAX_CONTEXT_CHARS])

    # --- installing --------------------------------------------------------------------------

    def config_files(self, target: InstallTarget) -> list[ConfigFile]:
        from semantic_memory.harness.install import (
            ConfigFile,
            claim_server,
            has_command_hook,
            remove_command_hooks,
            set_command_hook,
        )

        # The server entry holds this machine's path to memory-mcp, so for a project it goes
        # where the hooks go: the personal config, never the committed `.mcp.json`. That is
        # Claude Code's "local" scope, `projects[<dir>].mcpServers` in ~/.claude.json.
        mcp_file = global_file(target)
        scope: tuple[str, ...] = ()
        if target.project_dir is not None:
            settings = target.project_dir / ".claude" / "settings.local.json"
            scope = ("projects", str(target.project_dir))
        else:
            settings = config_home(target) / "settings.json"
        events = [e for e in self.events if e != "PostToolUse" or target.tool_capture]

        def install_hooks(doc: dict[str, Any]) -> None:
            for event in self.events:
                if event not in events:
                    remove_command_hooks(doc, target, [event])
                    continue
                command = target.hook_command(event, tool=event == "PostToolUse")
                handler = {"type": "command", "command": command,
                           "timeout": target.hook_timeout_s}
                set_command_hook(doc, target, event, handler,
                                 matcher="*" if event == "PostToolUse" else None)
            if target.mcp != "none":
                allow = doc.setdefault("permissions", {}).setdefault("allow", [])
                if PERMISSION not in allow:
                    allow.append(PERMISSION)

        def uninstall_hooks(doc: dict[str, Any]) -> None:
            remove_command_hooks(doc, target)
            permissions = doc.get("permissions")
            if isinstance(permissions, dict) and PERMISSION in permissions.get("allow", []):
                permissions["allow"].remove(PERMISSION)
                if not permissions["allow"]:
                    del permissions["allow"]
                if not permissions:
                    del doc["permissions"]

        def hooks_installed(doc: dict[str, Any]) -> dict[str, bool]:
            return {f"{e} hook": has_command_hook(doc, target, e) for e in self.events}

        def install_mcp(doc: dict[str, Any]) -> None:
            if target.mcp == "none":
                return
            node = doc
            for key in scope:
                node = node.setdefault(key, {})
            servers = node.setdefault("mcpServers", {})
            claim_server(servers, SERVER, target, mcp_file)
            servers[SERVER] = self.mcp_entry(target)

        def uninstall_mcp(doc: dict[str, Any], path: tuple[str, ...] = scope) -> None:
            nodes = [doc]  # doc, then each object on the way to "mcpServers"
            for key in (*path, "mcpServers"):
                found = nodes[-1].get(key)
                if not isinstance(found, dict):
                    return
                nodes.append(found)
            if not target.is_our_server(nodes[-1].get(SERVER)):
                return
            del nodes[-1][SERVER]
            for parent, key, node in zip(nodes[-2::-1], (*path, "mcpServers")[::-1],
                                         nodes[:0:-1], strict=True):
                if node:
                    break
                del parent[key]  # emptied by taking our entry out

        def mcp_installed(doc: dict[str, Any]) -> dict[str, bool]:
            node: Any = doc
            for key in (*scope, "mcpServers"):
                node = node.get(key) if isinstance(node, dict) else None
            return {"MCP server": isinstance(node, dict) and target.is_our_server(
                node.get(SERVER))}

        files = [ConfigFile(settings, "json", install_hooks, uninstall_hooks, hooks_installed),
                 ConfigFile(mcp_file, "json", install_mcp, uninstall_mcp, mcp_installed,
                            owns_folder=False)]  # the home folder, or the user's config folder
        if target.project_dir is not None:
            # Earlier installs put the server in the project's shared `.mcp.json`: take our
            # entry out of it (install and uninstall alike), and the file with it when that
            # leaves it empty. Another `memory` server there stays, and install refuses to
            # shadow it with a local one.
            shared_file = target.project_dir / ".mcp.json"

            def install_shared(doc: dict[str, Any]) -> None:
                if target.mcp != "none":
                    claim_server(doc.get("mcpServers") or {}, SERVER, target, shared_file)
                uninstall_mcp(doc, ())

            files.append(ConfigFile(shared_file, "json", install_shared,
                                    lambda doc: uninstall_mcp(doc, ()), lambda doc: {},
                                    legacy=True, owns_folder=False))  # the user's project
        return files

    @staticmethod
    def mcp_entry(target: InstallTarget) -> dict[str, Any]:
        if target.local_mcp:
            return {"type": "stdio", "command": target.stdio_command[0],
                    "args": target.stdio_command[1:]}
        entry: dict[str, Any] = {"type": "http", "url": target.mcp_url}
        if target.token:
            entry["headers"] = {"Authorization": "Bearer ${MEMORY_TOKEN}"}
        return entry

    def install_notes(self, target: InstallTarget) -> list[str]:
        notes = ["Claude Code picks the hooks up at its next start. Check the wiring with "
                 "`memory-mcp doctor`."]
        if not target.tool_capture:
            notes.append("Tool capture is off: set MEMORY_PLUGIN_TOOL_CAPTURE (e.g. Bash,Read) "
                         "and install again to add the PostToolUse hook.")
        return notes


@hookimpl
def register_harnesses(register) -> None:  # type: ignore[no-untyped-def]
    register(ClaudeCodeAdapter())
