"""A hung memory service does not stall the agent: each real binary, wired by `memory-mcp
install` as it writes by default (hooks, and the MCP server `memory-mcp proxy`), runs a
one-shot prompt against a server that accepts connections and never answers, and against a
healthy service, alternately in the same test; the hung runs stay within a wide ratio of the
healthy ones. (An HTTP registration at the hung URL held opencode ~60 s.) The absolute
figures are bench/no_stall.py's, in docs/benchmarks.md."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from agent_support import HARNESSES, OneShot, model_mock
from harness_support import hanging_server, hook_log
from test_service_support import start_service

pytestmark = pytest.mark.slow

#: A hung run may cost one hook budget more than a healthy one (each hung run starts without
#: the back-off), and then this factor for a loaded machine. A stalled MCP connection costs
#: far more (opencode ~8x).
MAX_RATIO = 2.5
#: The hook budget agent_support.OneShot configures (MEMORY_HOOK_BUDGET_S).
BUDGET_S = 1.5


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_hung_service_does_not_stall_the_agent(tmp_path: Path, harness: str) -> None:
    connections: list[socket.socket] = []
    service = start_service(tmp_path / "service")
    try:
        with model_mock() as mock, hanging_server(connections) as hung_url:
            agent = OneShot(harness, tmp_path / "agent", mock, service.url)
            agent.run(service.url)  # the binary's first start sets up its own state
            healthy, hung = [], []
            for _ in range(2):  # alternately: both see the same machine load
                healthy.append(agent.run(service.url))
                hung.append(agent.run(hung_url))
    finally:
        service.stop()
    print(f"\n{harness}: healthy {min(healthy):.2f} s, hung {min(hung):.2f} s")
    assert connections, "the hung service was never met"
    outcomes = {e["outcome"] for e in hook_log(tmp_path / "agent" / "svc")}
    assert "timeout" in outcomes, outcomes
    assert min(hung) <= (min(healthy) + BUDGET_S) * MAX_RATIO, (healthy, hung)
