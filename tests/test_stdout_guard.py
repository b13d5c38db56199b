"""Plugin code runs with stdout sent to stderr (stdout carries a hook's answer, `--stdio`'s
JSON-RPC and the service's LISTENING line). Two threads loading plugins at once, one through
the plugin manager and one through the hooks' light registry, must leave stdout as it was:
swapped by hand in each, the second saved the first's swap as "the real stdout", and every
later answer of the process went to stderr.

Run in a fresh interpreter with two installed plugins whose imports wait on the test's gates,
so the two loads overlap in the order that broke it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from test_plugin_isolation import install

DRIVER = textwrap.dedent("""
    import sys, threading
    import gates
    from semantic_memory.config import Settings
    from semantic_memory.harness import registry
    from semantic_memory.plugins import build_plugin_manager
    from semantic_memory.service.discovery import LINE_PREFIX, publish

    lines = []
    manager = threading.Thread(target=build_plugin_manager,
                               args=(Settings(plugins="slowa"),))
    light = threading.Thread(target=registry._registered,
                             args=([("slowb", "slowb", "slowb-plugin 0.1")], None, lines))
    manager.start()
    assert gates.a_in.wait(30)       # the plugin manager is inside its import
    light.start()
    assert gates.b_in.wait(30)       # and the light registry inside its own
    gates.a_go.set()
    manager.join(30)                 # the first out ...
    publish(Settings(discovery_file="off"), {"port": 1})  # ... while one is inside
    gates.b_go.set()
    light.join(30)                   # the last out
    print("ANSWER")
    sys.stdout.flush()
""")

GATES = "import threading\na_in, a_go, b_in, b_go = (threading.Event() for _ in range(4))\n"


def test_overlapping_plugin_loads_leave_stdout_as_it_was(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(site, "slowa", "import gates\ngates.a_in.set()\ngates.a_go.wait(30)\n"
                           "print('chatty plugin a')\n")
    install(site, "slowb", "import gates\ngates.b_in.set()\ngates.b_go.wait(30)\n"
                           "print('chatty plugin b')\n")
    (site / "gates.py").write_text(GATES, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(site),
           "MEMORY_DB_PATH": str(tmp_path / "memory.db")}
    done = subprocess.run([sys.executable, "-c", DRIVER], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    # The answer and the LISTENING line on stdout; the plugins' chatter on stderr only.
    assert out[-1] == "ANSWER", (done.stdout, done.stderr)
    assert any(line.startswith("MEMORY_MCP_LISTENING ") for line in out), done.stdout
    assert "chatty plugin" not in done.stdout
    assert "chatty plugin a" in done.stderr and "chatty plugin b" in done.stderr
