"""What one agent's MCP server costs, per registration `memory-mcp install` can write:

- `proxy` (`memory-mcp proxy`, the default): forwards each tool call to the running service;
- `stdio` (`memory-mcp --stdio`): opens the store itself, keyword channels only;
- `stdio + model` (`memory-mcp --stdio` with MEMORY_MODEL_PATH): also loads the embedding
  model (`--model`, default the MiniLM GGUF the tests use; the recommended Qwen3-0.6B is
  ~640 MB and costs that much more per client).

Each is spawned `--runs` times as a harness spawns it (stdin/stdout pipes, JSON-RPC lines):
start = spawn to the `initialize` answer (wall clock, and the CPU the process used: the
figure a loaded machine does not distort), then `tools/list`, then one `memory_recall` (which
loads the model where there is one), and the process's RSS after initialize and after the
recall. The proxy runs against a real service holding `--memories` memories; the service's own
RSS is reported once (it is shared by every client). Prints JSON.

    uv run --all-packages python bench/mcp_proxy.py
    uv run --all-packages python bench/mcp_proxy.py --runs 10 --model /path/to/model.gguf
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_service_support import memory_mcp_command, service_env, start_service

MINILM = Path.home() / ".cache/semantic-memory-mcp/models/all-MiniLM-L6-v2-f16.gguf"


def cpu_ms(pid: int) -> float:
    """User + system CPU the process has used: its start's cost, whatever the machine's load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


class Client:
    """A harness's side of a stdio MCP server: one JSON-RPC message per line."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([*memory_mcp_command(), *args], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        assert self.proc.stdin and self.proc.stdout
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed stdout during {method}")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply

    def notify(self, method: str) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def one_run(args: list[str], env: dict[str, str]) -> dict[str, float]:
    started = time.monotonic()
    client = Client(args, env)
    try:
        client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "bench", "version": "0"}})
        start_ms = (time.monotonic() - started) * 1000
        start_cpu_ms = cpu_ms(client.proc.pid)
        client.notify("notifications/initialized")
        rss_init = rss_mib(client.proc.pid)
        t = time.monotonic()
        tools = client.request("tools/list")["result"]["tools"]
        list_ms = (time.monotonic() - t) * 1000
        assert len(tools) == 5, tools
        t = time.monotonic()
        answer = client.request("tools/call", {"name": "memory_recall",
                                               "arguments": {"query": "staging database port"}})
        recall_ms = (time.monotonic() - t) * 1000
        assert not answer["result"].get("isError"), answer
        rss_recall = rss_mib(client.proc.pid)
    finally:
        client.close()
    return {"start_ms": start_ms, "start_cpu_ms": start_cpu_ms, "tools_list_ms": list_ms, "first_recall_ms": recall_ms,
            "rss_after_initialize_mib": rss_init, "rss_after_recall_mib": rss_recall}


def summary(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in runs), 1) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--model", type=Path, default=MINILM)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        service = start_service(tmp / "svc")
        try:
            with service.client() as http:
                items = [{"content": f"Memory {i}: the staging database port is {5000 + i}"}
                         for i in range(args.memories)]
                for chunk in range(0, len(items), 500):
                    http.post("/ingest", json={"items": items[chunk:chunk + 500]})
            base = service_env(tmp / "svc")
            configs: dict[str, tuple[list[str], dict[str, str]]] = {
                "proxy": (["proxy"], {**base, "MEMORY_PLUGIN_URL": service.url}),
                "stdio": (["--stdio"], base),
            }
            if args.model.exists():
                # MEMORY_FAST_PATH=0: the recall embeds its query, so the model is loaded.
                configs["stdio + model"] = (["--stdio"], {
                    **base, "MEMORY_MODEL_PATH": str(args.model), "MEMORY_FAST_PATH": "0"})
            out: dict[str, Any] = {"memories": args.memories, "runs": args.runs,
                                   "model": str(args.model) if args.model.exists() else None}
            for name, (argv, env) in configs.items():
                # --stdio runs beside the service here, on the same db: two writers, which
                # is what a stdio registration per client means.
                out[name] = summary([one_run(argv, env) for _ in range(args.runs)])
            out["service_rss_mib"] = rss_mib(service.proc.pid)
        finally:
            service.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
