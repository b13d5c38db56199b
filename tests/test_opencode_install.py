"""`memory-mcp install / uninstall / doctor` for opencode, run as a user runs them, on real
opencode config files (JSONC, commented): install registers the plugin (this checkout's
bundle) and the MCP server beside the user's entries, keeps every comment and byte it does not
change, is idempotent and backs up what it changes; uninstall gives back the exact text; doctor
shows the wiring and the plugin's outcomes. Then the JSONC editor on its own, property-based."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from semantic_memory.harness import jsonc
from test_harness_install import cli_env, memory_mcp, ok, snapshot

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "opencode-plugin" / "semantic-memory.js"
DEFAULT_MCP_URL = "http://127.0.0.1:8765/mcp"

USER_CONFIG = """\
// opencode, my way
{
  "$schema": "https://opencode.ai/config.json",
  /* the theme
     I like */
  "theme": "tokyonight",
  "plugin": ["opencode-wakatime", // time tracking
  ],
  "mcp": {
    // GitHub's tools
    "github": { "type": "remote", "url": "https://api.example/mcp" },
  },
}
"""


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    env = cli_env(tmp, **extra)
    env.pop("XDG_CONFIG_HOME", None)
    return env


def user_file(tmp: Path, name: str = "opencode.jsonc", text: str = USER_CONFIG) -> Path:
    path = tmp / "home" / ".config" / "opencode" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def ours(doc: dict[str, Any]) -> list[Any]:
    return [e for e in doc.get("plugin", []) if isinstance(e, list)
            and str(e[0]).endswith("/semantic-memory.js")]


def test_user_install_round_trip_keeps_comments_and_entries(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    config = user_file(tmp_path)
    ok(env, "install", "opencode")
    text = config.read_text()
    doc = jsonc.loads(text)
    [entry] = ours(doc)
    assert urlparse(entry[0]).scheme == "file" and Path(urlparse(entry[0]).path) == BUNDLE
    assert entry[1] == {"command": str(Path(entry[1]["command"]))}
    assert os.path.isabs(entry[1]["command"]) and entry[1]["command"].endswith("memory-mcp")
    assert doc["plugin"][0] == "opencode-wakatime"
    assert doc["mcp"] == {"github": {"type": "remote", "url": "https://api.example/mcp"},
                          "memory": {"type": "local", "command": [entry[1]["command"], "proxy"]}}
    for comment in ("// opencode, my way", "/* the theme\n     I like */", "// time tracking",
                    "// GitHub's tools"):
        assert comment in text
    assert not list(config.parent.glob("*.bak-*"))  # uninstall gives it back exactly

    installed = snapshot(tmp_path)
    assert "nothing to install" in ok(env, "install", "opencode")
    assert snapshot(tmp_path) == installed

    ok(env, "uninstall", "opencode")
    assert config.read_text() == USER_CONFIG
    uninstalled = snapshot(tmp_path)
    assert "nothing to uninstall" in ok(env, "uninstall", "opencode")
    assert snapshot(tmp_path) == uninstalled


def test_project_install_creates_and_removes_its_own_file(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    project = tmp_path / "project"
    done = memory_mcp(env, "install", "opencode", "--project", str(project), "--dry-run")
    assert done.returncode == 0 and f"+++ {project / 'opencode.json'}" in done.stdout
    assert '"memory": {' in done.stdout and not (project / "opencode.json").exists()

    ok(env, "install", "opencode", "--project", str(project))
    doc = json.loads((project / "opencode.json").read_text())
    assert len(ours(doc)) == 1 and doc["mcp"]["memory"]["command"][1:] == ["proxy"]
    assert not (tmp_path / "home" / ".config" / "opencode").exists()  # the user's untouched
    ok(env, "uninstall", "opencode", "--project", str(project))
    assert not (project / "opencode.json").exists()
    assert project.is_dir()  # the user's project folder stays, empty as it was


def test_the_file_opencode_reads_is_the_one_edited(tmp_path: Path) -> None:
    """User: the first of opencode.jsonc, opencode.json, config.json (under XDG_CONFIG_HOME
    when set); project: opencode.json, opencode.jsonc, .opencode/opencode.json{,c}."""
    env = env_for(tmp_path)
    user_file(tmp_path, "config.json", "{}")
    plain = user_file(tmp_path, "opencode.json", '{"theme": "x"}')
    ok(env, "install", "opencode")
    assert ours(json.loads(plain.read_text()))
    xdg = tmp_path / "xdg"
    ok({**env, "XDG_CONFIG_HOME": str(xdg)}, "install", "opencode")
    assert ours(json.loads((xdg / "opencode" / "opencode.json").read_text()))
    project = tmp_path / "project"
    (project / ".opencode").mkdir(parents=True)
    nested = project / ".opencode" / "opencode.jsonc"
    nested.write_text("{\n  // keep\n}\n")
    ok(env, "install", "opencode", "--project", str(project))
    assert "// keep" in nested.read_text() and ours(jsonc.loads(nested.read_text()))
    assert not (project / "opencode.json").exists()


def test_options_follow_the_settings_and_the_entry_stays_in_place(tmp_path: Path) -> None:
    """Tool capture set at install goes into the plugin's options; a later install without
    it takes it out, in place. --mcp (proxy by default) and a token shape the MCP entry."""
    env = env_for(tmp_path)
    config = user_file(tmp_path, "opencode.json", '{"plugin": ["a", "b"]}')
    ok({**env, "MEMORY_PLUGIN_TOOL_CAPTURE": "bash,Read"}, "install", "opencode")
    doc = json.loads(config.read_text())
    assert doc["plugin"][:2] == ["a", "b"] and doc["plugin"][2][1]["toolCapture"] == "bash,Read"
    doc["plugin"].append("c")  # the user adds one after ours
    config.write_text(json.dumps(doc))
    ok({**env, "MEMORY_TOKEN": "s3cret"}, "install", "opencode", "--mcp", "stdio")
    doc = json.loads(config.read_text())
    assert doc["plugin"][0:2] == ["a", "b"] and doc["plugin"][3] == "c"
    assert "toolCapture" not in doc["plugin"][2][1]
    server = doc["mcp"]["memory"]
    assert server["type"] == "local" and server["command"][1:] == ["--stdio"]
    ok({**env, "MEMORY_TOKEN": "s3cret"}, "install", "opencode")
    assert json.loads(config.read_text())["mcp"]["memory"] == {  # the token is read at run time
        "type": "local", "command": [server["command"][0], "proxy"]}
    ok({**env, "MEMORY_TOKEN": "s3cret"}, "install", "opencode", "--mcp", "http")
    assert json.loads(config.read_text())["mcp"]["memory"] == {
        "type": "remote", "url": DEFAULT_MCP_URL,
        "headers": {"Authorization": "Bearer {env:MEMORY_TOKEN}"}}
    ok(env, "uninstall", "opencode")
    assert json.loads(config.read_text()) == {"plugin": ["a", "b", "c"]}


@pytest.mark.parametrize("text, message", [
    ('{"theme": "dark",\n', "is not valid JSON (with comments)"),
    ('{"plugin": "opencode-wakatime"}', "is not laid out as expected"),
    ('{"mcp": {"memory": {"type": "local", "command": ["other-memory"]}}}',
     "already has an MCP server named 'memory'"),
])
def test_a_config_install_cannot_edit_safely_is_left_alone(tmp_path: Path, text: str,
                                                            message: str) -> None:
    env = env_for(tmp_path)
    user_file(tmp_path, "opencode.json", text)
    before = snapshot(tmp_path)
    done = memory_mcp(env, "install", "opencode")
    assert done.returncode != 0 and message in done.stderr
    assert snapshot(tmp_path) == before


def test_doctor_shows_the_wiring_and_the_plugins_outcomes(tmp_path: Path) -> None:
    """The plugin's own hook log lines (written by the real bundle, here with the service
    down) show up under opencode, beside its wiring."""
    env = env_for(tmp_path, MEMORY_PLUGIN_URL="http://127.0.0.1:9")
    user_file(tmp_path)
    ok(env, "install", "opencode")
    # opencode's order: the message, then the transform before its agent call, where the
    # plugin decides a "remember" (once the spans of earlier messages are read)
    script = (f"import plugin from {json.dumps(BUNDLE.as_uri())};\n"
              "const hooks = await plugin.server({ directory: process.cwd() }, {});\n"
              "const parts = [{ type: 'text', text: 'remember that doctor reads this' }];\n"
              "await hooks['chat.message']({ sessionID: 's' }, { parts });\n"
              "await hooks['experimental.chat.messages.transform']({}, { messages: [\n"
              "  { info: { id: 'm', sessionID: 's', role: 'user' }, parts }] });\n")
    subprocess.run(["node", "--input-type=module", "-e", script], env=env, cwd=tmp_path,
                   check=True, timeout=60)
    done = memory_mcp(env, "doctor")
    assert done.returncode == 1  # the service is down
    section = done.stdout.split("\nopencode  (")[1]
    lines = section.splitlines()
    assert lines[1].split() == ["user", "plugin:", "yes", "·", "MCP", "server:", "yes"]
    # The "remember" made while the service is down waits in the spool: safe, but the
    # service did not take it, so it is the hook's last failure
    assert lines[2].startswith("  last failure chat.message: ")
    assert "spooled — remembered in the spool (service down: nothing listens at " \
           "http://127.0.0.1:9 (Connection refused))" in lines[2]
    assert "spool     1 write(s) waiting for the service" in done.stdout
    report = json.loads(memory_mcp(env, "doctor", "--json").stdout)
    [opencode] = [h for h in report["harnesses"] if h["harness"] == "opencode"]
    assert opencode["scopes"]["user"]["entries"] == {"plugin": True, "MCP server": True}
    assert opencode["hooks"]["chat.message"]["failure"]["harness"] == "opencode"
    assert report["spool"]["pending"] == 1


# --- the JSONC editor ------------------------------------------------------------------------

KEYS = st.text(alphabet="abcmpxyz-$/é", min_size=1, max_size=6)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.text(alphabet='ab "\\/\n🙂é', max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)
DOCS = st.dictionaries(KEYS, VALUES, max_size=6)


def commented(value: Any, rng: st.DataObject, depth: int = 0) -> str:
    """`value` as JSONC with comments, trailing commas and odd layout here and there."""
    pad = "  " * (depth + 1)

    def gap() -> str:
        return rng.draw(st.sampled_from(["", " ", "\n" + pad, " // note\n" + pad,
                                         "/* c */ ", "\n" + pad + "// line\n" + pad]))

    if isinstance(value, dict):
        parts = [f"{gap()}{json.dumps(k, ensure_ascii=False)}:{gap()}{commented(v, rng, depth + 1)}"
                 for k, v in value.items()]
    elif isinstance(value, list):
        parts = [gap() + commented(v, rng, depth + 1) for v in value]
    else:
        return json.dumps(value, ensure_ascii=False)
    trailing = "," if parts and rng.draw(st.booleans()) else ""
    body = ",".join(parts) + trailing + gap()
    return ("{" + body + "}") if isinstance(value, dict) else ("[" + body + "]")


@settings(max_examples=150, deadline=None)
@given(DOCS, DOCS, st.data())
def test_jsonc_edits_hold_the_new_document(doc: dict[str, Any], other: dict[str, Any],
                                           data: st.DataObject) -> None:
    text = "// head\n" + commented(doc, data) + "\n"
    assert jsonc.loads(text) == doc
    # Any new document: the edited text holds exactly it.
    new = {**{k: v for k, v in doc.items() if data.draw(st.booleans())}, **other}
    assert jsonc.loads(jsonc.update(text, new)) == new


@settings(max_examples=150, deadline=None)
@given(DOCS, st.data())
def test_jsonc_adding_and_removing_our_entries_gives_back_the_text(
        doc: dict[str, Any], data: st.DataObject) -> None:
    """What install adds (a plugin entry, an MCP server) and uninstall removes leaves the
    user's text exactly as it was, whatever its comments and layout."""
    doc = {**doc, "plugin": data.draw(st.lists(st.text(max_size=5), min_size=1, max_size=3)),
           "mcp": {"github": {"url": "https://x"}}}
    text = commented(doc, data) + "\n"
    installed = json.loads(json.dumps(jsonc.loads(text)))
    installed["plugin"].append(["file:///x/semantic-memory.js", {"command": "/bin/memory-mcp"}])
    installed["mcp"]["memory"] = {"type": "remote", "url": DEFAULT_MCP_URL}
    after = jsonc.update(text, installed)
    assert jsonc.loads(after) == installed
    assert jsonc.update(after, doc) == text
