"""A minimal harness adapter: the worked example of docs/harness-adapters.md.

The harness it serves is imaginary and as plain as a harness gets. It runs one command per
event with a JSON object on stdin and puts whatever the command prints into the model's
context:

    session-start  {"session", "cwd", "history": [{"role", "text"}, ...]}
    prompt         {"session", "cwd", "prompt"}
    compact        {"session", "cwd", "history": [...]}   (the turns about to be summarised)
    tool           {"session", "cwd", "tool", "input", "output"}

and reads its hooks from `.example-agent/hooks.json`: {"hooks": {"<event>": "<command>"}}.
"""

from __future__ import annotations

from semantic_memory.harness import HarnessAdapter, ToolCall, Turn, hookimpl

TYPE_CHECKING = False  # typing costs a hook process more than its own work
if TYPE_CHECKING:  # the installer is imported by `config_files`, never on a hook's path
    from typing import Any

    from semantic_memory.harness import ConfigFile, InstallTarget


class ExampleAdapter(HarnessAdapter):
    name = "example"
    binary = "example-agent"
    events = {"session-start": "session_start", "prompt": "prompt", "compact": "compact",
              "tool": "tool"}

    # Reading the harness's input: the base class reads `cwd` and `prompt` already.
    def session_id(self, payload: dict[str, Any]) -> str | None:
        return payload.get("session")

    def turns(self, payload: dict[str, Any]) -> list[Turn]:
        return [Turn(t["role"], t["text"]) for t in payload.get("history", [])
                if isinstance(t, dict) and isinstance(t.get("text"), str)]

    def tool_call(self, payload: dict[str, Any]) -> ToolCall | None:
        if not isinstance(payload.get("tool"), str):
            return None
        return ToolCall(payload["tool"], payload.get("input"), str(payload.get("output", "")))

    # Writing its output: plain text is what this harness adds to the context, which is the
    # base class's default `context_output`.

    # Installing: one JSON file, in the project or in the user's home.
    def config_files(self, target: InstallTarget) -> list[ConfigFile]:
        from semantic_memory.harness import ConfigFile

        folder = (target.project_dir or target.home) / ".example-agent"
        events = [e for e in self.events if e != "tool" or target.tool_capture]

        def install(doc: dict[str, Any]) -> None:
            hooks = doc.setdefault("hooks", {})
            for event in events:
                hooks[event] = target.hook_command(event, tool=event == "tool")

        def uninstall(doc: dict[str, Any]) -> None:
            hooks = doc.get("hooks", {})
            ours = [event for event in hooks if target.is_our_command(hooks[event])]
            for event in ours:
                del hooks[event]
            if ours and not hooks:  # emptied by us: a file install created then goes too
                del doc["hooks"]

        def installed(doc: dict[str, Any]) -> dict[str, bool]:
            hooks = doc.get("hooks", {})
            return {f"{e} hook": target.is_our_command(hooks.get(e)) for e in self.events}

        return [ConfigFile(folder / "hooks.json", "json", install, uninstall, installed)]


@hookimpl
def register_harnesses(register) -> None:  # type: ignore[no-untyped-def]
    register(ExampleAdapter())
