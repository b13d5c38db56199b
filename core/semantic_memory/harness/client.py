"""The hooks' HTTP client: one request per connection, every call inside the hook's deadline.

Hooks run as short processes inside an agent's turn, so this client never waits past the
deadline it is given, never reuses a connection (`Connection: close`) and tells a service
that is down (refused) from one that is slow (timed out) from one that answered an error.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..config import Settings

DEFAULT_URL = "http://127.0.0.1:8765"


class ServiceUnavailable(Exception):
    """The service could not be used; `outcome` says how ("service down", "timeout", "error")."""

    outcome = "error"


class ServiceDown(ServiceUnavailable):
    outcome = "service down"


class ServiceTimeout(ServiceUnavailable):
    outcome = "timeout"


class ServiceFailed(ServiceUnavailable):
    """The service answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def resolve_url(settings: Settings) -> tuple[str, str]:
    """(service URL, where it came from): MEMORY_PLUGIN_URL, else a live discovery file, else
    the default port."""
    if settings.plugin_url:
        return settings.plugin_url.rstrip("/"), "MEMORY_PLUGIN_URL"
    path = settings.discovery_path
    if path is not None:
        info = read_discovery(path)
        if info and not info.get("stale") and isinstance(info.get("url"), str):
            return info["url"].rstrip("/"), f"discovery file {path}"
    return DEFAULT_URL, "default"


def read_discovery(path: Path) -> dict[str, Any] | None:
    from ..service.discovery import read_discovery as read  # light: no server imports

    return read(path)


class ServiceClient:
    """Calls to one service URL, all ending by `deadline` (a `time.monotonic()` value)."""

    def __init__(self, url: str, deadline: float, token: str = "") -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ServiceUnavailable(f"not an http(s) URL: {url!r}")
        self.url = url
        self._parts = parts
        self.deadline = deadline
        self.token = token

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, body)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The decoded JSON answer; ServiceDown / ServiceTimeout / ServiceFailed otherwise."""
        timeout = self.remaining()
        if timeout <= 0:
            raise ServiceTimeout("no time left in the hook's budget")
        parts = self._parts
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = kind(parts.hostname, parts.port, timeout=timeout)
        headers = {"Connection": "close", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            conn.request(method, parts.path.rstrip("/") + path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except (ConnectionRefusedError, FileNotFoundError) as exc:
            raise ServiceDown(f"nothing listens at {self.url} ({exc.strerror or exc})") from None
        except (socket.timeout, TimeoutError):
            raise ServiceTimeout(f"{self.url} did not answer within the budget") from None
        except OSError as exc:  # reset, unreachable, DNS
            raise ServiceDown(f"{self.url}: {exc.strerror or exc}") from None
        except http.client.HTTPException as exc:
            raise ServiceUnavailable(f"{self.url}: bad HTTP answer ({exc!r})") from None
        finally:
            conn.close()
        try:
            answer = json.loads(raw) if raw else None
        except ValueError:
            answer = None
        if response.status >= 400:
            message = answer.get("error") if isinstance(answer, dict) else None
            raise ServiceFailed(response.status, str(message or raw[:200]))
        return answer
