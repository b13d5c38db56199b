"""The service: MCP over stdio or streamable HTTP, plus the REST sidecar, over one MemoryEngine.

- `serve_http(settings)`: one uvicorn process on MEMORY_HOST:MEMORY_PORT serving MCP at `/mcp`
  and the REST routes (`/ingest`, `/recall`, `/health`, `/api/*`, `/inject/report`).
- `serve_stdio(settings)`: the MCP tools over stdin/stdout; no port, nothing published.

Heavy imports (uvicorn, Starlette, the MCP SDK) happen inside these functions, so importing
this package stays cheap.
"""

from __future__ import annotations

from typing import Any

from ..config import Settings


def serve_http(settings: Settings, **kwargs: Any) -> int:
    from .runner import serve_http as run

    return run(settings, **kwargs)


def serve_stdio(settings: Settings) -> int:
    from .runner import serve_stdio as run

    return run(settings)


__all__ = ["serve_http", "serve_stdio"]
