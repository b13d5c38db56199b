"""semantic-memory-mcp: a local memory sidecar for coding agents."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`__version__`, read from the installed metadata on first use: importlib.metadata costs
    a hook process (`memory-mcp hook`) more than everything else it imports."""
    if name != "__version__":
        raise AttributeError(name)
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("semantic-memory-core")
    except PackageNotFoundError:  # running from a source tree without installation
        value = "0.0.0"
    globals()["__version__"] = value
    return value
