"""`memory-mcp proxy`: the MCP tools over stdio, each call forwarded to the running service.

The MCP server `memory-mcp install` registers by default. It answers `initialize` and
`tools/list` itself, without contacting the service (the tools, schemas and descriptions are
mcp_tools.py's, built over `RestBackend` here; mcp_front.py answers those two from the SDK's
cached answers while the SDK loads), and forwards each tool call to the service's REST API
(/ingest, /recall, /api/memories, /api/stats; PATCH /api/memories/{uid} for memory_update,
DELETE for memory_forget, GET for the workspace's checks and what memory_store's result says)
within MEMORY_MCP_PROXY_TIMEOUT_S. So a service that is down or hung costs a tool call that bound
at most, never the agent's start-up: an agent waits for its MCP servers' tool lists before its
first turn, and an HTTP registration at a hung service held opencode ~60 s.

When the service cannot take a call: memory_store appends the write to the spool (spool.py,
the same body /ingest takes, dated with the time of the call as the hooks date theirs; the
service replays it) and answers that it will be stored once the service can take it; the other
tools answer a tool error with a one-line reason. The proxy shares the hooks' back-off
(backoff.py): while it is on, calls skip the network at once, and a proxy call that meets a
dead or hung service starts it. Dead: the connection is refused (or
reset, or the host unknown). Hung: the call timed out and a probe (`client.answers`: `HEAD /`,
which needs no store work) gets no answer within PROBE_S either. A call that timed out on a
service that answers the probe was slow (a 1M-memory store's stats, a write waiting behind a
purge): that call's error only, and memory_store spools the write; the back-off would turn
every agent's memory off for MEMORY_HOOK_BACKOFF_S. It sets the hooks' slow mark instead
(backoff.py), and while that holds memory_store spools at once without a request; a write the
service takes ends it.

Unlike `memory-mcp --stdio`, the proxy opens no store and loads no embedding model: one
service holds the store (the vector channel's matrix lives in its memory) however many agents
run. It serves the tools only, not mcp_browse.py's resources and prompt.

The agent starts the proxy in its working folder, and that repository's `.semantic-memory.toml`
binds the tools as it binds the hooks (mcp_tools.Workspace): capture off, memory_store and
memory_update refuse, naming the file; recall off, memory_recall and memory_list do; a
memory_store without a project is stored under the project the hooks would use; and the writes
stay in that project and the global memories (`Workspace.confine`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeGuard
from urllib.parse import quote, urlencode

import anyio
from mcp.server.mcpserver.exceptions import ToolError

from .. import backoff, spool
from ..config import Settings
from ..harness.client import (
    ServiceClient,
    ServiceDown,
    ServiceFailed,
    ServiceTimeout,
    ServiceUnavailable,
    answers,
    resolve_address,
    retryable,
)
from ..models import NewMemory, RecallFilters
from ..private import strip_private

log = logging.getLogger("semantic_memory.service")

#: The `harness` of the spool records the proxy writes (`memory-mcp spool list` shows it).
SPOOL_SOURCE = "mcp-proxy"


def _reason(exc: ServiceFailed) -> str:
    """The service's own error message, without the `HTTP <status>: ` prefix."""
    return str(exc).removeprefix(f"HTTP {exc.status}: ")


def _refused(exc: ServiceUnavailable) -> TypeGuard[ServiceFailed]:
    """Whether the service itself refused the call (not another server at its URL)."""
    return isinstance(exc, ServiceFailed) and not exc.foreign


def _failed(exc: ServiceUnavailable) -> str:
    """A failed call's one-line tool error."""
    if _refused(exc):
        return f"the memory service refused it: {_reason(exc)}"
    return f"the memory service is unavailable: {exc}"


# What the service's answers hold, checked before they are used: whatever else answers at its
# URL (a stale discovery file, a port reused) is "not the memory service", as it is for an
# answer that is no JSON object, and a write is spooled rather than reported stored.
Shape = Callable[[dict[str, Any]], bool]
STORE_STATUSES = frozenset({"new", "duplicate", "rejected"})
EDIT_STATUSES = frozenset({"updated", "unchanged"})


def _dicts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _stored(answer: dict[str, Any]) -> bool:
    return answer.get("status") in STORE_STATUSES and (
        answer["status"] == "rejected" or isinstance(answer.get("uid"), str))


def _recalled(answer: dict[str, Any]) -> bool:
    return _dicts(answer.get("items")) and isinstance(answer.get("block"), str)


def _page(answer: dict[str, Any]) -> bool:
    total = answer.get("total")
    return _dicts(answer.get("items")) and isinstance(total, int) and not isinstance(total, bool)


def _edited(answer: dict[str, Any]) -> bool:
    return answer.get("status") in EDIT_STATUSES and isinstance(answer.get("uid"), str)


def _stats(answer: dict[str, Any]) -> bool:
    return isinstance(answer.get("memories"), int) and isinstance(answer.get("by_kind"), dict)


def _memory(answer: dict[str, Any]) -> bool:
    return isinstance(answer.get("uid"), str) and isinstance(answer.get("content"), str) \
        and isinstance(answer.get("version"), str)


def _forgot(uid: str) -> Shape:
    def shape(answer: dict[str, Any]) -> bool:
        current = answer.get("current_again", [])
        return answer.get("forgotten") == uid and isinstance(current, list) \
            and all(isinstance(u, str) for u in current)
    return shape


class RestBackend:
    """The tools' calls as REST requests to the running service, each bounded in time."""

    #: The proxy serves no resources: the browse page shows a memory whole.
    whole_text = ("ask for fewer memories to see more of each; the user can read one whole on "
                  "the browse page (the service's `/#memory/UID`)")

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.max_content_chars = settings.max_content_chars
        # Known without asking the service (tools/list must not wait for it): vectors are on
        # when a model is configured. Only the recall tool's description depends on it.
        self.recall_mode = "hybrid" if settings.model_path else "keyword"
        self.timeout_s = settings.mcp_proxy_timeout_s
        self.token = settings.plugin_token or settings.token

    # --- transport ---------------------------------------------------------------------------

    def _offline(self, url: str) -> ServiceUnavailable | None:
        state = backoff.active(self.settings.backoff_path, url)
        if state is None:
            return None
        detail = f"backing off after the last try ({state.detail})"
        return ServiceTimeout(detail) if state.outcome == "timeout" else ServiceDown(detail)

    def _writes_held(self, url: str) -> ServiceUnavailable | None:
        """What a write (memory_store's /ingest) raises at once while the hooks' slow mark
        holds (backoff.py): spooled without waiting; other calls still try."""
        mark = backoff.slow(self.settings.backoff_path, url)
        if mark is None:
            return None
        return ServiceTimeout(f"the service is slow, spooled without waiting (the last try: "
                              f"{mark.detail})")

    def _call(self, method: str, path: str, body: dict[str, Any] | None, shape: Shape
              ) -> dict[str, Any]:
        """One request, blocking (run in a worker thread), over within timeout_s."""
        url, _, store = resolve_address(self.settings)  # per call: a restarted service may move
        offline = self._offline(url)
        held = None if offline is not None else self._writes_held(url)
        client = ServiceClient(url, time.monotonic() + self.timeout_s, self.token, offline,
                               writes_held=held, store=store)
        try:
            answer = client.request(method, path, body)
            if not shape(answer):
                raise ServiceUnavailable(f"{url} answered {method} {path.split('?')[0]} "
                                         "without the service's fields: not the memory service")
            if client.wrote:  # writes are taken again
                backoff.clear_slow(self.settings.backoff_path, url)
            return answer
        except ServiceTimeout as exc:
            if exc is held:  # no request made
                raise
            if offline is None and self.settings.hook_backoff_s > 0 and answers(url, self.token):
                # Slow, not hung (a big store's stats, a write behind a long writer): this
                # call's error only, and the slow mark for the writes of every agent's next
                # seconds. Backing off would turn every agent's memory off.
                backoff.mark_slow(self.settings.backoff_path, url,
                                  backoff.slow_seconds(self.settings.hook_backoff_s), str(exc))
                raise ServiceTimeout(f"{exc} (the service is up, only slow: it did not answer "
                                     f"this call within MEMORY_MCP_PROXY_TIMEOUT_S, "
                                     f"{self.timeout_s:g} s)") from None
            self._back_off(url, offline, exc)
            raise
        except ServiceDown as exc:
            self._back_off(url, offline, exc)
            raise

    def _back_off(self, url: str, offline: ServiceUnavailable | None,
                  exc: ServiceUnavailable) -> None:
        """Start the shared back-off for a service found down or hung (not while one is on:
        its calls made no request)."""
        if offline is None:
            backoff.start(self.settings.backoff_path, url, self.settings.hook_backoff_s,
                          exc.outcome, str(exc))

    async def request(self, method: str, path: str, body: dict[str, Any] | None,
                      shape: Shape) -> dict[str, Any]:
        """The service's JSON answer, of the `shape` its route answers; ServiceUnavailable
        (or a subclass) otherwise."""
        return await anyio.to_thread.run_sync(self._call, method, path, body, shape)

    async def answer(self, method: str, path: str, body: dict[str, Any] | None,
                     shape: Shape) -> dict[str, Any]:
        """`request`, with every failure turned into a one-line tool error."""
        try:
            return await self.request(method, path, body, shape)
        except ServiceUnavailable as exc:
            raise ToolError(_failed(exc)) from None

    # --- the tools' calls --------------------------------------------------------------------

    async def get(self, uid: str) -> dict[str, Any] | None:
        try:
            return await self.request("GET", f"/api/memories/{quote(uid, safe='')}", None,
                                      _memory)
        except ServiceUnavailable as exc:
            if _refused(exc) and exc.status == 404:  # none, or a forgotten one
                return None
            raise ToolError(_failed(exc)) from None

    async def store(self, memory: NewMemory) -> dict[str, Any]:
        made_at = round(time.time(), 3)  # the agent's call: a spooled write is dated by it
        # <private> text is removed here too: a spooled body must not hold it either.
        content = strip_private(memory.content)
        if content is not memory.content and not content.strip():
            raise ToolError("content: nothing but <private> text; not stored")
        tags = [t for t in (strip_private(t) for t in memory.tags) if t.strip()]
        body: dict[str, Any] = {"content": content, "kind": memory.kind,
                                "source": memory.source, "tags": tags}
        if memory.project is not None:
            body["project"] = memory.project
        if memory.replaces is not None:
            body["replaces"] = memory.replaces
        try:
            answer = await self.request("POST", "/ingest", body, _stored)
        except ServiceFailed as exc:
            if not retryable(exc.status) and not exc.foreign:  # the write is wrong (422, 413)
                raise ToolError(_reason(exc)) from None
            why = str(exc)
        except ServiceUnavailable as exc:
            why = str(exc)
        else:
            answer.pop("duplicate", None)  # the status says it
            return answer
        # Dated as the hooks date theirs: replayed undated, it would be the newest word and
        # supersede what was stored while it waited. A live store keeps the service's clock.
        return await self.spool({**body, "created_at": made_at}, why)

    async def spool(self, body: dict[str, Any], why: str) -> dict[str, Any]:
        """Queue a write the service could not take now (it replays the spool); `body` as
        /ingest takes it, its `created_at` the time the write was made."""
        folder = self.settings.spool_path
        try:
            await anyio.to_thread.run_sync(
                lambda: spool.append(folder, "/ingest", body, harness=SPOOL_SOURCE,
                                     event="memory_store"))
        except OSError as exc:
            raise ToolError(f"not stored: the memory service is unavailable ({why}) and the "
                            f"spool {folder} cannot be written ({exc.strerror or exc})") from None
        log.info("memory_store spooled: %s", why)
        return {"status": "spooled",
                "reason": f"the memory service is unavailable ({why}); the memory is queued "
                          "and will be stored once the service can take it"}

    async def recall(self, query: str, k: int, filters: RecallFilters, budget_chars: int,
                     block: bool) -> tuple[dict[str, Any], str | None]:
        body: dict[str, Any] = {"query": query, "k": k, "budget_chars": budget_chars}
        body.update(_filter_fields(filters))
        answer = await self.answer("POST", "/recall", body, _recalled)
        items = answer["items"]
        out: dict[str, Any] = {"count": len(items), "items": items}
        if isinstance(answer.get("warning"), str):  # no channel installed: say why, as /recall
            out["warning"] = answer["warning"]
        if block:
            out["block"] = answer["block"]
        return out, None

    async def update(self, uid: str, content: str | None, kind: str | None,
                     tags: list[str] | None, project: str | None,
                     if_version: str | None = None) -> dict[str, Any]:
        fields = {"content": content, "kind": kind, "tags": tags, "project": project,
                  "if_version": if_version}
        body = {name: value for name, value in fields.items() if value is not None}
        try:
            answer = await self.request("PATCH", f"/api/memories/{quote(uid, safe='')}", body,
                                        _edited)
        except ServiceUnavailable as exc:
            if _refused(exc):  # an unknown uid (404) is the reason itself
                prefix = "" if exc.status == 404 else "not updated: "
                raise ToolError(prefix + _reason(exc)) from None
            raise ToolError(_failed(exc)) from None
        status = answer.pop("status")
        return {"status": status, "uid": answer["uid"], "memory": answer}

    async def forget(self, uid: str) -> list[str] | None:
        try:
            answer = await self.request("DELETE", f"/api/memories/{quote(uid, safe='')}", None,
                                        _forgot(uid))
        except ServiceUnavailable as exc:
            if _refused(exc) and exc.status == 404:
                return None
            raise ToolError(_failed(exc)) from None
        return answer.get("current_again", [])

    async def list(self, filters: RecallFilters, limit: int, offset: int
                   ) -> tuple[list[dict[str, Any]], int]:
        query = urlencode({**_filter_fields(filters), "limit": limit, "offset": offset})
        answer = await self.answer("GET", f"/api/memories?{query}", None, _page)
        return answer["items"], answer["total"]

    async def stats(self) -> dict[str, Any]:
        return await self.answer("GET", "/api/stats", None, _stats)


def _filter_fields(filters: RecallFilters) -> dict[str, Any]:
    """The filters as /recall's body and /api/memories' query take them (`project: ""`: the
    global memories alone)."""
    project = "" if filters.global_only else filters.project
    fields = {"project": project, "kind": filters.kind, "source": filters.source,
              "since": filters.since, "include_superseded": filters.include_superseded or None}
    return {name: value for name, value in fields.items() if value is not None}


def sdk_server(settings: Settings) -> Any:
    """The SDK's MCPServer with the tools over `RestBackend`, bound to the folder the agent
    started the proxy in (the heavy imports happen here)."""
    from ..harness.repo_config import approvals_file
    from .log_setup import setup_logging
    from .mcp_tools import Workspace, build_tools, instructions

    setup_logging()
    # The agent starts the proxy in its working folder: that repository's file binds the
    # tools, and names the project of what they store, as it does for the hooks; the
    # instructions name it (mcp_front.py puts this folder's into a cached answer too).
    workspace = Workspace(os.getcwd(), settings.project, approvals_file(settings))
    return build_tools(RestBackend(settings), workspace, instructions(workspace))


def serve_pipes(mcp: Any, stdin_fd: int, stdout_fd: int, eof_wait_s: float) -> None:
    """Serve one session on two pipe ends until stdin closes; closes both."""
    anyio.run(partial(mcp.run_stdio_streams, os.fdopen(stdin_fd, "rb"),
                      os.fdopen(stdout_fd, "wb"), eof_wait_s=eof_wait_s))


def handshake_versions() -> tuple[tuple[str, ...], str]:
    """(the protocol versions the SDK answers `initialize` with as asked, the one it answers
    any other with)."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    return tuple(HANDSHAKE_PROTOCOL_VERSIONS), LATEST_HANDSHAKE_VERSION


def run_sdk_server(settings: Settings, stdin_fd: int, stdout_fd: int,
                   on_ready: Callable[[], None], eof_wait_s: float) -> None:
    """The tools over `RestBackend`, served on two pipe ends until stdin closes (mcp_front.py
    runs this in a thread and relays the agent's messages), the calls read by then answered
    within `eof_wait_s`; `on_ready` once it serves."""
    mcp = sdk_server(settings)
    on_ready()
    # closing the SDK's end of the pipe at the end: the relay reads EOF and ends
    serve_pipes(mcp, stdin_fd, stdout_fd, eof_wait_s)
