"""opencode adapter: `memory-mcp install opencode` and what `memory-mcp doctor` shows of it.

opencode runs no hook commands: the memory loop runs inside opencode, as a plugin
(`opencode-plugin/` at the repository root, TypeScript, bundled into one file that this
package ships). So this adapter maps no hook events; it registers the plugin and the MCP server
in opencode's config, and `doctor` reads the plugin's outcomes from the same hook log as the
other harnesses' (harness "opencode").

Config facts (opencode 1.18, checked against the binary; tests/test_opencode_e2e.py):

- User config: `$XDG_CONFIG_HOME/opencode` (default `~/.config/opencode`), the first of
  `opencode.jsonc`, `opencode.json`, `config.json` that exists (opencode's own writer picks it
  the same way). Project config: the first of `opencode.json`, `opencode.jsonc`,
  `.opencode/opencode.json`, `.opencode/opencode.jsonc` in the project. Both are JSONC: they
  are edited in place, comments kept.
- `"plugin": [spec | [spec, options]]`: a `file://` spec loads that module; a module whose
  default export is `{id, server}` is that one plugin, `server(input, options)` gets the
  options. The user's and the project's lists are concatenated (one spec loads once).
- `"mcp": {name: {"type": "remote", "url", "headers"} | {"type": "local", "command": [...]}}`;
  `{env:NAME}` in a value reads the environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semantic_memory.harness import HarnessAdapter, hookimpl

if TYPE_CHECKING:  # the installer is imported by `config_files`, never on a hook's path
    from semantic_memory.harness import ConfigFile, InstallTarget

SERVER = "memory"
#: The bundled plugin: `npm run build` in opencode-plugin/ writes it; wheels carry a copy.
PLUGIN_FILE = "semantic-memory.js"


def plugin_path() -> Path:
    """The plugin file to register: the copy shipped in this package, else (a source checkout,
    installed editable) the bundle in the repository's opencode-plugin/."""
    shipped = Path(__file__).with_name(PLUGIN_FILE)
    if shipped.is_file():
        return shipped
    checkout = Path(__file__).resolve().parents[4] / "opencode-plugin" / PLUGIN_FILE
    if checkout.is_file():
        return checkout
    from semantic_memory.harness.install import InstallError

    raise InstallError(f"the opencode plugin ({PLUGIN_FILE}) is missing from this install; "
                       "build it with `npm ci && npm run build` in opencode-plugin/")


def config_dir(home: Path) -> Path:
    """opencode's user config folder (xdg-basedir's rule)."""
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base and os.path.isabs(base) else home / ".config") / "opencode"


def config_file(target: InstallTarget) -> Path:
    """The opencode config file install edits: the one opencode reads that exists, else
    `opencode.json`."""
    if target.project_dir is not None:
        folder = target.project_dir
        candidates = [folder / "opencode.json", folder / "opencode.jsonc",
                      folder / ".opencode" / "opencode.json",
                      folder / ".opencode" / "opencode.jsonc"]
    else:
        folder = config_dir(target.home)
        candidates = [folder / "opencode.jsonc", folder / "opencode.json", folder / "config.json"]
    return next((path for path in candidates if path.is_file()), folder / "opencode.json")


def plugin_spec(entry: Any) -> str | None:
    """The spec of a `plugin` list entry (`spec` or `[spec, options]`)."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, list) and entry and isinstance(entry[0], str):
        return entry[0]
    return None


def is_our_plugin(entry: Any) -> bool:
    """A `plugin` entry this project wrote: a file:// spec of its bundle, wherever it lives."""
    spec = plugin_spec(entry)
    return bool(spec) and spec.startswith("file://") and spec.endswith(f"/{PLUGIN_FILE}")


def spec_file(entry: Any) -> Path:
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(plugin_spec(entry) or "").path))


class OpencodeAdapter(HarnessAdapter):
    name = "opencode"
    binary = "opencode"
    # No `events`: the plugin runs inside opencode, so no hook command is ever installed.

    def config_files(self, target: InstallTarget) -> list[ConfigFile]:
        from semantic_memory.harness.install import ConfigFile, claim_server

        path = config_file(target)

        def plugin_entry() -> list[Any]:
            from semantic_memory.config import Settings

            options: dict[str, Any] = {"command": target.executable}
            capture = Settings.from_env().plugin_tool_capture.strip()
            if capture:
                options["toolCapture"] = capture
            return [plugin_path().as_uri(), options]

        def install(doc: dict[str, Any]) -> None:
            plugins = doc.setdefault("plugin", [])
            if not isinstance(plugins, list):
                raise ValueError('"plugin" is not a list')
            entry = plugin_entry()
            ours = [i for i, e in enumerate(plugins) if is_our_plugin(e)]
            if ours:  # in place: the user's order stays
                plugins[ours[0]] = entry
                for i in reversed(ours[1:]):
                    del plugins[i]
            else:
                plugins.append(entry)
            if target.mcp != "none":
                servers = doc.setdefault("mcp", {})
                if not isinstance(servers, dict):
                    raise ValueError('"mcp" is not an object')
                claim_server(servers, SERVER, target, path)
                servers[SERVER] = self.mcp_entry(target)

        def uninstall(doc: dict[str, Any]) -> None:
            plugins = doc.get("plugin")
            if isinstance(plugins, list) and any(is_our_plugin(e) for e in plugins):
                plugins[:] = [e for e in plugins if not is_our_plugin(e)]
                if not plugins:
                    del doc["plugin"]
            servers = doc.get("mcp")
            if isinstance(servers, dict) and target.is_our_server(servers.get(SERVER)):
                del servers[SERVER]
                if not servers:
                    del doc["mcp"]

        def installed(doc: dict[str, Any]) -> dict[str, bool]:
            plugins = doc.get("plugin") if isinstance(doc.get("plugin"), list) else []
            servers = doc.get("mcp") if isinstance(doc.get("mcp"), dict) else {}
            return {"plugin": any(is_our_plugin(e) and spec_file(e).is_file() for e in plugins),
                    "MCP server": target.is_our_server(servers.get(SERVER))}

        # `opencode.json` in the project folder itself: an uninstall that empties the file may
        # remove it, never the user's project folder (`.opencode/` is opencode's own)
        return [ConfigFile(path, "jsonc", install, uninstall, installed,
                           owns_folder=path.parent != target.project_dir)]

    @staticmethod
    def mcp_entry(target: InstallTarget) -> dict[str, Any]:
        if target.local_mcp:
            return {"type": "local", "command": target.stdio_command}
        entry: dict[str, Any] = {"type": "remote", "url": target.mcp_url}
        if target.token:
            entry["headers"] = {"Authorization": "Bearer {env:MEMORY_TOKEN}"}
        return entry

    def install_notes(self, target: InstallTarget) -> list[str]:
        notes = ["opencode loads the plugin at its next start. Check the wiring with "
                 "`memory-mcp doctor`; set MEMORY_PLUGIN_DEBUG=1 to see each decision."]
        if not target.tool_capture:
            notes.append("Tool capture is off: set MEMORY_PLUGIN_TOOL_CAPTURE (e.g. bash,read) "
                         "when opencode runs, or before install to write it into the plugin's "
                         "options.")
        return notes


@hookimpl
def register_harnesses(register) -> None:  # type: ignore[no-untyped-def]
    register(OpencodeAdapter())
