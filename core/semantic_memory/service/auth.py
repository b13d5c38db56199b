"""Who may talk to the HTTP service: the bind rule, the Host/Origin allow-list (DNS-rebinding
protection) and the Bearer token.

- Binding anything but a loopback address without `MEMORY_TOKEN` refuses to start, and so does
  a token that is not printable ASCII (it could never match: HTTP headers are Latin-1 bytes) or,
  off loopback, a guessable one (under 32 characters or few distinct characters).
- Every request's Host (and Origin, when a browser sends one) must name an allowed host:
  the loopback names, the bound address (not a wildcard: `0.0.0.0`, `::`), and whatever
  `MEMORY_ALLOWED_HOSTS` adds. A web page
  that rebinds its own name to 127.0.0.1 therefore gets 421 instead of the user's memories.
- A state-changing request (anything but GET, HEAD, OPTIONS) from a browser must come from the
  service's own origin, and its body must be JSON (`cross_origin_refusal`): no page on another
  port can plant a memory, token or not.
  Host is parsed strictly (reg-name, IPv4 or [IPv6], then an optional numeric port; nothing
  else), so `evil.com@127.0.0.1` or `127.0.0.1, evil.com` are refused (400) rather than read
  the way a lenient URL parser would. This middleware is the only Host/Origin gate, for REST and
  `/mcp` alike: the MCP SDK's own check is switched off so that the two can never disagree.
- With `MEMORY_TOKEN` set, every route but `/health` and the browse page's three static files
  (read with GET or HEAD) needs `Authorization: Bearer <token>` (compared in constant time).
- A request naming the store it expects (`X-Memory-Store`, sent by hooks that found the service
  by its port alone) gets 421 when this service serves another (`store_refusal`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from ..config import ConfigError, Settings
from ..lite import store_identity, store_tag

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
#: Routes reachable without the token, with GET or HEAD only: liveness probes (fail-open
#: clients) and the browse page's files (browse.py), which hold no data: the page has to load
#: to ask for the token that its /api calls then send.
PUBLIC_PATHS = frozenset({"/health", "/", "/ui/app.js", "/ui/app.css"})
PUBLIC_METHODS = frozenset({"GET", "HEAD"})
#: Methods that change nothing: every other one is checked for cross-site writes.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Off loopback, a token must be at least this long and use this many distinct characters.
MIN_REMOTE_TOKEN_CHARS = 32
MIN_REMOTE_TOKEN_DISTINCT = 10
MAKE_TOKEN = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'

#: A Host header value: [IPv6], or an IPv4 address / DNS name (RFC 3986 unreserved characters
#: only: no userinfo, no percent-encoding, no sub-delims), then an optional numeric port.
HOST_RE = re.compile(r"""
    (?: \[ (?P<ip6> [0-9A-Fa-f:.]+ ) \]  |  (?P<name> [A-Za-z0-9._~-]+ ) )
    (?: : (?P<port> [0-9]{1,5} ) )?
""", re.VERBOSE)
ORIGIN_RE = re.compile(r"(?i:https?)://(?P<host>[^/?#]*)")

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def _numeric_address(host: str) -> str | None:
    """The address a numeric host spelling stands for, as the OS reads it (so `127.1`,
    `0x7f.0.0.1` and `::1` all count), or None for names; never a DNS lookup."""
    try:
        infos = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError, ValueError):
        return None
    return str(infos[0][4][0]).split("%", 1)[0] if infos else None


def is_loopback(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    address = _numeric_address(host) if host else None
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_token(token: str, host: str) -> None:
    """Refuse a token that can never authenticate, or (off loopback) one easy to guess."""
    if not token:
        return
    if not all("!" <= ch <= "~" for ch in token):
        raise ConfigError("MEMORY_TOKEN must be printable ASCII without spaces: HTTP headers "
                          "cannot carry other characters, so it could never match; make one "
                          f"with: {MAKE_TOKEN}")
    if is_loopback(host):
        return  # only local processes can reach it; a short token is the user's choice
    if len(token) < MIN_REMOTE_TOKEN_CHARS or len(set(token)) < MIN_REMOTE_TOKEN_DISTINCT:
        raise ConfigError(
            f"MEMORY_TOKEN is too easy to guess for MEMORY_HOST={host or '(empty)'}, which is "
            f"not loopback: use at least {MIN_REMOTE_TOKEN_CHARS} random characters, e.g. "
            f"from: {MAKE_TOKEN}")


def check_bind(settings: Settings) -> None:
    """Refuse a non-loopback bind without a (strong enough) token; one-line ConfigError."""
    if not is_loopback(settings.host) and not settings.token:
        raise ConfigError(
            f"MEMORY_HOST={settings.host or '(empty)'} is not a loopback address: set MEMORY_TOKEN "
            "so that every request needs a Bearer token, or bind 127.0.0.1"
        )
    check_token(settings.token, settings.host)


def normalize_host(name: str) -> str:
    """Lower-case; an IP address in its canonical spelling (`[::0:1]` -> `::1`)."""
    name = name.strip().strip("[]").lower()
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def allowed_hosts(settings: Settings) -> list[str]:
    """Host names (no port) the service answers to, normalized (see `normalize_host`)."""
    names = [*LOOPBACK_NAMES]
    bound = normalize_host(settings.host)
    if bound not in WILDCARD_HOSTS:
        names.append(bound)
        address = _numeric_address(bound)  # MEMORY_HOST=127.1 also answers to 127.0.0.1
        if address and address not in WILDCARD_HOSTS:
            names.append(normalize_host(address))
    names += [normalize_host(h) for h in settings.allowed_hosts.split(",") if h.strip()]
    return list(dict.fromkeys(names))


def sdk_transport_security() -> Any:
    """The MCP SDK's own Host/Origin check, switched off: `GuardMiddleware` has already applied
    the one allow-list to every request, /mcp included. Two checks would disagree (the SDK's is
    case-sensitive and matches by prefix), and a request one lets through and the other refuses
    is the very bug class this avoids. (The SDK still checks a POST's Content-Type.)"""
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


def parse_host(value: str) -> str | None:
    """A Host header value -> the normalized host name, or None when it is malformed."""
    match = HOST_RE.fullmatch(value)
    if match is None or (match["port"] and int(match["port"]) > 65535):
        return None
    if match["ip6"] is not None:
        try:
            return str(ipaddress.IPv6Address(match["ip6"]))
        except ValueError:
            return None
    return normalize_host(match["name"])


def parse_origin(value: str) -> str | None:
    """An Origin header (`http://host[:port]`, nothing after) -> its host name, or None."""
    match = ORIGIN_RE.fullmatch(value)
    return parse_host(match["host"]) if match else None


def same_origin(origin: str, host: str) -> bool:
    """Whether a browser's Origin is this service's own: the page it serves, at the host and
    port the request was sent to (`Origin: null`, another port, another name: no)."""
    match = ORIGIN_RE.fullmatch(origin)
    if match is None:
        return False
    theirs, ours = HOST_RE.fullmatch(match["host"]), HOST_RE.fullmatch(host)
    if theirs is None or ours is None:
        return False
    default = "443" if origin.lower().startswith("https") else "80"
    return (parse_host(match["host"]) == parse_host(host)
            and (theirs["port"] or default) == (ours["port"] or "80"))


def cross_origin_refusal(headers: dict[bytes, bytes], host: str
                         ) -> tuple[int, dict[str, str]] | None:
    """Why a state-changing request is refused as a cross-site write, or None.

    Without a token, a web page on any localhost port could otherwise POST a memory as a CORS
    "simple request" (a form, or `fetch` with `mode: "no-cors"` and a text/plain body), which
    no preflight stops, and have it injected into the agent later. So: a browser's Origin must
    be the service's own origin, Sec-Fetch-Site (sent by every current browser) must not say
    cross-site or same-site, and a body must be JSON, which a simple request cannot send. CLI,
    hooks and MCP clients send no Origin and JSON bodies: nothing changes for them."""
    origin = headers.get(b"origin")
    if origin is not None and not same_origin(origin.decode("latin-1"), host):
        return 403, {"error": f"cross-origin request refused: Origin "
                              f"{origin.decode('latin-1')[:100]!r} is not this service's own "
                              f"(http://{host[:100]})"}
    site = headers.get(b"sec-fetch-site", b"").lower()
    if site in (b"cross-site", b"same-site"):
        return 403, {"error": f"cross-site request refused (Sec-Fetch-Site: {site.decode()})"}
    has_body = headers.get(b"content-length", b"0").strip() not in (b"0", b"") \
        or b"transfer-encoding" in headers
    kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    if has_body and not (kind == b"application/json" or kind.endswith(b"+json")):
        return 415, {"error": f"expected Content-Type: application/json, not "
                              f"{kind.decode('latin-1')[:100]!r}"}
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
        #: (tag, identity) of the store this service serves, for `store_refusal`.
        identity = store_identity(settings.db_url, settings.db_path)
        self.store = (store_tag(identity), identity)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        hosts = 0
        for key, value in scope["headers"]:
            key = key.lower()
            hosts += key == b"host"
            headers.setdefault(key, value)
        host = headers.get(b"host", b"").decode("latin-1")
        name = parse_host(host)
        if hosts != 1 or name is None:  # RFC 9112 3.2: exactly one, well-formed Host
            await send_json(send, 400, {
                "error": "the request needs exactly one well-formed Host header "
                         f"(host[:port]), got {host[:100]!r}" + (f" and {hosts - 1} more"
                                                                 if hosts > 1 else "")})
            return
        if name not in self.hosts:
            await send_json(send, 421, {
                "error": f"Host {host[:100]!r} is not allowed (DNS-rebinding protection); "
                         "add it to MEMORY_ALLOWED_HOSTS"})
            return
        origin = headers.get(b"origin")
        if origin is not None and parse_origin(origin.decode("latin-1")) not in self.hosts:
            await send_json(send, 403, {"error": "Origin is not allowed"})
            return
        public = scope["path"] in PUBLIC_PATHS and scope["method"] in PUBLIC_METHODS
        if self.token and not public:
            auth = headers.get(b"authorization")
            if not bearer_ok(auth.decode("latin-1") if auth else None, self.token):
                await send_json(send, 401, {"error": "a valid Bearer token is required"},
                                [(b"www-authenticate", b'Bearer realm="memory-mcp"')])
                return
        refusal = store_refusal(headers.get(b"x-memory-store"), self.store)
        if refusal is None and scope["method"] not in SAFE_METHODS:
            refusal = cross_origin_refusal(headers, host)
        if refusal is not None:
            await send_json(send, *refusal)
            return
        await self.app(scope, receive, _no_store(send))


def store_refusal(expected: bytes | None, store: tuple[str, str]
                  ) -> tuple[int, dict[str, Any]] | None:
    """421 when a client names the store it expects (X-Memory-Store, a `lite.store_tag`) and
    this service serves another: hooks that found a service by the port alone, one serving
    another db, would store into and recall from it. No header: no check (as before)."""
    if expected is None or expected.decode("latin-1").strip() == store[0]:
        return None
    return 421, {"error": f"this service serves {store[1]} (store {store[0]}), not the store "
                          f"the client expects (store {expected.decode('latin-1')[:64]!r})",
                 "store": store[0]}


def _no_store(send: Any) -> Any:
    """`send`, adding `Cache-Control: no-store` to an answer that sets no caching of its own
    (every answer but the browse page's files holds memories, or names them): a browser that
    showed a memory keeps no copy of it on disk."""

    async def sending(message: Any) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or [])
            if not any(key.lower() == b"cache-control" for key, _ in headers):
                message = {**message, "headers": [*headers, (b"cache-control", b"no-store")]}
        await send(message)

    return sending
