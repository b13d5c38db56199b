"""Codex CLI adapter: `memory-mcp hook codex <Event>` and `memory-mcp install codex`.

Hook facts (Codex 0.171, checked against the binary; tests/test_harness_e2e.py):

- Hooks live in `$CODEX_HOME/hooks.json` (Claude Code's layout); a new or changed hook runs
  only once trusted: `[hooks.state."<real path of hooks.json>:<event_label>:<group>:<handler>"]
  trusted_hash = "sha256:…"` in `$CODEX_HOME/config.toml`, the hash of the handler's canonical
  JSON (`hook_hash`, as codex-rs/hooks/src/engine/discovery.rs computes it). Install writes
  these for its own handlers only; uninstall re-keys the entries of handlers it shifts.
- stdin as Claude Code's plus `turn_id, model`; PostToolUse `tool_response` is a string for
  the shell (`tool_name` "Bash"), an object for MCP tools. `timeout` is in seconds; SessionEnd
  hooks are clamped to 1..3 s.
- Context: `hookSpecificOutput.additionalContext` (SessionStart, UserPromptSubmit), a developer
  message; over ~2,500 tokens it is cut. PreCompact must not print context (it fails).
  Exit code 2 would drop the prompt: hooks always exit 0.
- The transcript is `transcript_path`, a rollout file of JSON lines: `response_item` messages
  (role user / assistant; `content_item_kinds` tells the prompt from environment preambles)
  and a `compacted` line per compaction. After one, SessionStart fires with source `compact`.
- MCP: `[mcp_servers.memory] url = …` in config.toml; `codex exec` refuses tools that are not
  read-only unless approved, so install approves `memory_store` (not `memory_forget`).
"""

from __future__ import annotations

import os

from semantic_memory.harness import HarnessAdapter, HookCall, Turn, hookimpl
from semantic_memory.harness.adapter import additional_context, escape_tags
from semantic_memory.harness.transcript import text_of, transcript_time

# typing, pathlib, json and hashlib cost a hook process more than its own work: the install
# side imports them where it uses them.
TYPE_CHECKING = False
if TYPE_CHECKING:  # the installer is imported by `config_files`, never on a hook's path
    from pathlib import Path
    from typing import Any

    from semantic_memory.harness import ConfigFile, InstallTarget

SERVER = "memory"
#: Codex cuts additional context over ~2,500 tokens.
MAX_CONTEXT_CHARS = 9_000
#: codex-rs/hooks/src/lib.rs: the event labels of trust keys.
EVENT_LABELS = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit",
                "PreCompact": "pre_compact", "PostToolUse": "post_tool_use",
                "SessionEnd": "session_end", "PreToolUse": "pre_tool_use",
                "PermissionRequest": "permission_request", "PostCompact": "post_compact",
                "SubagentStart": "subagent_start", "SubagentStop": "subagent_stop",
                "Stop": "stop", "Interrupt": "interrupt"}
_NO_MATCHER = {"UserPromptSubmit", "Stop", "Interrupt"}  # their matcher is not hashed
_CONTEXT_EVENTS = {"PreToolUse", "PostToolUse", "SessionStart", "UserPromptSubmit",
                   "SubagentStart"}
_SHORT_EVENTS = {"SessionEnd", "Interrupt"}  # timeout clamped to 1..3 s, default 1


def codex_home(target: InstallTarget) -> Path:
    from pathlib import Path

    return Path(os.environ.get("CODEX_HOME") or target.home / ".codex")


def hook_hash(event: str, handler: dict[str, Any], matcher: Any = None) -> str:
    """Codex's trust hash of one command handler (`command_hook_hash`): sha256 over the
    key-sorted compact JSON of its normalised identity."""
    import hashlib
    import json

    timeout = handler.get("timeout")
    if event in _SHORT_EVENTS:
        timeout = min(max(1 if timeout is None else int(timeout), 1), 3)
    else:
        timeout = max(600 if timeout is None else int(timeout), 1)
    identity_handler: dict[str, Any] = {"type": "command", "command": handler["command"],
                                        "timeout": timeout, "async": bool(handler.get("async"))}
    if handler.get("statusMessage") is not None:
        identity_handler["statusMessage"] = handler["statusMessage"]
    if handler.get("additionalContextLimit") is not None and event in _CONTEXT_EVENTS:
        identity_handler["additionalContextLimit"] = int(handler["additionalContextLimit"])
    identity: dict[str, Any] = {"event_name": EVENT_LABELS[event], "hooks": [identity_handler]}
    if matcher is not None and event not in _NO_MATCHER:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def handler_positions(hooks_doc: dict[str, Any], source: str, target: InstallTarget
                      ) -> dict[str, tuple[str, bool]]:
    """Trust key -> (hash, ours) for every command handler of a hooks.json document."""
    out = {}
    for event, groups in (hooks_doc.get("hooks") or {}).items():
        if event not in EVENT_LABELS or not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            for hi, handler in enumerate((group or {}).get("hooks") or []):
                if isinstance(handler, dict) and handler.get("type") == "command" \
                        and isinstance(handler.get("command"), str):
                    key = f"{source}:{EVENT_LABELS[event]}:{gi}:{hi}"
                    out[key] = (hook_hash(event, handler, group.get("matcher")),
                                target.is_our_command(handler["command"]))
    return out


class CodexAdapter(HarnessAdapter):
    name = "codex"
    binary = "codex"
    events = {"SessionStart": "session_start", "UserPromptSubmit": "prompt",
              "PreCompact": "compact", "SessionEnd": "compact", "PostToolUse": "tool"}
    compaction_marker = b'"type":"compacted"'
    max_context_chars = MAX_CONTEXT_CHARS

    # --- reading -----------------------------------------------------------------------------

    def transcript_turn(self, entry: dict[str, Any]) -> Turn | None:
        item = entry.get("payload")
        if entry.get("type") != "response_item" or not isinstance(item, dict) \
                or item.get("type") != "message" or item.get("role") not in ("user", "assistant"):
            return None
        meta = item.get("internal_chat_message_metadata_passthrough") or {}
        kinds = meta.get("content_item_kinds") if isinstance(meta, dict) else None
        if item["role"] == "user" and kinds and "user.text" not in kinds:
            return None  # environment and instruction preambles
        if (item.get("metadata") or {}).get("compaction_output"):
            return None  # the compaction's own summary
        text = text_of(item.get("content"), ("input_text", "output_text", "text"))
        if not text.strip():
            return None
        # The line's time (ISO 8601, UTC), not the payload's.
        return Turn(item["role"], text, transcript_time(entry.get("timestamp")))

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

        home = codex_home(target)
        hooks_path, config_path = home / "hooks.json", home / "config.toml"
        source = os.path.realpath(hooks_path)  # Codex keys trust by the real path
        events = [e for e in self.events if e != "PostToolUse" or target.tool_capture]
        # What the hooks.json edit did, for the trust entries of the config.toml edit after it.
        layout: dict[str, Any] = {}

        def install_hooks(doc: dict[str, Any]) -> None:
            before = handler_positions(doc, source, target)
            for event in self.events:
                if event not in events:
                    remove_command_hooks(doc, target, [event])
                    continue
                timeout = min(target.hook_timeout_s, 3) if event in _SHORT_EVENTS \
                    else target.hook_timeout_s
                command = target.hook_command(event, tool=event == "PostToolUse")
                set_command_hook(doc, target, event,
                                 {"type": "command", "command": command, "timeout": timeout})
            layout.update(before=before, after=handler_positions(doc, source, target))

        def uninstall_hooks(doc: dict[str, Any]) -> None:
            before = handler_positions(doc, source, target)
            remove_command_hooks(doc, target)
            layout.update(before=before, after=handler_positions(doc, source, target))

        def hooks_installed(doc: dict[str, Any]) -> dict[str, bool]:
            trusted = _trusted(config_path)
            found = handler_positions(doc, source, target)
            return {f"{e} hook": has_command_hook(doc, target, e) and any(
                        ours and trusted.get(key) == digest
                        for key, (digest, ours) in found.items()
                        if key.split(":")[-3] == EVENT_LABELS[e])
                    for e in self.events}

        def edit_config(doc: Any, installing: bool) -> None:
            import tomlkit

            prunable = [path for path in (("hooks", "state"), ("hooks",), ("mcp_servers",))
                        if not _empty_table(doc, path)]  # an empty table of the user's stays
            state = _table(doc, "hooks", "state")
            before, after = layout.get("before", {}), layout.get("after", {})
            # Re-key the user's trusted handlers that the edit moved (same hash, new place).
            moved = {old: new for old, (digest, ours) in before.items() if not ours
                     for new, (digest2, ours2) in after.items()
                     if not ours2 and digest2 == digest and new != old and old in state}
            entries = {old: state[old] for old in moved}
            for old in moved:
                del state[old]
            for old, new in moved.items():
                state[new] = entries[old]
            wanted = {key: digest for key, (digest, ours) in after.items()
                      if ours and installing}
            for key, (_, ours) in before.items():  # our old entries go
                if ours and key in state and key not in moved.values() and key not in wanted:
                    del state[key]
            # An entry that already says exactly this stays untouched, not taken out and added
            # again: tomlkit writes a table it re-adds with other blank lines around it, so
            # installing again would change the file each time.
            for key, digest in wanted.items():
                if state.get(key) != {"trusted_hash": digest}:
                    entry = tomlkit.table()
                    entry["trusted_hash"] = digest
                    state[key] = entry
            if installing:
                if target.mcp != "none":
                    servers = _table(doc, "mcp_servers")
                    claim_server(servers, SERVER, target, config_path)
                    servers[SERVER] = self._mcp_entry(target)
            elif target.is_our_server(doc.get("mcp_servers", {}).get(SERVER)):
                del doc["mcp_servers"][SERVER]
            _prune(doc, *prunable)

        def mcp_installed(doc: Any) -> dict[str, bool]:
            return {"MCP server": target.is_our_server((doc.get("mcp_servers") or {}).get(SERVER))}

        return [ConfigFile(hooks_path, "json", install_hooks, uninstall_hooks, hooks_installed),
                ConfigFile(config_path, "toml", lambda d: edit_config(d, True),
                           lambda d: edit_config(d, False), mcp_installed)]

    @staticmethod
    def _mcp_entry(target: InstallTarget) -> Any:
        import tomlkit

        from semantic_memory.harness.install import MCP_ENV_VARS

        entry = tomlkit.table()
        if target.local_mcp:
            entry["command"] = target.stdio_command[0]
            entry["args"] = target.stdio_command[1:]
            # Codex gives a stdio server HOME, PATH and a few more only: forward ours by name.
            entry["env_vars"] = list(MCP_ENV_VARS)
        else:
            entry["url"] = target.mcp_url
            if target.token:
                entry["bearer_token_env_var"] = "MEMORY_TOKEN"
        store = tomlkit.table()
        store["approval_mode"] = "approve"  # exec refuses unapproved writes; forget stays asked
        tools = tomlkit.table()
        tools["memory_store"] = store
        entry["tools"] = tools
        return entry

    def install_notes(self, target: InstallTarget) -> list[str]:
        notes = ["Codex hooks are per user ($CODEX_HOME/hooks.json) and trusted in config.toml; "
                 "check with `memory-mcp doctor`."]
        if target.project_dir is not None:
            notes.append("(--project does not apply to Codex: its project hooks need the whole "
                         "project trusted, so the user-level hooks serve every project.)")
        return notes


def _table(doc: Any, *path: str) -> Any:
    """The nested TOML table at `path`, created when missing: as a super table (no header of
    its own), since the tables created here hold only tables (`[hooks.state."…"]`,
    `[mcp_servers.memory]`), and an empty header line would outlive uninstall."""
    import tomlkit

    node = doc
    for key in path:
        if key not in node:
            node[key] = tomlkit.table(is_super_table=True)
        node = node[key]
    return node


def _empty_table(doc: Any, path: tuple[str, ...]) -> bool:
    """Whether the table at `path` exists and is empty."""
    node = doc
    for key in path:
        if not hasattr(node, "get") or key not in node:
            return False
        node = node[key]
    return hasattr(node, "get") and not node


def _prune(doc: Any, *paths: tuple[str, ...]) -> None:
    """Remove the tables at `paths` when empty (deepest first)."""
    for path in paths:
        parent = doc
        for key in path[:-1]:
            parent = parent.get(key) if hasattr(parent, "get") else None
            if parent is None:
                break
        if parent is not None and path[-1] in parent and not parent[path[-1]]:
            del parent[path[-1]]


def _trusted(config_path: Path) -> dict[str, str]:
    """Trust key -> trusted hash, from config.toml (empty when unreadable)."""
    from semantic_memory.harness.install import ConfigFile, load

    try:
        _, doc = load(ConfigFile(config_path, "toml", lambda d: None, lambda d: None,
                                 lambda d: {}))
    except Exception:  # noqa: BLE001 - doctor reports "not installed"
        return {}
    state = (doc.get("hooks") or {}).get("state") or {}
    return {key: value.get("trusted_hash") for key, value in state.items()
            if hasattr(value, "get")}


@hookimpl
def register_harnesses(register) -> None:  # type: ignore[no-untyped-def]
    register(CodexAdapter())
