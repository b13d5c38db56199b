"""Kimi Code adapter: `memory-mcp hook kimi-code <Event>` and `memory-mcp install kimi-code`.

Hook facts (Kimi Code CLI 2.1.0, checked against the binary; tests/test_harness_e2e.py):

- Hooks are `[[hooks]]` tables in `$KIMI_CODE_HOME/config.toml` (default `~/.kimi-code`) with
  exactly `event, command, matcher, timeout` (seconds, 1..600): any other key (`fail_mode`)
  makes Kimi drop every hook, so install writes no other.
- stdin: `hook_event_name, session_id, cwd, client_type`, no transcript path; UserPromptSubmit
  `prompt` is a list of parts; PostToolUse `tool_name, tool_input, tool_output` (2,000 chars).
- Only UserPromptSubmit adds context (its plain stdout, as a `<hook_result>` user message
  before the prompt); auto compaction drops it. SessionStart only starts the service when
  MEMORY_PLUGIN_AUTOSTART asks. SessionEnd fires only on an explicit close.
- PostToolUse is fire-and-forget: the hook's process group is terminated ~70 ms later, when the
  next model request starts, so its command runs detached (`setsid -f`).
- The transcript is `$KIMI_CODE_HOME/sessions/<workdir key>/<session_id>/agents/main/wire.jsonl`
  (the key as Kimi's `encodeWorkDirKey`): user prompts are `context.append_message` with origin
  `user`, answers `context.append_loop_event` text parts, and each compaction appends a
  `context.apply_compaction` line (earlier lines stay).
- MCP servers: `$KIMI_CODE_HOME/mcp.json` (`{"mcpServers": {name: {url}}}`); project files need
  the folder trusted, so install writes the user's.
"""

from __future__ import annotations

import os

from semantic_memory.harness import HarnessAdapter, Turn, hookimpl
from semantic_memory.harness.project import harness_path
from semantic_memory.lite import sha256_hex
from semantic_memory.harness.transcript import read_jsonl, text_of, transcript_time

# typing, pathlib and re cost a hook process more than its own work: the hook path uses
# os.path, the install side imports what it needs where it uses it.
TYPE_CHECKING = False
if TYPE_CHECKING:  # the installer is imported by `config_files`, never on a hook's path
    from pathlib import Path
    from typing import Any

    from semantic_memory.harness import ConfigFile, InstallTarget

SERVER = "memory"


def kimi_home() -> Path:
    from pathlib import Path

    return Path(_kimi_home())


def _kimi_home() -> str:
    return os.environ.get("KIMI_CODE_HOME") or os.path.join(os.path.expanduser("~"),
                                                            ".kimi-code")


_SLUG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-")


def workdir_key(cwd: str) -> str:
    """Kimi's `encodeWorkDirKey`: `wd_<slug of the last folder>_<sha256(path)[:12]>`. (Kimi
    writes it with two regular expressions; `re` costs a hook more than the rest of its work.)"""
    normalized = _strip_trailing_slashes(cwd.replace("\\", "/"))
    slug = _slug(normalized.split("/")[-1].lower()).strip("-")[:40].strip("-")
    if slug in ("", ".", ".."):
        slug = "workspace"
    return f"wd_{slug}_{sha256_hex(normalized.encode('utf-8'))[:12]}"


def _strip_trailing_slashes(text: str) -> str:
    """`re.sub(r"/+$", "", text)` (`$` also matches before a final newline)."""
    if text.endswith("\n"):
        head = text[:-1].rstrip("/")
        return head + "\n" if len(head) < len(text) - 1 else text
    return text.rstrip("/")


def _slug(name: str) -> str:
    """`re.sub(r"[^a-z0-9._-]+", "-", name)`: each run of other characters becomes one "-"."""
    out: list[str] = []
    for char in name:
        if char in _SLUG_CHARS:
            out.append(char)
        elif not out or out[-1] != "\0":
            out.append("\0")
    return "".join(out).replace("\0", "-")


def wire_path(payload: dict[str, Any]) -> str | None:
    """The session's wire.jsonl, computed from `cwd` and `session_id`, else looked up in
    `session_index.jsonl`; None when there is none."""
    cwd, session = payload.get("cwd"), payload.get("session_id")
    if not isinstance(cwd, str) or not isinstance(session, str) or "/" in session:
        return None
    home = _kimi_home()
    path = os.path.join(home, "sessions", workdir_key(cwd), session, "agents", "main",
                        "wire.jsonl")
    if os.path.isfile(path):
        return path
    index = os.path.join(home, "session_index.jsonl")
    if os.path.isfile(index):
        for entry in read_jsonl(index):
            if entry.get("sessionId") == session and isinstance(entry.get("sessionDir"), str):
                # UTF-8 text, as every path a harness writes: `harness_path` spells it
                # for this process's locale
                found = os.path.join(harness_path(entry["sessionDir"]), "agents", "main",
                                     "wire.jsonl")
                if os.path.isfile(found):
                    return found
    return None


def _time(entry: dict[str, Any]) -> float | None:
    """When Kimi Code wrote a wire line: its `time`, milliseconds since the epoch."""
    return transcript_time(entry.get("time"))


class KimiCodeAdapter(HarnessAdapter):
    name = "kimi-code"
    binary = "kimi"
    events = {"SessionStart": "session_start", "UserPromptSubmit": "prompt",
              "PreCompact": "compact", "SessionEnd": "compact", "PostToolUse": "tool"}
    compaction_marker = b'"type":"context.apply_compaction"'
    context_at_session_start = False  # Kimi drops SessionStart output: it only autostarts
    # Kimi puts the output inside `<hook_result hook_event="…">…</hook_result>` unescaped.
    wrapper_tags = ("hook_result",)

    # --- reading -----------------------------------------------------------------------------

    def prompt(self, payload: dict[str, Any]) -> str | None:
        return text_of(payload.get("prompt")) or None

    def transcript_path(self, payload: dict[str, Any]) -> str | None:
        return wire_path(payload)

    def transcript_turn(self, entry: dict[str, Any]) -> Turn | None:
        kind = entry.get("type")
        if kind == "context.append_message":  # prompts; injected context has another origin
            message = entry.get("message") or {}
            origin = message.get("origin") or {}
            if message.get("role") == "user" and origin.get("kind") == "user":
                text = text_of(message.get("content"))
                return Turn("user", text, _time(entry)) if text.strip() else None
        elif kind == "context.append_loop_event":  # answers, a text part per step
            event = entry.get("event") or {}
            part = event.get("part") or {}
            if event.get("type") == "content.part" and part.get("type") == "text" \
                    and isinstance(part.get("text"), str) and part["text"].strip():
                return Turn("assistant", part["text"], _time(entry))
        return None

    # --- installing --------------------------------------------------------------------------

    def config_files(self, target: InstallTarget) -> list[ConfigFile]:
        from semantic_memory.harness.install import ConfigFile, claim_server

        home = kimi_home()
        events = [e for e in self.events if e != "PostToolUse" or target.tool_capture]
        import shutil

        detach = shutil.which("setsid")

        def command(event: str) -> str:
            base = target.hook_command(event, tool=event == "PostToolUse")
            return f"{detach} -f {base}" if event == "PostToolUse" and detach else base

        def ours(entry: Any) -> bool:
            return hasattr(entry, "get") and target.is_our_command(entry.get("command"))

        def install_hooks(doc: Any) -> None:
            import tomlkit

            hooks = doc.get("hooks")
            if hooks is None:
                hooks = doc["hooks"] = tomlkit.aot()
            present = {entry.get("event"): entry for entry in hooks if ours(entry)}
            for entry in [e for e in hooks if ours(e) and e.get("event") not in events]:
                hooks.remove(entry)
            for event in events:
                wanted = {"event": event, "command": command(event),
                          "timeout": target.hook_timeout_s}
                entry = present.get(event)
                if entry is None:
                    # An inline array (`hooks = []`) takes inline tables; `[[hooks]]` tables.
                    inline = isinstance(hooks, tomlkit.items.Array)
                    table = tomlkit.inline_table() if inline else tomlkit.table()
                    table.update(wanted)
                    hooks.append(table)
                elif dict(entry) != wanted:
                    entry.clear()
                    entry.update(wanted)

        def uninstall_hooks(doc: Any) -> None:
            hooks = doc.get("hooks")
            if hooks is None:
                return
            mine = [e for e in hooks if ours(e)]
            for entry in mine:
                hooks.remove(entry)
            if mine and not len(hooks):  # a `hooks = []` of the user's own stays
                del doc["hooks"]

        def hooks_installed(doc: Any) -> dict[str, bool]:
            found = {entry.get("event") for entry in doc.get("hooks") or [] if ours(entry)}
            return {f"{e} hook": e in found for e in self.events}

        def install_mcp(doc: dict[str, Any]) -> None:
            if target.mcp == "none":
                return
            if target.local_mcp:
                entry: dict[str, Any] = {"command": target.stdio_command[0],
                                         "args": target.stdio_command[1:]}
            else:
                entry = {"url": target.mcp_url}
                if target.token:
                    entry["bearerTokenEnvVar"] = "MEMORY_TOKEN"
            servers = doc.setdefault("mcpServers", {})
            claim_server(servers, SERVER, target, home / "mcp.json")
            servers[SERVER] = entry

        def uninstall_mcp(doc: dict[str, Any]) -> None:
            servers = doc.get("mcpServers")
            if isinstance(servers, dict) and target.is_our_server(servers.get(SERVER)):
                del servers[SERVER]
                if not servers:
                    del doc["mcpServers"]

        def mcp_installed(doc: dict[str, Any]) -> dict[str, bool]:
            return {"MCP server": target.is_our_server((doc.get("mcpServers") or {}).get(SERVER))}

        return [ConfigFile(home / "config.toml", "toml", install_hooks, uninstall_hooks,
                           hooks_installed),
                ConfigFile(home / "mcp.json", "json", install_mcp, uninstall_mcp, mcp_installed)]

    def install_notes(self, target: InstallTarget) -> list[str]:
        notes = ["Kimi Code hooks are per user ($KIMI_CODE_HOME/config.toml); check with "
                 "`memory-mcp doctor` (and `kimi doctor`)."]
        if target.project_dir is not None:
            notes.append("(--project does not apply to Kimi Code: project MCP files need the "
                         "folder trusted, so the user-level config serves every project.)")
        return notes


@hookimpl
def register_harnesses(register) -> None:  # type: ignore[no-untyped-def]
    register(KimiCodeAdapter())
