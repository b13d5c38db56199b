"""The MCP stdio wire, taken private: shared by `memory-mcp --stdio` (runner.py) and the
proxy's front (mcp_front.py), which must start with the standard library only."""

from __future__ import annotations

import os
from typing import BinaryIO


def claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """The protocol's stdin and stdout, private; fd 0 then reads nothing and fd 1 writes to
    stderr, so nothing else in this process can corrupt the stream."""
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out
