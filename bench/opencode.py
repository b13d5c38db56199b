"""What the opencode plugin costs: each action in-process, and whole `opencode run`s.

    uv run --all-packages python bench/opencode.py                     # 100k memories
    uv run --all-packages python bench/opencode.py --memories 20000 --runs 30 --opencode-runs 5

Part 1, the plugin's actions (opencode-plugin/semantic-memory.js driven by node, as opencode
drives it, against a real service holding `--memories` synthetic memories, bench/scale.py's
generator, the db cached in bench/results/), `--runs` times each after warm-up:

- inject, new prompt: the agent's first model call after a prompt (a LoCoMo question): recall
  with the relevance bar, and the report when something goes in;
- inject, same prompt: a later call of the same turn (a tool step): no service call, the same
  bytes again;
- flush (200 turns): a compaction's messages cut into ~100 memories and stored;
- capture: an allow-listed bash output stored as an artifact;
- service down / hung: MEMORY_PLUGIN_URL at a closed port / at a server that never answers.

The hooks' shared back-off is off here (MEMORY_HOOK_BACKOFF_S=0): each figure is what one
meeting with a dead or hung service costs, the worst case; with it on, the actions of the next
30 s skip the service at once.

Part 2 (when tests/harnesses has the opencode binary): `opencode run` against a local mock
model, `--opencode-runs` times each, without the plugin, with it (service up), with the
service down and with it hung (the plugin's budget, 1.5 s): the wall clock a user waits.
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from bench_service import RESULTS, build_db, clean_env, memory_mcp, spawn, stop  # noqa: E402
from harness_support import closed_port, hanging_server  # noqa: E402
from locomo import load  # noqa: E402
from model_mock import ModelMock  # noqa: E402
from scale import synthetic  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BUNDLE = REPO / "opencode-plugin" / "semantic-memory.js"
OPENCODE = REPO / "tests" / "harnesses" / "node_modules" / ".bin" / "opencode"
PLUGINS = "bm25_porter,bm25_trigram,bigram"

# Drives MemoryPlugin as opencode does (hook order and message shapes of opencode 1.18).
DRIVER = r"""
import { MemoryPlugin, loadSettings } from %(bundle)s;
import { readFileSync } from "node:fs";
const job = JSON.parse(readFileSync(0, "utf8"));
const SYSTEM = "You are opencode.\n<env>\n  Working directory: /src\n</env>";
const msg = (sid, role, text) => ({ info: { id: "m" + Math.random(), sessionID: sid, role },
  parts: [{ id: "p", sessionID: sid, messageID: "m", type: "text", text }] });
const plugin = (url, budgetS) => new MemoryPlugin(loadSettings(
  { MEMORY_PLUGIN_URL: url, MEMORY_DB_PATH: job.log, MEMORY_HOOK_BUDGET_S: String(budgetS),
    MEMORY_PLUGIN_TOOL_CAPTURE: "bash", MEMORY_HOOK_BACKOFF_S: "0" }, { project: "p3" }).settings, "/src", [], () => {});
const ms = async (fn) => { const t = performance.now(); await fn(); return performance.now() - t; };
const out = {};
async function turn(p, sid, prompt) {
  const parts = [{ id: "p", sessionID: sid, messageID: "m", type: "text", text: prompt }];
  await p.chatMessage(sid, parts);
  await p.messagesTransform([msg(sid, "user", prompt)]);
  await p.systemTransform(sid, [SYSTEM]);
}
const up = plugin(job.url, 5);
for (const [i, q] of job.warm.entries()) await turn(up, "warm" + i, q);
out["inject, new prompt"] = [];
out["inject, same prompt"] = [];
for (const [i, q] of job.questions.entries()) {
  const sid = "s" + i;
  await up.chatMessage(sid, [{ id: "p", sessionID: sid, messageID: "m", type: "text", text: q }]);
  out["inject, new prompt"].push(await ms(async () => {
    await up.messagesTransform([msg(sid, "user", q)]);
    await up.systemTransform(sid, [SYSTEM]);
  }));
  out["inject, same prompt"].push(await ms(async () => {
    await up.messagesTransform([msg(sid, "user", q), msg(sid, "assistant", "checking")]);
    await up.systemTransform(sid, [SYSTEM]);
  }));
}
out["flush (200 turns)"] = [];
for (const [i, turns] of job.flushes.entries()) {
  const sid = "f" + i;
  const messages = turns.map(([role, text]) => msg(sid, role, text));
  out["flush (200 turns)"].push(await ms(async () => {
    up.compacting(sid);
    await up.messagesTransform(messages);
  }));
}
out["capture"] = [];
for (const output of job.outputs) {
  out["capture"].push(await ms(async () => {
    up.toolExecuted("bash", "t", { command: "pytest -q" }, output);
    await up.dispose();
  }));
}
for (const [name, url] of [["service down", job.down], ["service hung", job.hung]]) {
  out[name] = [];
  for (const [i, q] of job.questions.slice(0, name === "service hung" ? 3 : undefined).entries()) {
    const p = plugin(url, 1.5);  // a fresh plugin: a hung service is waited for once per process
    const sid = "d" + i;
    await p.chatMessage(sid, [{ id: "p", sessionID: sid, messageID: "m", type: "text", text: q }]);
    out[name].push(await ms(async () => {
      await p.messagesTransform([msg("d" + i, "user", q)]);
      await p.systemTransform("d" + i, [SYSTEM]);
    }));
  }
}
process.stdout.write(JSON.stringify(out));
"""


def p(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": round(statistics.median(ordered), 1),
            "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 1),
            "n": len(ordered)}


def actions(url: str, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    data = load()
    questions = [q.text for c in data for q in c.questions]
    turns = [t for c in data for _, t in c.turns]
    flushes = [[["user" if j % 2 == 0 else "assistant", t] for j, t in
                enumerate(rng.sample(turns, 200))] for _ in range(max(3, args.runs // 4))]
    with tempfile.TemporaryDirectory() as tmp, hanging_server() as hung:
        job = {"url": url, "down": f"http://127.0.0.1:{closed_port()}", "hung": hung,
               "log": str(Path(tmp) / "log.db"), "warm": rng.sample(questions, 20),
               "questions": rng.sample(questions, args.runs), "flushes": flushes,
               "outputs": ["\n".join(rng.sample(turns, 20)) for _ in range(args.runs)]}
        script = DRIVER % {"bundle": json.dumps(BUNDLE.as_uri())}
        done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True,
                              text=True, input=json.dumps(job), timeout=1800, check=True)
    return {name: p(samples) for name, samples in json.loads(done.stdout).items()}


def opencode_runs(url: str, runs: int) -> dict[str, Any]:
    """Median wall clock of `opencode run`, in four set-ups, runs interleaved."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-opencode-"))
    home, project = tmp / "home", tmp / "project"
    config_dir = home / ".config" / "opencode"
    config_dir.mkdir(parents=True)
    project.mkdir()
    (config_dir / "node_modules").mkdir()  # see tests/test_opencode_e2e.py
    (config_dir / "package-lock.json").write_text(json.dumps(
        {"packages": {"": {"dependencies": {"@opencode-ai/plugin": "1.18.33"}}}}))
    times: dict[str, list[float]] = {"without the plugin": [], "plugin, service up": [],
                                     "plugin, service down": [], "plugin, service hung": []}
    title = ("title generator", {"text": "A title"})
    with ModelMock(aside=lambda b: title[1] if title[0] in json.dumps(b)[:400] else None) as mock, \
            hanging_server() as hung:
        down = f"http://127.0.0.1:{closed_port()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "XDG_"))}
        env.update(HOME=str(home), PWD=str(project), OPENCODE_DISABLE_MODELS_FETCH="1",
                   OPENCODE_DISABLE_AUTOUPDATE="1", MEMORY_PROJECT="p3",
                   MEMORY_DB_PATH=str(tmp / "log.db"), MEMORY_HOOK_BACKOFF_S="0")
        base = {"model": "mock/mock-model", "provider": {"mock": {
            "npm": "@ai-sdk/openai-compatible", "name": "Mock",
            "options": {"baseURL": f"{mock.url}/v1", "apiKey": "dummy"},
            "models": {"mock-model": {"name": "Mock", "limit": {"context": 100_000,
                                                                "output": 1_000}}}}}}
        setups = {"without the plugin": (None, False), "plugin, service up": (url, True),
                  "plugin, service down": (down, True), "plugin, service hung": (hung, True)}

        def run(name: str) -> float:
            service, plugin = setups[name]
            config = dict(base, plugin=[BUNDLE.as_uri()] if plugin else [])
            (config_dir / "opencode.json").write_text(json.dumps(config))
            run_env = dict(env, **({"MEMORY_PLUGIN_URL": service} if service else {}))
            started = time.monotonic()
            subprocess.run([str(OPENCODE), "run", "which", "port", "does", "staging", "use?"],
                           cwd=project, env=run_env, capture_output=True, check=True,
                           timeout=300, stdin=subprocess.DEVNULL)
            return time.monotonic() - started

        run("without the plugin")  # opencode's first run sets up its database
        for _ in range(runs):
            for name in times:
                times[name].append(run(name))
    shutil.rmtree(tmp, ignore_errors=True)
    return {name: {"median_s": round(statistics.median(t), 2), "runs": [round(x, 2) for x in t]}
            for name, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--opencode-runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    RESULTS.mkdir(parents=True, exist_ok=True)
    db = RESULTS / f"hooks-{args.memories}.db"
    build_db(db, synthetic(args.memories), PLUGINS)
    report: dict[str, Any] = {"memories": args.memories,
                              "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]}
    proc, info = spawn(memory_mcp(), clean_env(MEMORY_DB_PATH=str(db), MEMORY_PLUGINS=PLUGINS,
                                               MEMORY_MAINTENANCE_ON_START="0",
                                               MEMORY_DISCOVERY_FILE="off"))
    try:
        report["actions_ms"] = actions(info["url"], args, rng)
        if OPENCODE.exists() and args.opencode_runs:
            report["opencode_run"] = opencode_runs(info["url"], args.opencode_runs)
    finally:
        stop(proc)
    report["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
