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

Where these files are and which entries are ours live in the core (harness/install.py,
`opencode_*`, `is_our_plugin`): `uninstall opencode` and `doctor` need them once this package,
and the bundle it ships, are uninstalled.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semantic_memory.harness import HarnessAdapter, hookimpl

if TYPE_CHECKING:  # the installer is imported by `config_files`, never on a hook's path
    from semantic_memory.harness import ConfigFile, InstallTarget

#: The bundled plugin: `npm run build` in opencode-plugin/ writes it; wheels carry a copy (the
#: core's `install.OPENCODE_PLUGIN`, named here too: a hook's path never imports the installer).
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


def config_file(target: InstallTarget) -> Path:
    """The opencode config file install edits: the one opencode reads that exists, else
    `opencode.json` (the user's or the project's)."""
    from semantic_memory.harness.install import opencode_config_dir, opencode_config_paths

    folder = target.project_dir or opencode_config_dir(target.home)
    candidates = opencode_config_paths(target.home, target.project_dir)
    return next((path for path in candidates if path.is_file()), folder / "opencode.json")


class OpencodeAdapter(HarnessAdapter):
    name = "opencode"
    binary = "opencode"
    # No `events`: the plugin runs inside opencode, so no hook command is ever installed.

    def config_files(self, target: InstallTarget) -> list[ConfigFile]:
        from semantic_memory.harness.install import (
            OPENCODE_SERVER,
            ConfigFile,
            claim_server,
            is_our_plugin,
            remove_opencode_entries,
            spec_file,
        )

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
                claim_server(servers, OPENCODE_SERVER, target, path)
                servers[OPENCODE_SERVER] = self.mcp_entry(target)

        def installed(doc: dict[str, Any]) -> dict[str, bool]:
            plugins = doc.get("plugin") if isinstance(doc.get("plugin"), list) else []
            servers = doc.get("mcp") if isinstance(doc.get("mcp"), dict) else {}
            return {"plugin": any(is_our_plugin(e) and spec_file(e).is_file() for e in plugins),
                    "MCP server": target.is_our_server(servers.get(OPENCODE_SERVER))}

        # `opencode.json` in the project folder itself: an uninstall that empties the file may
        # remove it, never the user's project folder (`.opencode/` is opencode's own)
        uninstall = partial(remove_opencode_entries, target=target)  # the core's: doctor's too
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
