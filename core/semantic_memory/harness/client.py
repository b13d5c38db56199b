"""The hooks' HTTP client: one request per connection, every call inside the hook's deadline.

Hooks run as short processes inside an agent's turn, so this client never waits past the
deadline it is given, never reuses a connection (`Connection: close`) and tells a service
that is down (refused) from one that is slow (timed out) from one that answered an error.
HTTP/1.1 over a plain socket: http.client's header parsing imports the email package, a
fifth of a hook's start-up (and `lite` skips even the socket module's enum classes).
"""

from __future__ import annotations

import os
import time

from .. import lite, peer
from .settings import discovery_file
from .urls import ServiceURL, split_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..config import Settings
    from .settings import HookSettings

DEFAULT_PORT = 8765
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
#: How long the probe after a timed-out request waits (`answers`): a service that answers
#: nothing within this, not even a request that needs no store work, is hung.
PROBE_S = 0.5
#: The most X-Memory-Wait-Ms says (a day: the service takes 8 digits at most).
WAIT_MAX_S = 86_400
#: The variables that name a hook's store explicitly: only then may a service found by the
#: fallback port be told which store the hook expects (`expected_store`).
STORE_VARIABLES = ("MEMORY_DB_PATH", "MEMORY_DB_URL", "MEMORY_DB_URL_FILE")


class ServiceAddress(tuple[str, str, "tuple[str, str] | None"]):  # NamedTuple sans typing
    """(url, origin, store) of the service, as `resolve_address` found it. `origin`: where the
    URL came from. `store`: (tag, identity) of the store the settings name when the URL was
    found by the port alone (`expected_store`), else None; a ServiceClient given it sends the
    tag as X-Memory-Store, and the service answers 421 when it serves another store
    (service/auth.py `store_refusal`). A value, not state kept per URL: each client gets the
    store its own settings name."""

    __slots__ = ()

    def __new__(cls, url: str, origin: str,
                store: tuple[str, str] | None = None) -> ServiceAddress:
        return tuple.__new__(cls, (url, origin, store))

    @property
    def url(self) -> str:
        return self[0]

    @property
    def origin(self) -> str:
        return self[1]

    @property
    def store(self) -> tuple[str, str] | None:
        return self[2]

    def __repr__(self) -> str:
        return "ServiceAddress(url={!r}, origin={!r}, store={!r})".format(*self)


class ServiceUnavailable(Exception):
    """The service could not be used; `outcome` says how ("service down", "timeout", "error")."""

    outcome = "error"


class ServiceDown(ServiceUnavailable):
    outcome = "service down"


class ServiceMisdirected(ServiceDown):
    """The service at the fallback port serves another store than the one this process names
    (it answered 421 to X-Memory-Store): for this process no service is up. Writes go to the
    spool, for the right service to replay; a recall injects nothing."""


class ServiceForeign(ServiceDown):
    """Another OS user's process listens at the service's address (`peer.owner`): nothing is
    sent to it, neither a write, a prompt nor the token. For this user it is as if no service
    were up: writes go to the spool, and autostart starts this user's own on a free port."""

    def __init__(self, url: str, uid: int) -> None:
        super().__init__(f"{url} is another user's ({user_name(uid)}): nothing was sent to it; "
                         "start your own service (MEMORY_PLUGIN_AUTOSTART=1 starts one on a "
                         "free port, or `MEMORY_PORT=0 memory-mcp serve`)")
        self.uid = uid


def user_name(uid: int) -> str:
    """`name, uid N` of an OS user (`uid N` where the name is unknown)."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except (ImportError, KeyError):
        return f"uid {uid}"


class ServiceTimeout(ServiceUnavailable):
    outcome = "timeout"


class NotSent(ServiceTimeout):
    """No time was left to send the request: the hook's own lateness (a machine too loaded to
    run it), nothing the service did. A write meets it as any timeout (it is spooled), but it
    is never the client's `failure`, so it starts no back-off."""


class ServiceFailed(ServiceUnavailable):
    """The service answered with an error status. `foreign`: the answer was not the service's
    JSON error (`{"error": "…"}`, every error it sends): another server answered there (a
    reverse proxy's 502, a port reused since discovery)."""

    def __init__(self, status: int, message: str, foreign: bool = False) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.foreign = foreign


#: Answers after which a write is worth replaying later (auth, overload; any 5xx, a store
#: outage; 404 and 405: the service has /ingest, so something else answers on its port); any
#: other error status means the request itself is wrong.
RETRYABLE_4XX = frozenset({401, 403, 404, 405, 408, 429})


def retryable(status: int) -> bool:
    """Whether a write the service answered `status` to may land if sent again later."""
    return status >= 500 or status in RETRYABLE_4XX


def spool_sender(service: ServiceClient, deadline: float | None = None
                 ) -> Callable[[str, dict[str, Any]], Any]:
    """`send` for spool.replay over this client: the service's answer (replay keeps what it
    refused item by item); Retry when the service cannot take a write now, Refused when it
    answered that the write itself is wrong."""

    from .. import spool

    def send(path: str, body: dict[str, Any]) -> Any:
        try:
            return service.post(path, body, deadline=deadline)
        except ServiceFailed as exc:
            if retryable(exc.status):
                raise spool.Retry(str(exc)) from None
            raise spool.Refused(str(exc)) from None
        except ServiceUnavailable as exc:
            raise spool.Retry(str(exc)) from None

    return send


def answers(url: str, token: str = "", deadline: float | None = None) -> bool:
    """Whether the service at `url` answers at all, by `deadline` (PROBE_S from now by
    default): what tells a slow service from a hung one after a request timed out, and so
    whether the hooks' shared back-off starts. The probe is `HEAD /`, the browse page: public
    and served from memory, it waits on no store lock or query (a /health counts the whole
    store), so a service busy behind a long writer (a purge, an import) or a slow query
    answers it at once. Any HTTP answer counts."""
    probe = ServiceClient(url, time.monotonic() + PROBE_S if deadline is None else deadline,
                          token)
    try:
        probe.request("HEAD", "/")
    except ServiceUnavailable:
        pass
    return probe.answered


def is_write(method: str, path: str) -> bool:
    """Whether a request is a write the spool can keep (/ingest): what a slow mark holds back."""
    return method == "POST" and path == "/ingest"


def resolve_address(settings: Settings | HookSettings) -> ServiceAddress:
    """The service's address: MEMORY_PLUGIN_URL, else a live discovery file, else the
    service's port on loopback (MEMORY_PORT, 8765 by default), where whoever answers may serve
    another db: then it carries the store these settings name, if they name one."""
    if settings.plugin_url:
        return ServiceAddress(settings.plugin_url.rstrip("/"), "MEMORY_PLUGIN_URL")
    path = discovery_file(settings)
    if path is not None:
        # A data folder copied with its discovery file names the original's service: not
        # this db's (unless MEMORY_DISCOVERY_FILE names one several services share).
        info = lite.read_discovery(path, None if settings.discovery_file
                                   else os.path.expanduser(settings.db_path))
        if info and not info.get("stale") and isinstance(info.get("url"), str):
            # The file names this db's service: no store to check.
            return ServiceAddress(info["url"].rstrip("/"), f"discovery file {path}")
    url, origin = configured_url(settings)
    expected = expected_store(settings)
    return ServiceAddress(url, origin, (lite.store_tag(expected), expected) if expected else None)


def expected_store(settings: Settings | HookSettings) -> str:
    """The store identity (`lite.store_identity`) these settings name explicitly
    (STORE_VARIABLES set where they were read), else "": hooks that leave the db to the
    default keep using whatever service answers at the port, as they always did."""
    env = settings.env
    if not any(env.get(name) for name in STORE_VARIABLES):
        return ""
    url = settings.db_url if env.get("MEMORY_DB_URL") or env.get("MEMORY_DB_URL_FILE") else ""
    return lite.store_identity(url, settings.db_path)


def configured_url(settings: Settings | HookSettings) -> tuple[str, str]:
    """(the URL the service is configured to listen at, where it came from): MEMORY_PORT on
    loopback; the default port when MEMORY_PORT is 0 (the OS picks one: only the discovery
    file knows it)."""
    if settings.port and settings.port != DEFAULT_PORT:
        return f"http://127.0.0.1:{settings.port}", "MEMORY_PORT"
    return DEFAULT_URL, "default"


class ServiceClient:
    """Calls to one service URL, all ending by `deadline` (a `time.monotonic()` value)."""

    def __init__(self, url: str, deadline: float, token: str = "",
                 offline: ServiceUnavailable | None = None, harness: str = "",
                 writes_held: ServiceUnavailable | None = None,
                 store: tuple[str, str] | None = None) -> None:
        try:
            self._parts = split_url(url)
        except ValueError as exc:  # a discovery file's (HookSettings checks MEMORY_PLUGIN_URL)
            # Every request fails at once, as when offline: a write goes to the spool.
            self._parts = ServiceURL("http", "", 0, "")
            offline = offline or ServiceUnavailable(str(exc))
        self.url = url
        self.deadline = deadline
        self.token = token
        #: Sent as X-Memory-Harness: the service leaves out of this harness's recall what it
        #: loads itself. Only a plain name goes into a header line (no `re` in a hook process).
        plain = harness.replace("-", "").replace("_", "").replace(".", "").replace(":", "")
        self.harness = harness if len(harness) <= 64 and plain.isascii() and plain.isalnum() \
            else ""
        #: Set: every request raises this at once, without touching the network (back-off).
        self.offline = offline
        #: Set: every write (`is_write`), and only writes, raises this at once (the service's
        #: slow mark, backoff.py): it goes to the spool; a recall still tries.
        self.writes_held = writes_held
        #: Whether the service took a write (a 2xx answer to one): what ends a slow mark.
        self.wrote = False
        #: The last "service down" / "timeout" a request of this client met on the network
        #: (never NotSent: a request that was not sent says nothing of the service).
        self.failure: ServiceDown | ServiceTimeout | None = None
        #: Whether the service answered at least one request (any status).
        self.answered = False
        #: True while a request is on the network, from its connection on (a watchdog that
        #: fires then met a hung service, not a slow transcript or a hook that started late).
        self.waiting = False
        #: (tag, identity) of the store expected at this URL (`ServiceAddress.store`), sent
        #: as X-Memory-Store; None: no header.
        self.store = store

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: dict[str, Any], deadline: float | None = None) -> Any:
        return self.request("POST", path, body, deadline)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                deadline: float | None = None) -> Any:
        """The decoded JSON answer; ServiceDown / ServiceTimeout / ServiceFailed otherwise.
        `deadline` ends this request earlier than the client's own (a write keeps time back
        for spooling)."""
        if self.offline is not None:
            raise self.offline
        if self.writes_held is not None and is_write(method, path):
            raise self.writes_held
        try:
            answer = self._request(method, path, body,
                                   self.deadline if deadline is None else deadline)
        except NotSent:
            raise
        except (ServiceDown, ServiceTimeout) as exc:
            self.failure = exc
            raise
        finally:
            self.waiting = False
        if is_write(method, path):
            self.wrote = True
        return answer

    def _request(self, method: str, path: str, body: dict[str, Any] | None,
                 deadline: float) -> Any:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise NotSent("no time left in the hook's budget")
        parts = self._parts
        data = b"" if body is None else lite.dumps(body).encode("utf-8")
        head = [f"{method} {parts.path.rstrip('/')}{path} HTTP/1.1",
                f"Host: {parts.netloc}", "Connection: close",
                "Accept: application/json", f"Content-Length: {len(data)}"]
        if body is not None:
            head.append("Content-Type: application/json")
        if self.token:
            head.append(f"Authorization: Bearer {self.token}")
        if self.harness:
            head.append(f"X-Memory-Harness: {self.harness}")
        if self.store is not None:
            head.append(f"X-Memory-Store: {self.store[0]}")
        # What is left of the budget: the service's recall leaves out a channel slower than
        # that (less a margin for its own work), so the others' answer still arrives in time.
        head.append(f"X-Memory-Wait-Ms: {int(min(timeout, WAIT_MAX_S) * 1000)}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data
        self.waiting = True
        try:
            # An ASCII host goes as bytes: a str host makes getaddrinfo import the IDNA codec.
            host = parts.host.encode("ascii") if parts.host.isascii() else parts.host
            if parts.scheme == "https":
                import socket
                import ssl

                address = lite.resolve(host, parts.port, timeout)[0][4][:2]
                sock = ssl.create_default_context().wrap_socket(
                    socket.create_connection(address, max(deadline - time.monotonic(), 0.001)),
                    server_hostname=parts.host)
            else:
                sock = lite.connect(host, parts.port, timeout)
                _check_owner(sock, self.url)
            try:
                sock.sendall(request)
                raw = _read_all(sock, deadline)
            finally:
                sock.close()
        except ConnectionRefusedError as exc:
            raise ServiceDown(f"nothing listens at {self.url} ({exc.strerror})") from None
        except TimeoutError as exc:  # the connection, the answer or the name lookup
            raise ServiceTimeout(f"{self.url}: {exc}" if str(exc).startswith("looking up")
                                 else f"{self.url} did not answer within the budget") from None
        except OSError as exc:  # reset, unreachable, unknown host
            raise ServiceDown(f"{self.url}: {exc.strerror or exc}") from None
        status, answer, content = _parse_response(raw, self.url)
        if status == 421 and self.store is not None and isinstance(answer, dict) \
                and "store" in answer:
            # Not "answered": for this store no service is up (back-off, spool, no recall).
            raise ServiceMisdirected(f"{self.url}: {_first_line(str(answer.get('error')))}; "
                                     f"MEMORY_DB_PATH/MEMORY_DB_URL here name {self.store[1]}")
        self.answered = True
        if status >= 400:
            raise _failure(status, answer, content)
        if not isinstance(answer, dict):  # every route answers an object: something else is here
            raise ServiceUnavailable(f"{self.url} answered HTTP {status} without the service's "
                                     "JSON: not the memory service")
        return answer


def _check_owner(sock: Any, url: str) -> None:
    """ServiceForeign (the socket closed) when another user's process holds the other end of
    this loopback connection: on a machine several people use, a service left on the default
    port by one would otherwise take the others' writes and token, and answer their prompts
    with its user's memories."""
    uid = peer.owner(sock.getpeername()[:2], sock.getsockname()[:2])
    if uid is not None and not peer.trusted(uid):
        sock.close()
        raise ServiceForeign(url, uid)


def _read_all(sock: Any, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection (it was asked to)."""
    chunks = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ServiceTimeout("the answer did not complete within the budget")
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


#: The longest part of an error body a ServiceFailed message keeps: above the 300 characters
#: the service cuts its own messages to (service/edges.py), so they arrive whole.
MAX_ERROR_CHARS = 400


def _failure(status: int, answer: Any, content: bytes) -> ServiceFailed:
    """The error of an answer with status `status`: the first line of the service's message,
    or, from another server, of its body (never its raw bytes: headers, HTML)."""
    message = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(message, str) and message.strip():
        return ServiceFailed(status, _first_line(message))
    line = _first_line(content.decode("utf-8", "replace")) or "an empty answer"
    return ServiceFailed(status, f"{line} (not the memory service's answer)", foreign=True)


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= MAX_ERROR_CHARS else line[:MAX_ERROR_CHARS - 1] + "…"


def _parse_response(raw: bytes, url: str) -> tuple[int, Any, bytes]:
    """(status, decoded JSON body or None, the body) of a complete HTTP/1.x response."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        raise ServiceUnavailable(f"{url}: not an HTTP answer") from None
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.decode("latin-1").partition(":") for line in lines[1:])}
    if "chunked" in headers.get("transfer-encoding", "").lower():
        try:
            body = _unchunk(body)
        except ValueError:  # a chunk size that is no hex number
            raise ServiceUnavailable(f"{url}: not an HTTP answer") from None
    return status, lite.try_loads(body) if body else None, body


def _unchunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += body[:size]
        body = body[size + 2:]
    return bytes(out)
