"""A third-party harness adapter that hangs or is refused costs a hook no more than its budget
(plus the write grace), and the hook log, `doctor` and `stats` name what went wrong
(docs/harness-adapters.md, docs/harnesses.md "When something is wrong"). Installed plugins run
through the real `memory-mcp`, as in test_plugin_isolation.py."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from semantic_memory.harness.adapter import HarnessAdapter, HookCall
from semantic_memory.harness.client import ServiceClient
from semantic_memory.harness.runner import WRITE_GRACE_S
from semantic_memory.harness.settings import HookSettings
from test_plugin_isolation import install

ADAPTER = """
    import os, time
    from semantic_memory.harness import HarnessAdapter, hookimpl

    HANG_S = float(os.environ.get("QA_HANG_S", "0"))

    class Adapter(HarnessAdapter):
        name = "{name}"
        events = {{"prompt": "prompt"}}

        def prompt(self, payload):
            with open(os.environ["QA_CALLS"], "a") as calls:
                calls.write("prompt\\n")
            time.sleep(HANG_S)
            return payload.get("prompt")

    @hookimpl
    def register_harnesses(register):
        register({registered})
    """

#: A plugin that says, by a file, whether it was imported (the full plugin manager loads it).
SENTINEL = """
    import os
    open(os.environ["QA_SENTINEL"], "w").close()
    """


def memory_mcp(tmp_path: Path, site: Path, *args: str, stdin: str | None = None,
               plugins: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """`memory-mcp ARGS` with the plugins on `site` (test_plugin_isolation's), and `env`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environ.update({"PYTHONPATH": str(site), "HOME": str(tmp_path), "MEMORY_PORT": "9",
                    "MEMORY_DB_PATH": str(tmp_path / "m.db"), "COLUMNS": "300",
                    "MEMORY_PLUGINS": plugins or "bm25_porter," +
                    ",".join(p.stem for p in site.glob("*.py")), **env})
    return subprocess.run([sys.executable, "-c", "from semantic_memory.entry import main; main()",
                           *args], env=environ, input=stdin, capture_output=True, text=True,
                          timeout=60)


def hook(tmp_path: Path, site: Path, harness: str, prompt: str = "hello there",
         **env: str) -> tuple[dict[str, Any], float]:
    """One `memory-mcp hook HARNESS prompt` run: its log line, and how long it took."""
    payload = json.dumps({"session": "s1", "cwd": str(tmp_path), "prompt": prompt})
    started = time.monotonic()
    done = memory_mcp(tmp_path, site, "hook", harness, "prompt", stdin=payload, **env)
    took = time.monotonic() - started
    assert done.returncode == 0 and done.stdout == "", done
    return json.loads((tmp_path / "hooks.jsonl").read_text().splitlines()[-1]), took


def test_a_hung_adapter_method_is_asked_once_and_named_within_the_budget(tmp_path: Path
                                                                         ) -> None:
    """A `prompt()` hanging 8 s ran three times (once more in the watchdog's signal handler,
    once in the timeout path): a 1 s hook ran for 25 s, logged as "(recall)"."""
    site = install(tmp_path / "site", "qahang", ADAPTER.format(name="qahang",
                                                               registered="Adapter()"))
    calls, hang_s, budget_s = tmp_path / "calls", 8.0, 1.0
    line, took = hook(tmp_path, site, "qahang", QA_CALLS=str(calls), QA_HANG_S=str(hang_s),
                      MEMORY_HOOK_BUDGET_S=str(budget_s))
    assert calls.read_text().splitlines() == ["prompt"]
    assert took < (budget_s + WRITE_GRACE_S) * 1.5 < hang_s * 0.5, took
    assert line["outcome"] == "timeout", line
    assert line["detail"].endswith("in the qahang adapter's prompt() (qahang)"), line
    assert "recall" not in line["detail"], line


def test_an_adapter_that_fails_to_load_loads_no_other_plugin(tmp_path: Path) -> None:
    """The hook fell back to the full plugin manager (every plugin, numpy): 2.5 s against a
    1.5 s budget, only to meet the same broken adapter again."""
    site = install(tmp_path / "site", "qabroken",
                   "\n    raise RuntimeError('adapter import boom')" +
                   ADAPTER.format(name="qabroken", registered="Adapter()"))
    install(site, "qasentinel", SENTINEL)
    line, _ = hook(tmp_path, site, "qabroken", QA_SENTINEL=str(tmp_path / "imported"))
    assert not (tmp_path / "imported").exists()
    assert line["outcome"] == "error", line
    assert "no harness adapter named 'qabroken': plugin qabroken (qabroken-plugin 0.1): not " \
           "loaded: RuntimeError: adapter import boom" in line["detail"], line


def test_an_adapter_that_registers_no_adapter_is_named_in_the_log_and_by_doctor(
        tmp_path: Path) -> None:
    """The hook log said only `AttributeError: 'object' object has no attribute 'name'`, and
    doctor said NO ADAPTER INSTALLED and to install `semantic-memory-qajunk`, which does not
    exist: the adapter is installed, from qajunk-plugin, and refused."""
    site = install(tmp_path / "site", "qajunk", ADAPTER.format(name="qajunk",
                                                               registered="object()"))
    line, _ = hook(tmp_path, site, "qajunk", QA_CALLS=str(tmp_path / "calls"))
    refused = ("plugin qajunk (qajunk-plugin 0.1): object is not a "
               "semantic_memory.harness.HarnessAdapter; refused")
    assert line["outcome"] == "error" and refused in line["detail"], line
    assert "AttributeError" not in line["detail"], line
    doctor = memory_mcp(tmp_path, site, "doctor").stdout
    assert "qajunk  (ADAPTER REFUSED: its hooks fail on every prompt)" in doctor, doctor
    assert f"repair or update the adapter installed for it, refused: {refused}" in doctor
    assert "semantic-memory-qajunk" not in doctor and "NO ADAPTER INSTALLED" not in doctor


def test_stats_gives_the_embedders_reason_whatever_the_embedder(tmp_path: Path) -> None:
    """An unknown MEMORY_EMBEDDER (or a refused one) said "until an embedder is set up
    (MEMORY_MODEL_PATH …)", the llama-cpp hint, instead of the reason `stats --json` gives."""
    site = tmp_path / "site"
    site.mkdir()
    plugins = "bm25_porter,vector,llama_cpp"
    done = memory_mcp(tmp_path, site, "stats", plugins=plugins, MEMORY_EMBEDDER="nosuch")
    recall = next(line for line in done.stdout.splitlines() if line.startswith("recall:"))
    assert recall.startswith("recall: by words only: the embedder is off (MEMORY_EMBEDDER="
                             "nosuch"), recall
    done = memory_mcp(tmp_path, site, "stats", plugins=plugins, MEMORY_MODEL_PATH="")
    assert "until an embedder is set up (MEMORY_MODEL_PATH" in done.stdout, done.stdout


class CapAdapter(HarnessAdapter):
    name = "capped"
    events = {"prompt": "prompt"}
    max_context_chars = 100


class Formatter(http.server.BaseHTTPRequestHandler):
    """A service whose formatter ignores `budget_chars`: a block of 300 chars for any budget,
    none for a budget of 0."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        block = "x" * 300 if body.get("budget_chars", 0) > 0 else ""
        answer = json.dumps({"block": block, "items": [{"uid": "u1"}] if block else []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_block_that_stays_over_the_cap_is_not_nothing_relevant(tmp_path: Path) -> None:
    """The shorter asks got an empty block and the hook logged "nothing relevant"."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Formatter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        settings = HookSettings(db_path=str(tmp_path / "m.db"), plugin_budget_chars=300)
        call = HookCall("capped", "prompt", {}, settings,
                        ServiceClient(url, time.monotonic() + 10, ""), cwd=str(tmp_path))
        call.project = "p"
        assert CapAdapter().inject(call, "what is over the cap") == ""
        assert call.outcome == "skipped" and call.detail.startswith("block over cap"), call
    finally:
        server.shutdown()
        server.server_close()
