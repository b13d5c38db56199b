"""The front of `memory-mcp proxy`: answers an agent's `initialize` and `tools/list` in
milliseconds, from the MCP SDK's own earlier answers, while the SDK loads.

An agent waits for its MCP servers' tool lists before its first turn (`claude -p` does), and
the MCP SDK alone takes ~1 s of CPU to import, several on a loaded machine. So this process
starts with the standard library only: it reads the agent's messages, answers `initialize`
and `tools/list` from a cache of what the SDK answered to the same requests before
(`mcp-proxy.cache.json` beside the db, keyed by this package's and the SDK's versions and the
settings the tools depend on), and hands every other message to the real server
(mcp_proxy.py: the SDK's MCPServer with mcp_tools.py's tools), which loads in a thread and
serves over a pair of pipes. The SDK server gets the agent's own `initialize` replayed (its
answer, already given, is dropped), so its session is the agent's. Without a cache entry (the
first start, an upgrade, another protocol version) the SDK answers and the answer is cached.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

from .. import __version__
from ..config import Settings

CACHE_NAME = "mcp-proxy.cache.json"
#: The id of the replayed `initialize` (the agent's own ids are numbers or its own strings).
REPLAY_ID = "semantic-memory-proxy:initialize"
#: Seconds the SDK thread gets to finish after the agent closed stdin.
EXIT_WAIT_S = 5.0


def cache_key(settings: Settings) -> str:
    """What the cached answers depend on: the versions and the settings the tools read."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        sdk = version("mcp")
    except PackageNotFoundError:
        sdk = "?"
    mode = "hybrid" if settings.model_path else "keyword"
    return f"{__version__}|mcp {sdk}|{settings.max_content_chars}|{mode}"


class Cache:
    """The SDK's answers to `initialize` (per protocol version asked for) and `tools/list`."""

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key = path, key
        self.data: dict[str, Any] = {"key": key, "initialize": {}, "tools": None}
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("key") == key \
                and isinstance(data.get("initialize"), dict):
            self.data = data

    def answer(self, message: dict[str, Any]) -> Any:
        """The cached result for this request, or None."""
        params = message.get("params") or {}
        if message.get("method") == "initialize":
            return self.data["initialize"].get(str(params.get("protocolVersion")))
        if message.get("method") == "tools/list" and not params.get("cursor"):
            return self.data["tools"]
        return None

    def learn(self, request: dict[str, Any], result: Any) -> None:
        """Keep the SDK's answer to `request`; written at once (atomically)."""
        if request.get("method") == "initialize":
            version = str((request.get("params") or {}).get("protocolVersion"))
            self.data["initialize"][version] = result
        else:
            self.data["tools"] = result
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.data, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)


class Front:
    """Moves messages between the agent (`wire_in`, `wire_out`) and the SDK server."""

    def __init__(self, wire_in: BinaryIO, wire_out: BinaryIO, cache: Cache) -> None:
        self.wire_in, self.wire_out, self.cache = wire_in, wire_out, cache
        self.lock = threading.Lock()
        to_sdk_r, to_sdk_w = os.pipe()
        from_sdk_r, from_sdk_w = os.pipe()
        self.sdk_in = os.fdopen(to_sdk_w, "wb", buffering=0)
        self.sdk_fds = (to_sdk_r, from_sdk_w)
        self.sdk_out = os.fdopen(from_sdk_r, "rb")
        #: Forwarded requests whose answer is worth caching: id -> the request.
        self.learning: dict[Any, dict[str, Any]] = {}

    def send_agent(self, data: bytes) -> None:
        with self.lock:
            self.wire_out.write(data if data.endswith(b"\n") else data + b"\n")
            self.wire_out.flush()

    def reply(self, message: dict[str, Any], result: Any) -> None:
        self.send_agent(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result},
                                   ensure_ascii=False).encode("utf-8"))

    def from_agent(self) -> None:
        """Read the agent until it closes stdin; answer what the cache can, forward the rest."""
        for line in self.wire_in:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and "id" in message:
                cached = self.cache.answer(message)
                if cached is not None:
                    self.reply(message, cached)
                    if message.get("method") == "initialize":  # the SDK's session needs it
                        self.sdk_in.write(json.dumps({**message, "id": REPLAY_ID}).encode()
                                          + b"\n")
                    continue
                if message.get("method") in ("initialize", "tools/list"):
                    self.learning[message["id"]] = message
            self.sdk_in.write(line if line.endswith(b"\n") else line + b"\n")
        self.sdk_in.close()

    def from_sdk(self) -> None:
        """Pass the SDK's messages on, except its answer to the replayed `initialize`."""
        for line in self.sdk_out:
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and "id" in message:
                if message["id"] == REPLAY_ID:
                    continue
                request = self.learning.pop(message["id"], None)
                if request is not None and "result" in message:
                    self.cache.learn(request, message["result"])
            self.send_agent(line)


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


def run_sdk(settings: Settings, stdin_fd: int, stdout_fd: int) -> None:
    """The SDK server over the pipes (in its thread; the heavy imports happen here). Should it
    fail, the process ends: an agent waiting on an answer sees its server gone, not a hang."""
    try:
        from .mcp_proxy import run_sdk_server

        run_sdk_server(settings, stdin_fd, stdout_fd)
    except BaseException as exc:  # noqa: BLE001 - a thread's failure must end the process
        sys.stderr.write(f"memory-mcp proxy: the MCP server failed: {exc!r}\n")
        sys.stderr.flush()
        os._exit(1)


def serve(settings: Settings) -> int:
    """Serve the agent on stdin/stdout until it closes stdin."""
    wire_in, wire_out = claim_stdio()
    cache = Cache(settings.resolved_db_path.with_name(CACHE_NAME), cache_key(settings))
    front = Front(wire_in, wire_out, cache)
    sdk = threading.Thread(target=run_sdk, args=(settings, *front.sdk_fds), daemon=True)
    sdk.start()
    relay = threading.Thread(target=front.from_sdk, daemon=True)
    relay.start()
    try:
        front.from_agent()
    except KeyboardInterrupt:
        pass
    sdk.join(EXIT_WAIT_S)
    relay.join(EXIT_WAIT_S)
    return 0


def main() -> int:
    """`memory-mcp proxy` without the CLI's imports (entry.py sends it here)."""
    from ..config import ConfigError

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        sys.stderr.write(f"memory-mcp proxy: {exc}\n")
        return 2
    return serve(settings)
