"""The `memory-mcp` console script. A harness runs `memory-mcp hook …` on every prompt and tool
call, and `memory-mcp proxy` at each start, so those paths import only what they need;
everything else goes to the click CLI."""

from __future__ import annotations

import sys

#: The exit code of a command ended by Ctrl-C (`cli_io.INTERRUPTED_EXIT`, not imported here).
INTERRUPTED_EXIT = 130


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        from .harness.runner import main as run_hook

        sys.exit(run_hook(sys.argv[2:]))
    if sys.argv[1:] == ["proxy"]:  # an agent waits for it to answer: no CLI imports either
        from .service.mcp_front import main as run_proxy

        sys.exit(run_proxy())
    try:
        # A Ctrl-C while the CLI's modules and plugins load (a second or so): before any
        # command ran. Within a command `cli.TextGroup.main` answers it.
        from .cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        _interrupted()


def _interrupted() -> None:
    """One line on stderr (none when it is closed), exit code 130: no traceback."""
    try:
        if sys.stderr is not None:
            sys.stderr.write("interrupted: before the command ran; nothing was done\n")
            sys.stderr.flush()
    except (OSError, ValueError, KeyboardInterrupt):
        pass
    sys.exit(INTERRUPTED_EXIT)
