"""The `memory-mcp` console script. A harness runs `memory-mcp hook …` on every prompt and tool
call, so that path imports only the hook runner; everything else goes to the click CLI."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        from .harness.runner import main as run_hook

        sys.exit(run_hook(sys.argv[2:]))
    from .cli import main as cli_main

    cli_main()
