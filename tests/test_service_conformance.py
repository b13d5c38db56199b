"""The MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in
tests/conformance/package.json) against a real server. Scenarios that need the suite's own
fixture tools/resources/prompts are listed in tests/conformance/baseline.yml; everything else
must pass. The pinned package is installed on first use (`npm ci`, as `.ci/run` does); the test
needs Node.js and npm on PATH."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from test_service_support import start_service

HERE = Path(__file__).parent / "conformance"
CLI = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = HERE / "baseline.yml"
MUST_PASS = {"server-initialize", "ping", "tools-list", "resources-list", "prompts-list",
             "server-sse-multiple-streams", "dns-rebinding-protection", "logging-set-level",
             "completion-complete"}


def _install_suite() -> None:
    """`npm ci` of the pinned suite when it is not installed yet (a fresh clone)."""
    if CLI.exists():
        return
    npm = shutil.which("npm")
    assert shutil.which("node") and npm, "the MCP conformance suite needs Node.js and npm on PATH"
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE,
                   check=True, timeout=600, stdin=subprocess.DEVNULL)
    assert CLI.exists(), f"npm ci did not install {CLI}"


def test_conformance_generic_scenarios(tmp_path: Path) -> None:
    _install_suite()
    svc = start_service(tmp_path / "server")
    try:
        out = tmp_path / "results"
        result = subprocess.run(
            ["node", str(CLI), "server", "--url", svc.mcp_url,
             "--expected-failures", str(BASELINE), "-o", str(out)],
            cwd=HERE, capture_output=True, text=True, timeout=300, check=False)
    finally:
        svc.stop()
    summary = result.stdout[result.stdout.find("=== SUMMARY"):]
    assert result.returncode == 0, summary + result.stderr[-3000:]
    passed = set()
    for checks in out.glob("server-*/checks.json"):
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z?$", "", checks.parent.name)[len("server-"):]
        if all(c["status"] == "SUCCESS" for c in json.loads(checks.read_text())):
            passed.add(scenario)
    assert MUST_PASS <= passed, (MUST_PASS - passed, summary)
