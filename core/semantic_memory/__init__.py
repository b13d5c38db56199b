"""semantic-memory-mcp: a local memory sidecar for coding agents."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("semantic-memory-mcp")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
