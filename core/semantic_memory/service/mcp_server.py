"""`MemoryMCP`: the SDK's MCPServer as this project's MCP servers use it (mcp_tools.py builds
the tools on it, mcp_browse.py the resources and prompt): tool calls refuse unknown arguments
and report bad ones on one line, a result's text is compact JSON (`compact`), `logging/setLevel`
is served, and resources/list can name resources made per call."""

from __future__ import annotations

import inspect
import json
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, BinaryIO, TypeVar

import anyio
import pydantic_core
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.utilities.context_injection import find_context_parameter
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    Resource,
    SetLevelRequestParams,
    TextContent,
)
from pydantic import ValidationError

from ..lite import loads_input
from ..stores import StoreError
from ..stores.sqlite import damaged, sqlite_problem
from .errors import shown
from .mcp_logging import ClientLog
from .schemas import field_path

#: Pydantic errors shown per bad call; the rest are counted.
MAX_SHOWN_ERRORS = 3
ToolFn = TypeVar("ToolFn", bound=Callable[..., Any])


def json_text(value: Any) -> str:
    """A tool result's text: compact JSON, non-ASCII as it is (the SDK's indent=2 cost a model
    ~30% more tokens for whitespace)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def compact(result: Any) -> Any:
    """A tool's result with its text the compact JSON of its structured content (the same
    data: clients show one or the other)."""
    if isinstance(result, CallToolResult) and result.structured_content is not None \
            and not result.is_error:
        return result.model_copy(update={"content": [
            TextContent(type="text", text=json_text(result.structured_content))]})
    return result


def describe(exc: ValidationError) -> str:
    """A pydantic error as one line naming each field: `k: Input should be …; query: …`.
    (The SDK's default text is pydantic's multi-line dump with a documentation URL.)"""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    parts = []
    for err in errors[:MAX_SHOWN_ERRORS]:
        message = "missing required argument" if err["type"] == "missing" else err["msg"]
        parts.append(f"{field_path(tuple(err['loc']), 'arguments')}: "
                     f"{' '.join(str(message).split())}")
    more = len(errors) - MAX_SHOWN_ERRORS
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


#: Seconds `memory-mcp --stdio` gives the requests it has read to be answered once the agent
#: closed its stdin (a recall, say) before it ends.
STDIO_EOF_WAIT_S = 10.0
#: Seconds a write read before the end of the input is waited for past STDIO_EOF_WAIT_S: one
#: waiting on the store's lock (up to 60 s, stores/sqlite.py BUSY_TIMEOUT_MS) runs to its end
#: anyway (its worker thread cannot be stopped, and the process waited for it unanswered), so
#: it is answered with what became of it rather than -32000 "Connection closed" for a memory
#: that is stored. A write stuck past this is given up, unanswered.
STDIO_EOF_WRITE_WAIT_S = 90.0


def _is_id(value: Any) -> bool:
    """Whether `value` is a JSON-RPC request id the SDK reads: a string or an integer."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


#: How a JSON value that is no message is named in the answer refusing it.
JSON_KINDS = {str: "a string", int: "a number", float: "a number", bool: "true or false",
              type(None): "null"}


def read_message(data: bytes | str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """One JSON-RPC message, parsed as the SDK parses it: (the message, None), or (None, the
    error answer) for what the SDK refuses: over stdio it answered nothing (the agent waited
    for ever), over HTTP pydantic's `4 validation errors for union[…]`. -32700 for no JSON;
    -32600 naming what is wrong, with the request's id when it has a valid one (else null)."""
    try:
        message = pydantic_core.from_json(data)
    except ValueError as exc:
        return None, error_answer(None, PARSE_ERROR, f"Parse error: {exc}")
    reason = refusal(message)
    if reason is None:
        return message, None
    request_id = message.get("id") if isinstance(message, dict) and not (
        "result" in message or "error" in message) and _is_id(message.get("id")) else None
    return None, error_answer(request_id, INVALID_REQUEST, f"Invalid Request: {reason}")


def refusal(message: Any) -> str | None:
    """Why a decoded JSON value is no JSON-RPC message the SDK reads; None when it is one.
    (The SDK reads `{"id": null, "method": …}` as a notification, and never answers it.)"""
    if isinstance(message, list):
        return "JSON-RPC batches are not supported: send one message per line or request"
    if not isinstance(message, dict):
        return f"a JSON-RPC message is an object, not {JSON_KINDS.get(type(message), 'that')}"
    if "jsonrpc" not in message:
        return 'missing jsonrpc: "2.0"'
    if message["jsonrpc"] != "2.0":
        return 'jsonrpc must be "2.0"'
    if "method" in message:
        if not isinstance(message["method"], str):
            return "method must be a string"
        if "id" in message and not _is_id(message["id"]):
            return "id must be a string or an integer"
        if message.get("params") is not None and not isinstance(message["params"], dict):
            return "params must be an object"
        return None
    if "result" in message:
        if not _is_id(message.get("id")):
            return "a response's id must be a string or an integer"
        return None if isinstance(message["result"], dict) else "result must be an object"
    if "error" in message:
        error = message["error"]
        if message.get("id") is not None and not _is_id(message.get("id")):
            return "an error's id must be a string, an integer or null"
        code = error.get("code") if isinstance(error, dict) else None
        if not (isinstance(code, int) and not isinstance(code, bool)
                and isinstance(error.get("message"), str)):
            return "error must be an object with an integer code and a message"
        return None
    return "no method (a request or a notification), no result or error (a response)"


def error_answer(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class InFlight:
    """The requests read from a stdio wire and not answered yet: the end of the input waits
    for their answers (at EOF the SDK cancels the handlers still running, and a write that
    had begun lands unanswered, or one still queued is lost)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._ids: Counter[Any] = Counter()  # one id twice is two requests
        self._writes: set[Any] = set()  # the ids of tool calls that write

    def __bool__(self) -> bool:
        return bool(self._ids)

    def read(self, request_id: Any, writes: bool) -> None:
        key = coerce_request_id(request_id)
        with self._changed:
            self._ids[key] += 1
            if writes:
                self._writes.add(key)

    def writing(self, request_id: Any) -> bool:
        """Whether `request_id` is that of a write being answered."""
        with self._changed:
            return coerce_request_id(request_id) in self._writes

    def settle(self, request_id: Any) -> None:
        """One request of this id answered (or cancelled: the SDK answers it never)."""
        key = coerce_request_id(request_id) if _is_id(request_id) else request_id
        with self._changed:
            if self._ids[key] > 1:
                self._ids[key] -= 1
            else:
                self._ids.pop(key, None)
                self._writes.discard(key)
                self._changed.notify_all()

    def wait(self, timeout: float) -> bool:
        """Wait until every request read is settled; False when `timeout` ran out first."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._ids, timeout)

    def wait_writes(self, timeout: float) -> bool:
        """Wait until no write read is unanswered; False when `timeout` ran out first."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._writes, timeout)


class AnsweringWire:
    """The server's side of a stdio wire as the SDK's writer uses it (`write` one whole
    message line, then `flush`), one writer at a time: `MendedLines` answers on it too. Each
    answer settles its request in `in_flight` once flushed."""

    def __init__(self, wire: BinaryIO, in_flight: InFlight) -> None:
        self.wire, self.in_flight = wire, in_flight
        self.lock = threading.Lock()
        self._answered: list[Any] = []  # written, not yet flushed

    def write(self, text: str) -> int:
        with self.lock:
            self.wire.write(text.encode("utf-8"))
            if self.in_flight:
                self._answered += _answer_ids(text)
        return len(text)

    def flush(self) -> None:
        with self.lock:
            self.wire.flush()
            answered, self._answered = self._answered, []
        for request_id in answered:
            self.in_flight.settle(request_id)

    def send(self, message: dict[str, Any]) -> None:
        """Write an answer of this server's own (it settles nothing: its request, refused,
        was never counted in)."""
        with self.lock:
            self.wire.write(json.dumps(message).encode("utf-8") + b"\n")
            self.wire.flush()

    def close(self) -> None:
        with self.lock:
            self.wire.close()


def _answer_ids(text: str) -> list[Any]:
    """The id a line of the server's answers, if it is one (not a notification)."""
    try:
        message = json.loads(text)
    except ValueError:
        return []
    if isinstance(message, dict) and ("result" in message or "error" in message) \
            and _is_id(message.get("id")):
        return [message["id"]]
    return []


class MendedLines:
    """An agent's message lines, as the SDK's stdio reader reads them. A line the SDK's parser
    would refuse, which it dropped without an answer (the agent waited on that call for
    ever), is answered here (`read_message`'s error) and not passed on; and each line is in
    valid Unicode: a lone surrogate (`"\\ud83d"`, an emoji cut in half) becomes U+FFFD, as in
    the hooks' input (`lite.loads_input`). Each request read is counted in `in_flight`, and
    the end of the input waits up to `eof_wait_s` for their answers, and for a write's up to
    STDIO_EOF_WRITE_WAIT_S (it runs to its end either way)."""

    def __init__(self, wire: BinaryIO, answers: AnsweringWire, eof_wait_s: float,
                 uncancellable: Callable[[dict[str, Any]], bool]) -> None:
        self.wire, self.answers, self.eof_wait_s = wire, answers, eof_wait_s
        self.in_flight = answers.in_flight
        self.uncancellable = uncancellable

    def readline(self) -> str:
        while True:
            line = self.wire.readline()
            if not line:
                # The agent closed its end (it may still read): what it sent gets its
                # answers before the SDK sees the end and cancels what is still running
                # (a read) or answers it "Connection closed" (a write, which lands anyway).
                if not self.in_flight.wait(self.eof_wait_s):
                    self.in_flight.wait_writes(STDIO_EOF_WRITE_WAIT_S)
                return ""
            if not line.strip():
                continue
            text = mended(line)
            message, refused = read_message(text)
            if refused is not None:
                self.answers.send(refused)
                continue
            assert message is not None
            if self.passes(message):
                return text

    def passes(self, message: dict[str, Any]) -> bool:
        """Count a request in; a cancelled one the SDK will never answer, out; a write's
        cancellation is not passed on (`MemoryMCP.uncancellable`)."""
        if "method" in message and "id" in message:
            self.in_flight.read(message["id"], self.uncancellable(message))
        elif (cancelled := cancelled_id(message)) is not None:
            if self.in_flight.writing(cancelled):
                return False
            self.in_flight.settle(cancelled)
        return True

    def close(self) -> None:
        self.wire.close()


def cancelled_id(message: dict[str, Any]) -> Any:
    """The id a `notifications/cancelled` names, or None for any other message."""
    params = message.get("params")
    if message.get("method") != "notifications/cancelled" or not isinstance(params, dict):
        return None
    return params["requestId"] if _is_id(params.get("requestId")) else None


def mended(line: bytes) -> str:
    """A line as text, lone surrogate escapes and bytes that are not UTF-8 made U+FFFD."""
    if b"\\ud" in line or b"\\uD" in line:  # a surrogate can only come from an escape
        message = loads_input(line, default=None)
        if message is not None:
            return json.dumps(message, ensure_ascii=False) + "\n"
    return line.decode("utf-8", "replace")


class MemoryMCP(MCPServer):
    """MCPServer whose tool calls refuse unknown arguments and report bad ones on one line and
    answer compact JSON, that serves `logging/setLevel`, and whose resources/list can name
    resources made per call."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arguments: dict[str, tuple[str, ...]] = {}  # tool name -> its parameter names
        #: The tools that change the store (annotated `read_only_hint=False`).
        self.writes: set[str] = set()
        #: Resources listed after the registered ones, computed at each resources/list (in a
        #: worker thread): e.g. one per project that exists.
        self.dynamic_resources: Callable[[], list[Resource]] | None = None
        self.client_log = ClientLog()
        # MCPServer has no decorator for `logging/setLevel` (the 2026 protocol revision dropped
        # it); the SDK's documented way to serve it is the low-level server's handler table,
        # which also makes the server declare the logging capability.
        self._lowlevel_server.add_request_handler(
            "logging/setLevel", SetLevelRequestParams, self.client_log.set_level)

    def tool(self, name: str | None = None, **kwargs: Any) -> Callable[[ToolFn], ToolFn]:
        """The SDK's `@tool(...)`, also recording the tool's parameter names (its Context
        parameter, which no client passes, left out) and whether it writes."""
        register = super().tool(name, **kwargs)
        annotations = kwargs.get("annotations")

        def record(fn: ToolFn) -> ToolFn:
            context = find_context_parameter(fn)
            self.arguments[name or fn.__name__] = tuple(
                p for p in inspect.signature(fn).parameters if p != context)
            if annotations is not None and annotations.read_only_hint is False:
                self.writes.add(name or fn.__name__)
            return register(fn)

        return record

    def uncancellable(self, message: dict[str, Any]) -> bool:
        """Whether `message` calls a tool that writes. Its `notifications/cancelled` is not
        passed on (the protocol lets a server ignore a cancellation it cannot honour): the SDK
        would cancel the call after the write may have begun, answer it -32800 "Request
        cancelled" over HTTP (nothing over stdio), and the write could land all the same.
        The call runs to its end and is answered as usual."""
        params = message.get("params")
        return message.get("method") == "tools/call" and isinstance(params, dict) \
            and params.get("name") in self.writes

    async def run_stdio_streams(self, wire_in: BinaryIO, wire_out: BinaryIO,
                                eof_wait_s: float = STDIO_EOF_WAIT_S) -> None:
        """`run_stdio_async` over the given byte streams (the agent's, claimed by
        `stdio.claim_stdio`, or the pipes of the proxy's front) instead of the process's
        stdin and stdout, every line read `MendedLines`', the requests read before the end
        of the input answered within `eof_wait_s`. Closes both when done."""
        from mcp.server.stdio import stdio_server

        stdout = AnsweringWire(wire_out, InFlight())
        stdin = MendedLines(wire_in, stdout, eof_wait_s, self.uncancellable)
        try:
            async with stdio_server(anyio.wrap_file(stdin), anyio.wrap_file(stdout)) as (
                    read_stream, write_stream):
                server = self._lowlevel_server
                await server.run(read_stream, write_stream,
                                 server.create_initialization_options())
        finally:
            stdout.close()
            stdin.close()

    async def list_resources(self) -> list[Resource]:
        listed = await super().list_resources()
        if self.dynamic_resources is not None:
            listed += await anyio.to_thread.run_sync(self.dynamic_resources)
        return listed

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        try:
            return await self._call_tool(name, arguments, context)
        except ToolError as exc:  # it may quote an argument (`since`, a uid, a name): redacted
            exc.args = tuple(shown(str(exc)))
            raise

    async def _call_tool(self, name: str, arguments: dict[str, Any], context: Any) -> Any:
        known = self.arguments.get(name)
        unknown = sorted(set(arguments or {}) - set(known)) if known is not None else []
        if unknown:  # pydantic would drop them silently: the caller meant something else
            names = ", ".join(repr(arg[:64])[1:-1] for arg in unknown[:MAX_SHOWN_ERRORS])
            if len(unknown) > MAX_SHOWN_ERRORS:
                names += f" (and {len(unknown) - MAX_SHOWN_ERRORS} more)"
            accepted = ", ".join(known) if known else "none"
            raise ToolError(f"invalid arguments for {name}: {names}: unknown argument "
                            f"(accepted: {accepted})")
        try:
            return compact(await super().call_tool(name, arguments, context))
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, StoreError):  # the store is down: say so, in one line
                raise ToolError(str(cause)) from None
            if isinstance(cause, sqlite3.DatabaseError) and damaged(cause):  # what to run
                raise ToolError(sqlite_problem(cause)) from None
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            # `from cause` keeps the SDK's log line (field names only) working.
            raise ToolError(f"invalid arguments for {name}: {describe(cause)}") from cause

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Any = None) -> Any:
        """The SDK's prompts/get, with a bad request answered as JSON-RPC -32602 and one line
        (the SDK answers error code 0 and logs a traceback for a missing, empty or unknown
        argument, or an unknown prompt)."""
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            known = ", ".join(p.name for p in self._prompt_manager.list_prompts()) or "none"
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name[:64]!r} (prompts: {known})")
        accepted = [a.name for a in prompt.arguments or []]
        given = arguments or {}
        unknown = sorted(set(given) - set(accepted))
        missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in given]
        if unknown or missing:
            problems = [f"{arg[:64]}: unknown argument" for arg in unknown[:MAX_SHOWN_ERRORS]]
            problems += [f"{arg}: missing required argument" for arg in missing]
            raise MCPError(INVALID_PARAMS, f"invalid arguments for prompt {name}: "
                                           f"{'; '.join(problems)} (accepted: "
                                           f"{', '.join(accepted) or 'none'})")
        try:
            return await super().get_prompt(name, arguments, context)
        except ValueError as exc:
            cause = exc.__cause__
            while cause is not None and not isinstance(cause, ValidationError):
                cause = cause.__cause__
            if cause is None:
                raise
            raise MCPError(INVALID_PARAMS,
                           f"invalid arguments for prompt {name}: {describe(cause)}") from None
