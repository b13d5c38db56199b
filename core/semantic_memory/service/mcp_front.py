"""The front of `memory-mcp proxy`: answers an agent's `initialize` and `tools/list` in
milliseconds, from the MCP SDK's own earlier answers, while the SDK loads.

An agent waits for its MCP servers' tool lists before its first turn (`claude -p` does), and
the MCP SDK alone takes ~1 s of CPU to import, several on a loaded machine. So this process
starts with the standard library only: it reads the agent's messages, answers `initialize`
and the listings (`tools/list`, and the empty prompt and resource lists agents ask for too)
from a cache of what the SDK answered to the same requests before
(`mcp-proxy.cache.json` beside the db, keyed by this package's and the SDK's versions and the
settings the tools depend on), and hands every other message to the real server
(mcp_proxy.py: the SDK's MCPServer with mcp_tools.py's tools), which loads in a thread and
serves over a pair of pipes. The SDK server gets the agent's own `initialize` replayed (its
answer, already given, is dropped), so its session is the agent's. Without a cache entry (the
first start, an upgrade) the SDK answers and the answer is cached, and a detached process
(`python -m semantic_memory.service.mcp_front --fill-cache`) fills the cache for every
protocol version and listing the SDK answers: a one-shot agent (`codex exec`) waits ~1.5 s
for its servers, then runs its turn without them and ends the proxy, so an SDK that loads more
slowly than that never got to answer it and its cache stayed empty, every turn.

The SDK itself starts loading once the start-up exchange is answered (or a request needs it):
on a busy machine its import would share this process's CPU with the first answers.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from ..config import Settings
from ..lite import replace_private
from .stdio import StdioClosed, check_stdio, claim_stdio, settle_workspace

CACHE_NAME = "mcp-proxy.cache.json"
#: The listings an agent asks for before its first turn: the proxy's are fixed (it registers
#: tools only; the capabilities the SDK declares make agents ask for the other two as well).
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
#: The id of the replayed `initialize` (the agent's own ids are numbers or its own strings).
REPLAY_ID = "semantic-memory-proxy:initialize"
#: Seconds the SDK gets to load once the agent closed stdin with requests unanswered (its
#: import takes ~1 s, several on a loaded machine): each is answered, a memory_store stored or
#: spooled, rather than lost with the process.
SDK_LOAD_WAIT_S = 20.0
#: Seconds after the process starts that the SDK starts loading at the latest (sooner when
#: the cache answered `tools/list` or a request needs it): ready for the first tool call.
SDK_START_S = 0.5
#: Seconds a cache fill may take before another proxy may start one (its process ends itself
#: by then).
FILL_LIMIT_S = 120.0
#: Seconds past MEMORY_MCP_PROXY_TIMEOUT_S a tool call may take: the probe that tells a slow
#: service from a hung one (0.5 s) and the spool write after it.
CALL_MARGIN_S = 2.0


def answer_wait_s(settings: Settings) -> float:
    """The longest a tool call the SDK has read takes to be answered (mcp_proxy.py bounds each
    request to the service by MEMORY_MCP_PROXY_TIMEOUT_S)."""
    return settings.mcp_proxy_timeout_s + CALL_MARGIN_S


def id_key(value: Any) -> Any:
    """A request id as the SDK correlates it (`"7"` and 7 are one), or None for no valid id."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    try:
        return int(value)
    except ValueError:
        return value


def installed_version(distribution: str) -> str:
    """The version of an installed distribution, from its `<name>-<version>.dist-info` folder
    on sys.path (the first, as importlib.metadata finds it), without importing
    importlib.metadata: ~40 ms of CPU before the first answer."""
    prefix = distribution.replace("-", "_").lower() + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and name.lower().startswith(prefix):
                return name[len(prefix):-len(".dist-info")]
    return "?"


def cache_key(settings: Settings) -> str:
    """What the cached answers depend on: the versions, the settings the tools read and the
    source files that define them."""
    versions = "|".join(f"{name} {installed_version(name)}"
                        for name in ("semantic-memory-core", "mcp", "mcp-types"))
    mode = "hybrid" if settings.model_path else "keyword"
    # The modules that define what the SDK answers: an edited checkout is a new key too.
    sources = []
    for name in ("mcp_tools.py", "mcp_results.py", "mcp_browse.py", "mcp_server.py"):
        try:
            stat = Path(__file__).with_name(name).stat()
            sources.append(f"{stat.st_mtime_ns}:{stat.st_size}")
        except OSError:
            sources.append("?")
    return f"{versions}|{settings.max_content_chars}|{mode}|{','.join(sources)}"


class Cache:
    """The SDK's answers to `initialize` (per protocol version asked for) and to the LISTS (per
    protocol version agreed on), and which versions it agrees to as asked (`handshake`; any
    other gets `latest`), once a fill learnt them."""

    def __init__(self, path: Path, key: str, instructions: str | None = None) -> None:
        self.path, self.key = path, key
        #: This folder's server instructions (they name its project): one cache serves every
        #: folder, so a cached `initialize` answer carries them in place of its own.
        self.instructions = instructions
        self.data: dict[str, Any] = {"key": key, "initialize": {}, "lists": {}}
        self.merge(self.read())

    def read(self) -> dict[str, Any] | None:
        """The file's content when it holds answers for this key."""
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return None
        if isinstance(data, dict) and data.get("key") == self.key \
                and isinstance(data.get("initialize"), dict) \
                and isinstance(data.get("lists"), dict):
            return data
        return None

    def merge(self, data: dict[str, Any] | None) -> None:
        """Take what `data` (the file as another process wrote it) knows and this one not."""
        if data is None:
            return
        for part in ("initialize", "lists"):
            self.data[part] = {**data[part], **self.data[part]}
        handshake = data.get("handshake")
        if isinstance(handshake, list) and isinstance(data.get("latest"), str):
            self.data["handshake"], self.data["latest"] = handshake, data["latest"]

    def agreed(self, asked: Any) -> str | None:
        """For an `initialize` asking for a version the SDK does not speak, the version it
        answers with instead (its latest), once a fill learnt which it speaks; else None."""
        handshake = self.data.get("handshake")
        if not isinstance(asked, str) or not isinstance(handshake, list) or asked in handshake:
            return None
        return self.data.get("latest")

    def answer(self, message: dict[str, Any], version: str | None) -> Any:
        """The cached result for this request in a session of `version`, or None."""
        params = message.get("params") or {}
        if message.get("method") == "initialize":
            asked = params.get("protocolVersion")
            found = self.data["initialize"].get(str(asked))
            agreed = self.agreed(asked)
            if found is None and agreed is not None:
                found = self.data["initialize"].get(agreed)
            if isinstance(found, dict) and self.instructions is not None:
                return {**found, "instructions": self.instructions}
            return found
        if message.get("method") in LISTS and version and not params.get("cursor"):
            return self.data["lists"].get(f"{version} {message['method']}")
        return None

    def complete(self) -> bool:
        """Whether a fill (`fill_cache`) wrote what the SDK answers to every start-up request
        an agent may send (the protocol versions are known only then)."""
        return isinstance(self.data.get("handshake"), list)

    def learn(self, request: dict[str, Any], version: str | None, result: Any) -> None:
        """Keep the SDK's answer to `request`; written at once (atomically)."""
        if request.get("method") == "initialize":
            asked = str((request.get("params") or {}).get("protocolVersion"))
            self.data["initialize"][asked] = result
        elif version:
            self.data["lists"][f"{version} {request['method']}"] = result
        self.save()

    def save(self, create: bool = True) -> None:
        """Write the answers, with what another process wrote meanwhile (a fill and an
        agent's proxy learn at once); `create`: the folder too, when missing."""
        self.merge(self.read())
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            # Its owner's only: the instructions in it name the last workspace's project.
            replace_private(self.path, json.dumps(self.data, ensure_ascii=False).encode("utf-8"),
                            temp=self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp"))
        except OSError:
            pass


class Front:
    """Moves messages between the agent (`wire_in`, `wire_out`) and the SDK server."""

    def __init__(self, wire_in: BinaryIO, wire_out: BinaryIO, cache: Cache,
                 settings: Settings) -> None:
        self.wire_in, self.wire_out, self.cache = wire_in, wire_out, cache
        self.settings = settings
        self.lock = threading.Lock()
        self.sdk_thread: threading.Thread | None = None
        to_sdk_r, to_sdk_w = os.pipe()
        from_sdk_r, from_sdk_w = os.pipe()
        self.sdk_in = os.fdopen(to_sdk_w, "wb", buffering=0)
        self.sdk_fds = (to_sdk_r, from_sdk_w)
        self.sdk_out = os.fdopen(from_sdk_r, "rb")
        #: The protocol version of this session (the answer to `initialize`).
        self.version: str | None = None
        #: Forwarded requests whose answer is worth caching: id -> (request, session version).
        self.learning: dict[Any, tuple[dict[str, Any], str | None]] = {}
        #: Set once the SDK server runs.
        self.sdk_ready = threading.Event()
        #: The agent's requests forwarded to the SDK and not answered yet (id -> how many).
        self.unanswered: dict[Any, int] = {}

    def send_agent(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else \
            json.dumps(message, ensure_ascii=False).encode("utf-8")
        with self.lock:
            self.wire_out.write(data if data.endswith(b"\n") else data + b"\n")
            self.wire_out.flush()

    def start_sdk(self) -> None:
        """Start loading the SDK server (once; the messages sent to it wait in its pipe)."""
        with self.lock:
            if self.sdk_thread is not None:
                return
            self.sdk_thread = threading.Thread(target=run_sdk, args=(self.settings, self),
                                               daemon=True)
        self.sdk_thread.start()

    def to_sdk(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode("utf-8")
        self.sdk_in.write(data if data.endswith(b"\n") else data + b"\n")

    def from_agent(self) -> None:
        """Read the agent until it closes stdin; answer what the cache can, forward the rest."""
        for line in self.wire_in:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and id_key(message.get("id")) is not None \
                    and self.answered(message):
                continue
            key = id_key(message.get("id")) if isinstance(message, dict) \
                and "method" in message else None
            if key is not None:
                with self.lock:
                    self.unanswered[key] = self.unanswered.get(key, 0) + 1
                self.start_sdk()  # a request the cache cannot answer: the SDK must
            self.to_sdk(line)
        self.sdk_in.close()

    def answered(self, message: dict[str, Any]) -> bool:
        """Whether this request is answered here (else it goes to the SDK)."""
        method = message.get("method")
        if method == "server/discover":
            # The 2026 per-request era's probe: answered as a server of the initialize
            # handshake answers it, at once, so the agent goes on with `initialize` (which
            # every harness here speaks, and which this front can answer from its cache).
            self.send_agent({"jsonrpc": "2.0", "id": message["id"], "error": {
                "code": -32601, "message": "Method not found"}})
            return True
        cached = self.cache.answer(message, self.version)
        if cached is None:
            if method == "initialize" or method in LISTS:
                self.learning[message["id"]] = (message, self.version)
            return False
        self.send_agent({"jsonrpc": "2.0", "id": message["id"], "result": cached})
        if method == "initialize":  # the SDK's session needs it too; its answer is dropped
            self.version = str(cached.get("protocolVersion"))
            self.to_sdk({**message, "id": REPLAY_ID})
        elif method == "tools/list":  # the start-up exchange is over: a tool call is next
            self.start_sdk()
        return True

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
                request, version = self.learning.pop(message["id"], (None, None))
                result = message.get("result")
                if request is not None and isinstance(result, dict):
                    if request.get("method") == "initialize":
                        version = self.version = str(result.get("protocolVersion"))
                    self.cache.learn(request, version, result)
            self.send_agent(line)
            if isinstance(message, dict) and ("result" in message or "error" in message):
                self.settle(message.get("id"))

    def settle(self, request_id: Any) -> None:
        """One request of this id answered."""
        key = id_key(request_id)
        with self.lock:
            if self.unanswered.get(key, 0) > 1:
                self.unanswered[key] -= 1
            else:
                self.unanswered.pop(key, None)


def workspace_instructions(settings: Settings) -> str:
    """The server instructions for the folder the agent started the proxy in: they name the
    project the hooks use there (`instructions.instructions_for`)."""
    from ..harness.repo_config import approvals_file, load_repo_config, project_for
    from .instructions import instructions_for

    try:
        cwd = os.getcwd()
        repo = load_repo_config(cwd, approvals_file(settings))
        project = project_for(cwd, repo, settings.project or None)
    except (OSError, ValueError):  # the folder is gone (`stdio.settle_workspace` moves off it)
        return instructions_for(settings.project or None)
    # what the repository turned off is left out, as `--stdio` says it
    return instructions_for(project, recall=repo.recall, capture=repo.capture)


def run_sdk(settings: Settings, front: Front) -> None:
    """The SDK server over the pipes (in its thread; the heavy imports happen here). Should it
    fail, the process ends: an agent waiting on an answer sees its server gone, not a hang."""
    try:
        from .mcp_proxy import run_sdk_server

        run_sdk_server(settings, *front.sdk_fds, on_ready=front.sdk_ready.set,
                       eof_wait_s=answer_wait_s(settings))
    except BaseException as exc:  # noqa: BLE001 - a thread's failure must end the process
        sys.stderr.write(f"memory-mcp proxy: the MCP server failed: {exc!r}\n")
        sys.stderr.flush()
        os._exit(1)


def serve(settings: Settings) -> int:
    """Serve the agent on stdin/stdout until it closes stdin."""
    wire_in, wire_out = claim_stdio()
    cache = Cache(settings.resolved_db_path.with_name(CACHE_NAME), cache_key(settings),
                  workspace_instructions(settings))
    front = Front(wire_in, wire_out, cache, settings)
    if not cache.complete():
        fill_in_background(cache)
    timer = threading.Timer(SDK_START_S, front.start_sdk)
    timer.daemon = True
    timer.start()
    relay = threading.Thread(target=front.from_sdk, daemon=True)
    relay.start()
    try:
        front.from_agent()
    except KeyboardInterrupt:
        pass
    # The agent is done; it waits for its server to exit when it ends (`claude -p` does).
    # Nothing unanswered: exit now, an SDK still loading is not waited for. Else the SDK
    # loads (if it has not) and answers what it was sent, then ends, which ends the relay:
    # a memory_store sent just before the agent closed stdin is stored or spooled, not lost.
    with front.lock:
        waiting = bool(front.unanswered)
    if waiting:
        front.start_sdk()
        front.sdk_ready.wait(SDK_LOAD_WAIT_S)
        relay.join(answer_wait_s(settings) + CALL_MARGIN_S)
    wire_out.flush()
    os._exit(0)  # not interpreter shutdown: it would wait for the SDK import to finish


def fill_marker(cache: Cache) -> Path:
    """Present while a process fills this cache (one at a time, however many agents start)."""
    return cache.path.with_name(f".{CACHE_NAME}.filling")


def _take_fill(cache: Cache) -> bool:
    """Whether this process may fill the cache now: it made the marker (none was there, or
    one left by a fill that was killed). False in a folder that cannot be written: the SDK
    answers, as before."""
    marker = fill_marker(cache)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            if time.time() - marker.stat().st_mtime < FILL_LIMIT_S:
                return False
            marker.unlink(missing_ok=True)  # left by a fill that was killed
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError:
        return False
    return True


def fill_soon(settings: Settings) -> None:
    """A detached fill (`fill_in_background`) unless the cache is complete: `memory-mcp
    install`'s last step, so that the first proxy an agent starts after an install answers
    its start-up at once (Codex gives it ~1-2 s). Not the service's: a fill started as it
    starts (in a thread, or as a process) lost its LISTENING line and later log lines in
    about half the starts of a service with the vector channel (the service served, but a
    client waiting for the line never saw it)."""
    cache = Cache(settings.resolved_db_path.with_name(CACHE_NAME), cache_key(settings))
    if not cache.complete():
        fill_in_background(cache)


def fill_in_background(cache: Cache) -> None:
    """Start a process, detached from the agent (its own session: the agent's end of the
    proxy does not end it), that fills the cache (`fill_cache`); none while one runs."""
    if not _take_fill(cache):
        return
    marker = fill_marker(cache)
    import subprocess

    try:
        subprocess.Popen([sys.executable, "-m", __name__, "--fill-cache"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:  # a full process table
        marker.unlink(missing_ok=True)


def ask_sdk(mcp: Any, requests: list[dict[str, Any]], eof_wait_s: float) -> dict[Any, Any]:
    """The SDK server's answers (id -> message) to `requests`, sent as one session."""
    from .mcp_proxy import serve_pipes

    to_sdk_r, to_sdk_w = os.pipe()
    from_sdk_r, from_sdk_w = os.pipe()
    server = threading.Thread(target=serve_pipes, args=(mcp, to_sdk_r, from_sdk_w, eof_wait_s),
                              daemon=True)
    server.start()
    with os.fdopen(to_sdk_w, "wb") as sdk_in:
        sdk_in.write(b"".join(json.dumps(r).encode("utf-8") + b"\n" for r in requests))
    answers = {}
    with os.fdopen(from_sdk_r, "rb") as sdk_out:
        for line in sdk_out:
            message = json.loads(line)
            if isinstance(message, dict) and "id" in message:
                answers[message["id"]] = message
    server.join()
    return answers


def fill_cache(settings: Settings) -> Cache:
    """Learn the SDK's answers to `initialize` for each protocol version it agrees to as asked
    and to each of the LISTS in a session of that version, and write them to the cache."""
    from .mcp_proxy import handshake_versions, sdk_server

    cache = Cache(settings.resolved_db_path.with_name(CACHE_NAME), cache_key(settings))
    handshake, latest = handshake_versions()
    mcp = sdk_server(settings)
    for version in handshake:
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "semantic-memory-proxy", "version": "0"}}}
        lists = [{"jsonrpc": "2.0", "id": n, "method": method}
                 for n, method in enumerate(LISTS, start=1)]
        answers = ask_sdk(mcp, [initialize, {"jsonrpc": "2.0",
                                             "method": "notifications/initialized"}, *lists],
                          answer_wait_s(settings))
        result = answers.get(0, {}).get("result")
        if not isinstance(result, dict):
            continue
        cache.data["initialize"][version] = result
        agreed = str(result.get("protocolVersion"))
        for request in lists:
            listed = answers.get(request["id"], {}).get("result")
            if isinstance(listed, dict):
                cache.data["lists"][f"{agreed} {request['method']}"] = listed
    cache.data["handshake"], cache.data["latest"] = list(handshake), latest
    cache.save(create=False)  # a folder removed meanwhile (a test's) is not made again
    return cache


def fill_main() -> int:
    """`python -m semantic_memory.service.mcp_front --fill-cache`: `fill_cache`, bounded by
    FILL_LIMIT_S; the marker removed at the end."""
    watchdog = threading.Timer(FILL_LIMIT_S - 5, os._exit, (1,))
    watchdog.daemon = True
    watchdog.start()
    settings = Settings.from_env()
    cache = Cache(settings.resolved_db_path.with_name(CACHE_NAME), cache_key(settings))
    try:
        fill_cache(settings)
    finally:
        fill_marker(cache).unlink(missing_ok=True)
    return 0


def main() -> int:
    """`memory-mcp proxy` without the CLI's imports (entry.py sends it here)."""
    from ..config import ConfigError

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        _say(f"memory-mcp proxy: {exc}")
        return 2
    return run(settings)


def run(settings: Settings) -> int:
    """`serve`, once the process can: its stdin and stdout open (else one line, exit code 2),
    and a folder to read the workspace from (`stdio.settle_workspace`)."""
    try:
        check_stdio()
        settings, note = settle_workspace(settings)
    except (ValueError, StdioClosed) as exc:
        _say(f"memory-mcp proxy: {exc}")
        return 2
    if note is not None:
        _say(f"memory-mcp proxy: {note}")
    return serve(settings)


def _say(line: str) -> None:
    """A line on stderr, the agent's MCP log; nothing when stderr is closed too."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # None, a closed or broken stream
        pass


if __name__ == "__main__":
    if sys.argv[1:] != ["--fill-cache"]:
        sys.exit("usage: python -m semantic_memory.service.mcp_front --fill-cache")
    sys.exit(fill_main())
