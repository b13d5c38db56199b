"""`MemoryMCP`: the SDK's MCPServer as this project's MCP servers use it (mcp_tools.py builds
the tools on it, mcp_browse.py the resources and prompt): tool calls refuse unknown arguments
and report bad ones on one line, `logging/setLevel` is served, and resources/list can name
resources made per call."""

from __future__ import annotations

import inspect
import io
import json
from collections.abc import Callable
from typing import Any, BinaryIO, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.utilities.context_injection import find_context_parameter
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, Resource, SetLevelRequestParams
from pydantic import ValidationError

from ..lite import loads_input
from ..stores import StoreError
from .mcp_logging import ClientLog
from .schemas import field_path

#: Pydantic errors shown per bad call; the rest are counted.
MAX_SHOWN_ERRORS = 3
ToolFn = TypeVar("ToolFn", bound=Callable[..., Any])


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


class MendedLines:
    """An agent's message lines, as the SDK's stdio reader reads them, in valid Unicode: a lone
    surrogate (`"\\ud83d"`, an emoji cut in half) becomes U+FFFD, as in the hooks' input
    (`lite.loads_input`). The SDK drops a line its parser refuses without an answer, and the
    agent waited on that call for ever."""

    def __init__(self, wire: BinaryIO) -> None:
        self.wire = wire

    def readline(self) -> str:
        line = self.wire.readline()
        if b"\\ud" in line or b"\\uD" in line:  # a surrogate can only come from an escape
            message = loads_input(line, default=None)
            if message is not None:
                return json.dumps(message, ensure_ascii=False) + "\n"
        return line.decode("utf-8", "replace")

    def close(self) -> None:
        self.wire.close()


class MemoryMCP(MCPServer):
    """MCPServer whose tool calls refuse unknown arguments and report bad ones on one line, that
    serves `logging/setLevel`, and whose resources/list can name resources made per call."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arguments: dict[str, tuple[str, ...]] = {}  # tool name -> its parameter names
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
        parameter, which no client passes, left out)."""
        register = super().tool(name, **kwargs)

        def record(fn: ToolFn) -> ToolFn:
            context = find_context_parameter(fn)
            self.arguments[name or fn.__name__] = tuple(
                p for p in inspect.signature(fn).parameters if p != context)
            return register(fn)

        return record

    async def run_stdio_streams(self, wire_in: BinaryIO, wire_out: BinaryIO) -> None:
        """`run_stdio_async` over the given byte streams (the agent's, claimed by
        `stdio.claim_stdio`, or the pipes of the proxy's front) instead of the process's
        stdin and stdout, every line read `MendedLines`'. Closes both when done."""
        from mcp.server.stdio import stdio_server

        stdin, stdout = MendedLines(wire_in), io.TextIOWrapper(wire_out, encoding="utf-8")
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
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, StoreError):  # the store is down: say so, in one line
                raise ToolError(str(cause)) from None
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
