"""Who may talk to the HTTP service: the bind rule, the Host/Origin allow-list (DNS-rebinding
protection) and the Bearer token.

- Binding anything but a loopback address without `MEMORY_TOKEN` refuses to start.
- Every request's Host (and Origin, when a browser sends one) must name an allowed host:
  the loopback names, the bound address, and whatever `MEMORY_ALLOWED_HOSTS` adds. A web page
  that rebinds its own name to 127.0.0.1 therefore gets 421 instead of the user's memories.
- With `MEMORY_TOKEN` set, every route but `/health` needs `Authorization: Bearer <token>`
  (compared in constant time).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from ..config import ConfigError, Settings

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
#: Routes reachable without the token (liveness probes, fail-open clients).
PUBLIC_PATHS = frozenset({"/health"})

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def is_loopback(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(settings: Settings) -> None:
    """Refuse a non-loopback bind without a token (one-line ConfigError)."""
    if not is_loopback(settings.host) and not settings.token:
        raise ConfigError(
            f"MEMORY_HOST={settings.host or '(empty)'} is not a loopback address: set MEMORY_TOKEN "
            "so that every request needs a Bearer token, or bind 127.0.0.1"
        )


def allowed_hosts(settings: Settings) -> list[str]:
    """Host names (no port) the service answers to, lower-case."""
    names = [*LOOPBACK_NAMES]
    bound = settings.host.strip().strip("[]").lower()
    if bound not in WILDCARD_HOSTS:
        names.append(bound)
    names += [h.strip().lower() for h in settings.allowed_hosts.split(",") if h.strip()]
    return list(dict.fromkeys(names))


def _bracket(name: str) -> str:
    return f"[{name}]" if ":" in name else name


def sdk_transport_security(settings: Settings) -> Any:
    """The same allow-list in the MCP SDK's terms (it checks /mcp on its own too)."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts, origins = [], []
    for name in allowed_hosts(settings):
        h = _bracket(name)
        hosts += [h, f"{h}:*"]
        origins += [f"{scheme}://{h}{port}" for scheme in ("http", "https") for port in ("", ":*")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _host_name(value: str) -> str | None:
    """'Example.com:8765' / '[::1]:80' / 'http://x:1' -> the bare lower-case host name."""
    try:
        parts = urlsplit(value if "//" in value else f"//{value}")
        return (parts.hostname or "").lower() or None
    except ValueError:
        return None


def bearer_ok(header: str | None, token: str) -> bool:
    if not header:
        return False
    scheme, _, supplied = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(supplied.strip().encode("utf-8", "surrogatepass"),
                               token.encode("utf-8"))


async def send_json(send: Any, status: int, body: dict[str, Any],
                    headers: list[tuple[bytes, bytes]] | None = None) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
        *(headers or []),
    ]})
    await send({"type": "http.response.body", "body": payload})


class GuardMiddleware:
    """Pure-ASGI middleware: Host/Origin allow-list first (421/403), then the Bearer token (401)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.hosts = frozenset(allowed_hosts(settings))
        self.token = settings.token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key.lower(), value)
        host = headers.get(b"host", b"").decode("latin-1")
        if _host_name(host) not in self.hosts:
            await send_json(send, 421, {
                "error": f"Host {host!r} is not allowed (DNS-rebinding protection); "
                         "add it to MEMORY_ALLOWED_HOSTS"})
            return
        origin = headers.get(b"origin")
        if origin is not None and _host_name(origin.decode("latin-1")) not in self.hosts:
            await send_json(send, 403, {"error": "Origin is not allowed"})
            return
        if self.token and scope["path"] not in PUBLIC_PATHS:
            auth = headers.get(b"authorization")
            if not bearer_ok(auth.decode("latin-1") if auth else None, self.token):
                await send_json(send, 401, {"error": "a valid Bearer token is required"},
                                [(b"www-authenticate", b'Bearer realm="memory-mcp"')])
                return
        await self.app(scope, receive, send)
