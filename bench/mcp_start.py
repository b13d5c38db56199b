"""What the MCP registration costs a one-shot agent turn with a healthy service, per harness:
the real binary (tests/harnesses) against the scripted model server, unwired, wired by
`memory-mcp install --mcp none` (hooks only) and by the default `--mcp proxy`, turns
interleaved, `--runs` each after one warm-up turn per variant. Reports each variant's median
and the proxy's cost (proxy minus none), and whether the model saw the memory tools (a
harness that gives up waiting on its MCP server runs the turn without them).

`--proxy-tree DIR` adds the proxy of another source tree (a `git worktree` of an older commit's
`core/`) as a fourth variant, for before/after figures from one run. Prints JSON.

    uv run --all-packages python bench/mcp_start.py --harness codex claude-code --runs 5
    git worktree add /tmp/before HEAD~1
    uv run --all-packages python bench/mcp_start.py --harness codex --proxy-tree /tmp/before/core
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from agent_support import HARNESSES, OneShot, model_mock
from test_service_support import memory_mcp_command, start_service

#: The files `memory-mcp install` registers the MCP server in, per harness (world-relative).
MCP_CONFIG = {"codex": "codex/config.toml", "kimi-code": "kimi/mcp.json",
              "claude-code": "home/.claude.json", "opencode": "web/opencode.json"}
PROMPT = "which port does the staging database use?"


def proxy_from(tree: Path, folder: Path) -> Path:
    """An executable that runs `memory-mcp` from the source tree `tree` (its `core/`)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "memory-mcp"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{tree}" exec "{sys.executable}" -c '
                      f'"from semantic_memory.entry import main; main()" "$@"\n')
    script.chmod(0o755)
    return script


def register(agent: OneShot, command: Path) -> None:
    """Point the registered MCP server (`memory-mcp proxy`) at `command`; the hooks stay."""
    path = agent.world.tmp / MCP_CONFIG[agent.harness]
    exe = memory_mcp_command()[0]
    text = path.read_text()
    if path.suffix == ".toml":
        new = text.replace(f'command = "{exe}"\nargs = ["proxy"]',
                           f'command = "{command}"\nargs = ["proxy"]')
    else:
        def repoint(node: Any) -> Any:
            if isinstance(node, list):
                return [str(command), "proxy"] if node == [exe, "proxy"] \
                    else [repoint(item) for item in node]
            if not isinstance(node, dict):
                return node
            if node.get("command") == exe and node.get("args") == ["proxy"]:
                return {**node, "command": str(command)}
            return {key: repoint(value) for key, value in node.items()}

        new = json.dumps(repoint(json.loads(text)), indent=2)
    if str(command) not in new:
        raise RuntimeError(f"no `{exe} proxy` registration in {path}")
    path.write_text(new)


def memory_tools(body: Any) -> bool:
    """Whether a model request offered the memory server's tools: among its tools
    (`mcp__memory…`; opencode's `memory_memory_…`), or named for the model to load (Claude
    Code defers MCP tools). Kimi Code has memory tools of its own, named otherwise."""
    text = json.dumps(body)
    return "mcp__memory" in text or "memory_memory_recall" in text


class Variant:
    def __init__(self, name: str, harness: str, tmp: Path, mock: Any, url: str,
                 mcp: str | None, tree: Path | None = None) -> None:
        self.name = name
        self.agent = OneShot(harness, tmp / name, mock, url, mcp or "none")
        self.mock = mock
        if mcp is None:  # unwired: nothing installed
            self.agent.installed_for = url
        else:
            self.agent.world.memory_mcp(*self.agent.install_args)
            self.agent.installed_for = url
            if tree is not None:
                register(self.agent, proxy_from(tree, tmp / name / "bin"))
        self.url, self.times, self.tools = url, [], []

    def turn(self, record: bool = True) -> None:
        seen = len(self.mock.requests)
        seconds = self.agent.run(self.url, PROMPT)
        if record:
            self.times.append(seconds)
            self.tools.append(any(memory_tools(r["body"]) for r in self.mock.requests[seen:]))


def measure(harness: str, runs: int, tmp: Path, url: str, tree: Path | None
            ) -> dict[str, Any]:
    with model_mock() as mock:
        variants = [Variant("unwired", harness, tmp, mock, url, None),
                    Variant("none", harness, tmp, mock, url, "none"),
                    Variant("proxy", harness, tmp, mock, url, "proxy")]
        if tree is not None:
            variants.append(Variant(f"proxy ({tree})", harness, tmp, mock, url, "proxy", tree))
        for variant in variants:  # the binary's first start sets up its own state
            variant.turn(record=False)
        for _ in range(runs):
            for variant in variants:
                variant.turn()
    out: dict[str, Any] = {}
    for variant in variants:
        out[variant.name] = {"median_s": round(statistics.median(variant.times), 2),
                             "runs_s": [round(t, 2) for t in variant.times],
                             "model_saw_memory_tools": f"{sum(variant.tools)}/{runs}"}
    none = statistics.median(variants[1].times)
    for variant in variants[2:]:
        out[f"{variant.name} minus none_s"] = round(statistics.median(variant.times) - none, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harness", nargs="+", default=["codex", "claude-code"],
                        choices=HARNESSES)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--proxy-tree", type=Path, default=None,
                        help="another source tree's core/ folder, measured as a fourth variant")
    args = parser.parse_args()
    tree = args.proxy_tree.resolve() if args.proxy_tree else None
    out: dict[str, Any] = {"runs": args.runs, "load_average": os.getloadavg()[0]}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        service = start_service(tmp / "service")
        try:
            for harness in args.harness:
                out[harness] = measure(harness, args.runs, tmp / harness, service.url, tree)
                print(f"{harness}: {json.dumps(out[harness])}", file=sys.stderr)
        finally:
            service.stop()
    out["load_average_end"] = os.getloadavg()[0]
    out["seconds"] = round(time.monotonic() - started)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
