"""What a hung memory service costs a one-shot agent run, per harness and MCP registration.

Each real binary (tests/harnesses) is wired by `memory-mcp install` (`--mcp proxy`, the
default, and `--mcp http` for comparison) against the scripted model server, then runs one
prompt with the memory URL (MEMORY_PLUGIN_URL, and the registered URL) at a healthy service
and at a server that accepts connections and never answers, alternately, `--runs` times each,
every run from a fresh back-off state (a session that meets the hung service first). Reports
the median and minimum of each, hung minus healthy (the goal: at most 3 s), and what each hook
of the hung runs logged. Prints JSON.

    uv run --all-packages python bench/no_stall.py
    uv run --all-packages python bench/no_stall.py --harness claude-code opencode codex kimi-code \\
        --mcp proxy http --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from agent_support import HARNESSES, OneShot, model_mock
from harness_support import hanging_server, hook_log
from test_service_support import start_service


def stats(times: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(times), 2), "min_s": round(min(times), 2),
            "runs_s": [round(t, 2) for t in times]}  # type: ignore[dict-item]


def measure(harness: str, mcp: str, runs: int, tmp: Path, service_url: str,
            hung_url: str) -> dict[str, Any]:
    with model_mock() as mock:
        agent = OneShot(harness, tmp, mock, service_url, mcp)
        agent.run(service_url)  # the binary's first start sets up its own state
        log_dir = tmp / "svc"
        healthy, hung, hooks = [], [], []
        for _ in range(runs):
            healthy.append(agent.run(service_url))
            seen = len(hook_log(log_dir))
            hung.append(agent.run(hung_url))
            hooks = [f"{e['event']}: {e['outcome']} {e['ms']:.0f} ms"
                     for e in hook_log(log_dir)[seen:]]
    out = {"healthy": stats(healthy), "hung": stats(hung),
           "hung_minus_healthy_s": round(statistics.median(hung) - statistics.median(healthy), 2),
           "hooks_of_the_last_hung_run": hooks}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harness", nargs="+", default=["claude-code", "opencode"],
                        choices=HARNESSES)
    parser.add_argument("--mcp", nargs="+", default=["proxy", "http"],
                        choices=["proxy", "http", "stdio", "none"])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    out: dict[str, Any] = {"runs": args.runs, "hook_budget_s": 1.5}
    with tempfile.TemporaryDirectory() as tmp_name, hanging_server() as hung_url:
        tmp = Path(tmp_name)
        service = start_service(tmp / "service")
        try:
            for harness in args.harness:
                for mcp in args.mcp:
                    result = measure(harness, mcp, args.runs, tmp / f"{harness}-{mcp}",
                                     service.url, hung_url)
                    out[f"{harness} --mcp {mcp}"] = result
                    print(f"{harness} --mcp {mcp}: {json.dumps(result)}", file=sys.stderr)
        finally:
            service.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
