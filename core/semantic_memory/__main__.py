"""`python -m semantic_memory` = `memory-mcp`."""

from .cli import main

main()
