"""The `memory-mcp` console script. A harness runs `memory-mcp hook …` on every prompt and tool
call, and `memory-mcp proxy` at each start, so those paths import only what they need;
everything else goes to the click CLI."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        from .harness.runner import main as run_hook

        sys.exit(run_hook(sys.argv[2:]))
    if sys.argv[1:] == ["proxy"]:  # an agent waits for it to answer: no CLI imports either
        from .service.mcp_front import main as run_proxy

        sys.exit(run_proxy())
    from .cli import main as cli_main

    cli_main()
