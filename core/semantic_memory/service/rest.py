"""The REST sidecar: hook-facing `/ingest` `/recall` `/inject/report`, the read/manage `/api/*`
routes (the browse page's data, see browse.py) and `/health`. Every engine call runs in a worker
thread (SQLite is synchronous), so concurrent clients do not queue on the event loop; writes,
which may wait for the store's write lock, in threads of their own, so that reads and `/health`
never queue behind them (threads.py).

Bad input never reaches the engine as a crash: malformed JSON is 400, a wrong type or value is
422 naming the field, a body over `MEMORY_MAX_BODY_BYTES` is 413, an unknown uid is 404.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .. import __version__, spool
from ..config import Settings
from ..default_plugins.injection import clip, sanitize_head
from ..errors import InvalidMemory, UnknownMemory
from ..models import (
    PLUGIN_NAME,
    IngestResult,
    InjectionBlock,
    NewMemory,
    RecallFilters,
    RecallHit,
    TimeOutOfRange,
    UnclearDuration,
    parse_time,
    project_name,
)
from ..ingest import edit_version, validate
from ..pipeline import MemoryEngine, forgotten_record
from ..plugins import no_channel_reason
from ..retrieval import service_recall
from ..stores import StoreError
from ..stores.sqlite import damaged, sqlite_problem
from . import fastparse, threads
from .auth import bearer_ok
from .errors import ApiError, store_problems

log = logging.getLogger("semantic_memory.service")

#: What PATCH /api/memories/{uid} may change.
EDIT_FIELDS = ("content", "kind", "tags", "project")

# --- request parsing -----------------------------------------------------------------------


def schemas() -> Any:
    """The pydantic request models, imported on first use (see schemas.py)."""
    from . import schemas as module

    return module


def parse_model(model_name: str, data: Any, prefix: str = "",
                unknown: str = "unknown field") -> Any:
    """The request as the named model: a plainly valid hook body without pydantic (so the
    first request after a start does not wait for its import, see fastparse.py), anything
    else through the pydantic model (ApiError 422 naming the bad field)."""
    fast = fastparse.parse(model_name, data)
    if fast is not None:
        return fast
    module = schemas()
    return module.parse_model(getattr(module, model_name), data, prefix, unknown)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: The longest integer a body may hold: Python's own bound on reading one (converting a longer
#: one costs time quadratic in its length), checked here so the answer says so in our words
#: rather than in the interpreter's ("use sys.set_int_max_str_digits()").
MAX_INT_DIGITS = 4_300


def _parse_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"a number of {digits} digits (the service reads at most "
                         f"{MAX_INT_DIGITS})")
    return int(text)


async def read_json(request: Request) -> Any:
    """The request body as JSON, within the size limit; ApiError 400/413 otherwise (BodyGuard
    has refused most oversized bodies already; these checks keep the handler safe on its own)."""
    limit: int = request.app.state.settings.max_body_bytes
    too_large = f"request body over the {limit}-byte limit (MEMORY_MAX_BODY_BYTES)"
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise ApiError(413, too_large)
        except ValueError:
            raise ApiError(400, "Content-Length is not a number") from None
    body = bytearray()
    try:
        # BodyGuard (edges.py) bounds the time a body may take (408) for every route.
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ApiError(413, too_large)
    except ClientDisconnect:
        raise ApiError(400, "client disconnected before sending the whole body") from None
    if not body.strip():
        raise ApiError(400, "request body is empty; expected a JSON object")
    try:
        data = json.loads(bytes(body), parse_constant=_reject_constant, parse_int=_parse_int)
        json.dumps(data, ensure_ascii=False).encode("utf-8")  # lone surrogates ("\ud800")
    except UnicodeError as exc:
        raise ApiError(400, f"malformed JSON: not valid Unicode text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") \
            from None
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"malformed JSON: {str(exc) or 'nested too deeply'}") from None
    return data


def parse_query(model_name: str, request: Request) -> Any:
    return parse_model(model_name, dict(request.query_params), unknown="unknown query parameter")


def parse_ts(value: float | str | None, field: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except (TimeOutOfRange, UnclearDuration) as exc:  # their message is the reason
        raise ApiError(422, f"{field}: {exc}", field) from None
    except (ValueError, TypeError, OverflowError):
        raise ApiError(422, f"{field}: expected ISO 8601, unix seconds or a duration back "
                       f"from now (7d), got {value!r}"[:300],
                       field) from None


def read_filters(project: str | None, **others: Any) -> RecallFilters:
    """The filters of a read (/recall, /api/memories, /api/search and the MCP tools
    memory_recall and memory_list): a blank `project` ("") is the global memories alone
    (those without a project), as `--project ''` is in the CLI; it was refused there."""
    if project is not None and not project.strip():
        return RecallFilters(global_only=True, **others)
    return RecallFilters(project=project, **others)


def to_memory(item: Any, field: str, max_chars: int) -> NewMemory:
    """An ingest item as the memory to store; ApiError 422 naming the bad field. A blank
    `project` ("") is a global memory, as in PATCH, memory_store and `memory-mcp store`."""
    memory = NewMemory(content=item.content, kind=item.kind, source=item.source,
                       project=project_name(item.project) or None, tags=list(item.tags),
                       session=item.session,
                       created_at=parse_ts(item.created_at, f"{field}created_at"),
                       replaces=item.replaces)
    try:
        validate(memory, max_chars)
    except InvalidMemory as exc:
        name = str(exc).split(":", 1)[0]
        raise ApiError(422, f"{field}{exc}", f"{field}{name}") from None
    return memory


def recall_item(hit: RecallHit, budget_chars: int) -> dict[str, Any]:
    """A hit as /recall returns it: the content cleaned like the block's (wrapper tags
    neutralised) and cut to the budget, marked `truncated` with its full length. Only what
    the cut keeps is cleaned (`sanitize_head`): cleaning 100 KB full of `<s` costs ~0.1 s."""
    data = hit.to_dict()
    content = sanitize_head(data["content"], budget_chars)
    if len(content) > budget_chars:  # the memory's own length, not its escaped text's
        data["truncated"], data["content_chars"] = True, len(data["content"])
        content = clip(content, budget_chars)
    data["content"] = content
    return data


@dataclass
class SpoolWatch:
    """The write spool as the service's replay loop (spool_replay.run) found it at its last
    look, every few seconds: what /health says of it without listing the folder itself."""

    #: Writes waiting to be stored (after a replay, those another replayer holds too); None
    #: while the folder cannot be listed.
    pending: int | None = 0
    #: Why the service cannot replay them (its user may not list or write the folder or read a
    #: file, the store cannot take them), in the one line it logged; None while it can.
    blocked: str | None = None


#: By spool folder: the loop that replays a folder and the routes that report it share one.
_SPOOL_WATCHES: dict[Path, SpoolWatch] = {}


def spool_watch(settings: Settings) -> SpoolWatch:
    """The watch of `settings`' spool folder (made on first use: nothing found yet)."""
    return _SPOOL_WATCHES.setdefault(settings.spool_path, SpoolWatch())


def spool_state(settings: Settings, blocked: str | None) -> dict[str, Any]:
    """The write spool at a glance: writes waiting, the oldest one's time, writes refused, and
    why the waiting ones cannot be replayed (`blocked`, None while they can)."""
    depth = spool.depth(settings.spool_path)
    return {"pending": depth.count, "oldest": depth.oldest, "rejected": depth.rejected,
            "path": str(settings.spool_path), "blocked": blocked}


def engine_of(request: Request) -> MemoryEngine:
    return request.app.state.engine


# --- routes --------------------------------------------------------------------------------


async def health(request: Request) -> JSONResponse:
    """Liveness for anyone (it needs no token); the detail (counts, channels, the embedder
    with its model's path, which names the user's home) only where the other routes would
    answer too: no token configured (loopback only), or the request carries it. A token
    means the port may be open to the LAN, and liveness probes need no more.

    The detail is read from the store, and waits on it. A store that cannot give it makes
    the answer an error with the liveness part beside it (`ok` false, `store_problem`): what
    `memory-mcp doctor` reads as "up, but its store is unavailable", never as a service to
    end and start again (one started while its database is down cannot open it and exits).
    `HEAD /` is the probe that never waits on the store (the hooks' `answers`)."""
    token = request.app.state.settings.token
    live = {
        "ok": True,
        "version": __version__,
        "mcp": request.app.state.mcp.state,
        # Whether the other routes need the token: the browse page asks for one only then.
        "auth": bool(token),
    }
    if token and not bearer_ok(request.headers.get("authorization"), token):
        return JSONResponse(live)
    engine = engine_of(request)
    try:
        counts, embedder = await threads.health(
            lambda: (engine.counts(), engine.embedder_info()))
    except (StoreError, sqlite3.DatabaseError) as exc:
        problem = store_problem(exc)
        if problem is None:
            raise  # not the store's state: the service's own 500 (EXCEPTION_HANDLERS)
        status, line = problem
        store_problems.warn(request.method, request.url.path, line)
        return JSONResponse({"error": line, **live, "ok": False}, status_code=status)
    watch = spool_watch(request.app.state.settings)  # the replay loop's last look: no I/O here
    return JSONResponse({
        **live,
        "counts": counts,
        "channels": [{"name": c.name, "weight": engine.weights[c.name]} for c in engine.channels],
        "embedder": embedder,
        "device": (embedder or {}).get("device"),
        "spool": {"pending": watch.pending, "blocked": watch.blocked},
    })


def store_problem(exc: StoreError | sqlite3.DatabaseError) -> tuple[int, str] | None:
    """/health's status and one line for a store that could not give its counts: 503 while
    it cannot answer for now and the service recovers by itself once it does (a database
    server down, slow or refusing the role: the store's StoreError; a SQLite file locked or
    its disk full); 500 when the SQLite file is damaged (the line says what to run, and
    `restore` wants the service stopped); None for any other error."""
    if isinstance(exc, StoreError):
        return 503, str(exc)
    if damaged(exc):
        return 500, sqlite_problem(exc)
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # an extended code's primary
    if code in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return 503, sqlite_problem(exc)
    return None


async def ingest(request: Request) -> JSONResponse:
    data = await read_json(request)
    return JSONResponse(await threads.write(ingest_body, engine_of(request), data))


def ingest_body(engine: MemoryEngine, data: Any) -> dict[str, Any]:
    """/ingest's answer to a decoded JSON body: one memory or `{"items": [...]}`. Also how
    the service replays its write spool (spool_replay.py). ApiError when the body is wrong.

    A batch item may be an exchange (`{"exchange": {"user", "reply"}, ...}`) instead of a
    memory: it becomes the memories a hook's flush makes of it (`exchange_memories`), and its
    result sums theirs (`exchange_result`); the batch's counts count those memories."""
    max_chars = engine.settings.max_content_chars
    batch = isinstance(data, dict) and "items" in data
    if not batch:
        if isinstance(data, dict) and "exchange" in data:
            raise ApiError(422, 'exchange: an exchange goes in a batch ({"items": [...]}), '
                           "one result per item", "exchange")
        items = [to_memory(parse_model("IngestItem", data), "", max_chars)]
    else:
        # Item by item: one bad chunk of a 200-chunk flush must not cost the other 199.
        raw_items = parse_model("IngestBatch", data).items
        bad: dict[int, str] = {}
        spans: dict[int, int] = {}  # request item -> how many memories it became
        items = []
        for i, raw in enumerate(raw_items):
            field = f"items[{i}]."
            try:
                if isinstance(raw, dict) and "exchange" in raw:
                    found = exchange_memories(raw, field, max_chars)
                else:
                    found = [to_memory(parse_model("IngestItem", raw, field), field, max_chars)]
                for item in found:
                    engine.writer.check_replaces(item)
            except ApiError as exc:
                bad[i] = exc.message
            except InvalidMemory as exc:  # `replaces` naming no live memory: this item's
                bad[i] = f"{field}{exc}"
            else:
                spans[i] = len(found)
                items += found
    try:
        stored = engine.ingest(items) if items else []
    except InvalidMemory as exc:  # validated above (`replaces` naming no memory lands here)
        raise ApiError(422, str(exc), str(exc).split(":", 1)[0]) from None
    if not batch:
        return stored[0].to_dict() | {"duplicate": stored[0].status == "duplicate"}
    queue = iter(stored)
    out, memories = [], []  # a result per request item; one per memory (each exchange piece)
    for i, raw in enumerate(raw_items):
        if i in bad:
            results = [IngestResult("rejected", reason=bad[i])]
        else:
            results = [next(queue) for _ in range(spans[i])]
        memories += results
        dicts = [r.to_dict() | {"duplicate": r.status == "duplicate"} for r in results]
        is_exchange = isinstance(raw, dict) and "exchange" in raw and i not in bad
        out.append(exchange_result(dicts) if is_exchange else dicts[0])
    counts = {s: sum(r.status == s for r in memories) for s in ("new", "duplicate", "rejected")}
    return {"results": out, **counts}


def exchange_memories(raw: dict[str, Any], field: str, max_chars: int) -> list[NewMemory]:
    """A batch item holding an exchange as the memories a hook's flush stores for it: the
    whole exchange redacted first, then cut (`transcript.exchange_chunks`), so that no cut
    splits a secret into halves the redaction of each memory alone would pass. Each memory
    carries the item's other fields. ApiError 422 for a bad item."""
    from ..harness.transcript import MIN_CHUNK_CHARS, exchange_chunks
    from ..safety.redaction import redact

    if "content" in raw:
        raise ApiError(422, f"{field}exchange: an item holds content or an exchange, not both",
                       f"{field}exchange")
    item = parse_model("IngestExchange", raw, field)
    chunks = exchange_chunks(item.exchange.user, item.exchange.reply, redact)
    if not chunks:
        raise ApiError(422, f"{field}exchange: nothing of at least {MIN_CHUNK_CHARS} "
                       "characters to store", f"{field}exchange")
    return [to_memory(SimpleNamespace(content=chunk, kind=item.kind, source=item.source,
                                      project=item.project, tags=item.tags,
                                      session=item.session, created_at=item.created_at,
                                      replaces=None), field, max_chars)
            for chunk in chunks]


def exchange_result(pieces: list[dict[str, Any]]) -> dict[str, Any]:
    """An exchange item's result: `rejected` (with the first refused piece's reason) when
    any of its memories was refused, else `new` when any is new, else `duplicate`; `pieces`
    holds each memory's own result."""
    statuses = [piece["status"] for piece in pieces]
    status = next((s for s in ("rejected", "new") if s in statuses), "duplicate")
    out: dict[str, Any] = {"status": status, "duplicate": status == "duplicate"}
    if status == "rejected":
        out["reason"] = next(p.get("reason", "refused") for p in pieces
                             if p["status"] == "rejected")
    return out | {"pieces": pieces}


#: The harness asking (`memory-mcp hook`, the opencode plugin): memories imported from files it
#: loads into every session itself are left out of its recall. A header, not a body field: a
#: service started before an upgrade refuses a body field it does not know (strict bodies),
#: while it passes over a header.
HARNESS_HEADER = "x-memory-harness"


def asking_harness(request: Request) -> str | None:
    name = request.headers.get(HARNESS_HEADER)
    if name is not None and not PLUGIN_NAME.match(name):  # an adapter's registered name
        raise ApiError(422, f"{HARNESS_HEADER}: expected a harness name (letters, digits, _.:-)",
                       field=HARNESS_HEADER)
    return name


#: How long the caller can still wait for the answer, in whole milliseconds (`memory-mcp hook`
#: sends what is left of its budget): the recall's channel searches end by then, less
#: ANSWER_MARGIN_S, where that comes before MEMORY_CHANNEL_TIMEOUT_S, and its statements after
#: them by then, less WAY_BACK_S. A header, as above.
WAIT_HEADER = "x-memory-wait-ms"
#: What a recall keeps back of its caller's wait for the work after the searches (fusion, the
#: memories, relevance, the block) and the answer's way back; half the wait when it is shorter.
ANSWER_MARGIN_S = 0.2
#: What it keeps back for the answer's way back alone (a tenth of the wait when shorter).
WAY_BACK_S = 0.05
#: The longest wait the header can say (digits): a day, far past any channel deadline.
MAX_WAIT_DIGITS = 8


def caller_wait(request: Request) -> float | None:
    """The seconds X-Memory-Wait-Ms says the caller can still wait; None when it says none."""
    raw = request.headers.get(WAIT_HEADER)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= MAX_WAIT_DIGITS):
        raise ApiError(422, f"{WAIT_HEADER}: expected whole milliseconds (digits), not "
                       f"{raw[:20]!r}", field=WAIT_HEADER)
    return int(raw) / 1000


def answer_window(arrived: float, wait: float | None) -> AbstractContextManager[None]:
    """Around a service's recall that arrived at `arrived` (`time.monotonic()`) from a caller
    that can wait `wait` seconds (None: it says not): its searches end in time for the rest,
    and the rest in time for the answer's way back (`retrieval.service_recall`)."""
    if wait is None:
        return service_recall(arrived)
    return service_recall(arrived, arrived + wait - min(ANSWER_MARGIN_S, wait / 2),
                          arrived + wait - min(WAY_BACK_S, wait / 10))


async def recall(request: Request) -> JSONResponse:
    arrived = time.monotonic()
    wait = caller_wait(request)
    req = parse_model("RecallRequest", await read_json(request))
    harness = asking_harness(request)
    engine = engine_of(request)
    filters = read_filters(req.project, kind=req.kind, source=req.source,
                           since=parse_ts(req.since, "since"),
                           include_superseded=req.include_superseded)

    def work() -> tuple[list[dict[str, Any]], InjectionBlock]:
        exclude = engine.in_agent_context(req.session, harness)
        with answer_window(arrived, wait):  # a plugin's format_injection is held to it too
            hits = engine.recall(req.query, req.k, filters, exclude=exclude,
                                 relevant_only=req.relevant_only, with_global=req.with_global)
            block = engine.injection(req.query, hits, req.budget_chars)
        return [recall_item(h, req.budget_chars) for h in hits], block

    items, block = await threads.read(work)
    # `block_uids`: the memories that made it into the block (the budget may leave some out),
    # what an injecting client reports to /inject/report.
    body: dict[str, Any] = {"query": req.query, "count": len(items), "items": items,
                            "block": block.text, "block_chars": len(block.text),
                            "block_uids": block.uids}
    if (warning := no_channel_warning(engine)) is not None:
        body["warning"] = warning
    return JSONResponse(body)


def no_channel_warning(engine: MemoryEngine) -> str | None:
    """Why a recall finds nothing whatever is stored, when no channel searches (the line the
    CLI, stats, doctor and the log say), else None: an agent told only `count: 0` took it
    for "nothing in memory matches"."""
    if engine.channels:
        return None
    return f"{no_channel_reason(engine.settings, engine.skipped_channels)}: recall finds nothing"


async def stats(request: Request) -> JSONResponse:
    engine = engine_of(request)

    def work() -> dict[str, Any]:
        data = engine.stats()
        data["vectorized"] = (data["embedder"] or {}).get("vectorized", 0)
        data["injections"] = engine.injection_summary()
        data["version"] = __version__
        data["spool"] = spool_state(engine.settings, spool_watch(engine.settings).blocked)
        return data

    return JSONResponse(await threads.read(work))


async def list_memories(request: Request) -> JSONResponse:
    q = parse_query("MemoriesQuery", request)
    filters = read_filters(q.project, kind=q.kind, source=q.source,
                           since=parse_ts(q.since, "since"),
                           include_superseded=q.include_superseded)
    engine = engine_of(request)

    def work() -> tuple[list[dict[str, Any]], int]:
        return [m.to_dict() for m in engine.list(filters, q.limit, q.offset)], engine.count(filters)

    items, total = await threads.read(work)
    return JSONResponse({"items": items, "total": total, "limit": q.limit, "offset": q.offset})


async def search(request: Request) -> JSONResponse:
    """Recall (the same pipeline as /recall) a page at a time, each hit with its fused `score`
    and its rank in each channel that found it (`ranks`): why it was recalled. The content is
    the stored text, unclipped, as `/api/memories` shows it."""
    arrived = time.monotonic()
    q = parse_query("SearchQuery", request)
    filters = read_filters(q.project, kind=q.kind, source=q.source,
                           since=parse_ts(q.since, "since"),
                           include_superseded=q.include_superseded)
    engine = engine_of(request)
    # One more than the page shows, to know whether a next page exists.
    wanted = min(q.offset + q.limit + 1, schemas().MAX_SEARCH_RESULTS)

    def work() -> list[RecallHit]:
        with answer_window(arrived, None):
            return engine.recall(q.q, wanted, filters)

    hits = await threads.read(work)
    page = hits[q.offset:q.offset + q.limit]
    return JSONResponse({
        "query": q.q, "items": [h.to_dict() for h in page], "limit": q.limit, "offset": q.offset,
        "has_more": len(hits) > q.offset + q.limit,
        # The channels that search (an inactive vector channel ranks nothing): a channel
        # listed here but missing from a hit's `ranks` did not find that hit.
        "channels": [c.name for c in engine.channels if c.active],
    })


async def get_memory(request: Request) -> JSONResponse:
    """One live memory with its earlier versions, its supersession both ways and its
    `version` (what PATCH's `if_version` names). 404 otherwise; for a forgotten one the answer
    says so (`"forgotten": true`): the Forgotten view can bring it back."""
    uid = request.path_params["uid"]
    memory = await threads.read(engine_of(request).get, uid)
    if memory is None:
        raise ApiError(404, f"no live memory with uid {uid[:80]!r}", "uid")
    if memory.deleted:
        return JSONResponse({"error": f"memory {uid[:80]!r} is forgotten: restore it from the "
                             "forgotten ones (until a purge)", "field": "uid",
                             "forgotten": True}, status_code=404)
    # Its earlier versions (edits), newest first: nothing an edit replaced is out of sight.
    revisions = await threads.read(engine_of(request).revisions, uid)
    # Supersession both ways: what replaced it (None while current) and what it replaced.
    supersedes = await threads.read(engine_of(request).supersedes, uid)
    return JSONResponse(memory.to_dict() | {"version": edit_version(memory),
                                            "revisions": revisions,
                                            "superseded_by": memory.superseded_by,
                                            "supersedes": supersedes})


async def unsupersede_memory(request: Request) -> JSONResponse:
    """Undo a supersession: the memory is current again (recall and injection return it).
    200 with the uid that had replaced it; 404 for no live memory; 409 when not superseded."""
    uid = request.path_params["uid"]
    try:
        was = await threads.write(engine_of(request).unsupersede, uid)
    except UnknownMemory as exc:
        raise ApiError(404, str(exc), "uid") from None
    if was is None:
        raise ApiError(409, f"memory {uid[:80]!r} is not superseded", "uid")
    return JSONResponse({"uid": uid, "was_superseded_by": was})


async def update_memory(request: Request) -> JSONResponse:
    """Edit a live memory in place (MemoryEngine.update): 200 with the memory as it is now and
    `status` (`updated` or `unchanged`); 404 for an unknown uid; 422 for a bad field, nothing
    to change, or a new text the ingest filters refuse; 409 when another live memory already
    holds the new text, or (field `if_version`) when the memory changed since the client read
    the `version` it sends. A refused edit changes nothing."""
    uid = request.path_params["uid"]
    edit = parse_model("MemoryEdit", await read_json(request))
    try:
        result = await threads.write(engine_of(request).update, uid, content=edit.content,
                                     kind=edit.kind, tags=edit.tags, project=edit.project,
                                     if_version=edit.if_version)
    except UnknownMemory as exc:
        raise ApiError(404, str(exc), "uid") from None
    except InvalidMemory as exc:
        name = str(exc).split(":", 1)[0]
        raise ApiError(422, str(exc), name if name in EDIT_FIELDS else "body") from None
    if result.status == "rejected":  # a filter's reason names its field ("kind: holds …")
        reason = result.reason or "refused"
        name = reason.split(":", 1)[0]
        field = name if name in EDIT_FIELDS else "content"
        raise ApiError(422, reason if field == name else f"content: not stored: {reason}", field)
    if result.status == "duplicate":
        raise ApiError(409, result.reason or "duplicate", "content")
    if result.status == "conflict":
        raise ApiError(409, result.reason or "changed since you opened it", "if_version")
    return JSONResponse(result.memory.to_dict() | {"status": result.status,
                                                   "version": edit_version(result.memory)})


async def memory_injections(request: Request) -> JSONResponse:
    """The injections one live memory took part in, newest first (the detail view's list)."""
    uid = request.path_params["uid"]
    q = parse_query("PageQuery", request)
    engine = engine_of(request)

    def work() -> tuple[list[dict[str, Any]], int] | None:
        memory = engine.get(uid)
        if memory is None or memory.deleted:
            return None
        return engine.memory_injections(uid, q.limit, q.offset)

    found = await threads.read(work)
    if found is None:
        raise ApiError(404, f"no live memory with uid {uid[:80]!r}", "uid")
    items, total = found
    return JSONResponse({"uid": uid, "items": items, "total": total, "limit": q.limit,
                         "offset": q.offset})


async def forget_memory(request: Request) -> JSONResponse:
    """Forget one live memory (a soft delete: `unforget` takes it back until a purge). 200
    with `current_again`, the older memories it had superseded, which recall returns again
    (usually none); 404 for no live memory."""
    uid = request.path_params["uid"]
    current = await threads.write(engine_of(request).forget_memory, uid)
    if current is None:
        raise ApiError(404, f"no live memory with uid {uid[:80]!r}", "uid")
    return JSONResponse({"forgotten": uid, "current_again": current})


async def list_forgotten(request: Request) -> JSONResponse:
    """The forgotten memories a purge has not removed yet, the latest forgotten first, each
    with `forgotten_at` and `purged_after` (null when only a purge by hand removes it)."""
    q = parse_query("ForgottenQuery", request)
    engine = engine_of(request)
    # One more than asked for, to know whether there are more.
    found = await threads.read(engine.forgotten, q.project, q.limit + 1)
    grace_s = engine.settings.forget_purged_after_s
    return JSONResponse({
        "items": [forgotten_record(m, grace_s) for m in found[:q.limit]],
        "limit": q.limit, "has_more": len(found) > q.limit,
        "grace_days": engine.settings.forget_grace_days if grace_s is not None else None})


async def unforget_memory(request: Request) -> JSONResponse:
    """Take a forget back (MemoryEngine.unforget): 200 `{"status": "restored", "memory"}`;
    404 for a uid never stored or purged; 409 when it is live, or when a live memory of its
    project holds its text now (`duplicate_of`; it stays forgotten)."""
    uid = request.path_params["uid"]
    try:
        result = await threads.write(engine_of(request).unforget, uid)
    except UnknownMemory as exc:
        raise ApiError(404, str(exc), "uid") from None
    if (refusal := result.refusal()) is not None:  # live, or its text is held by another
        return JSONResponse({"error": refusal, "field": "uid",
                             **({"duplicate_of": result.duplicate_of}
                                if result.duplicate_of else {})}, status_code=409)
    return JSONResponse({"status": result.status, "memory": result.memory.to_dict()})


async def list_injections(request: Request) -> JSONResponse:
    q = parse_query("InjectionsQuery", request)
    engine = engine_of(request)

    def work() -> dict[str, Any]:
        return {"items": engine.injections(harness=q.harness, project=q.project,
                                           limit=q.limit, offset=q.offset),
                "summary": engine.injection_summary(), "limit": q.limit, "offset": q.offset}

    return JSONResponse(await threads.read(work))


async def inject_report(request: Request) -> JSONResponse:
    report = parse_model("InjectReport", await read_json(request))
    report_id = await threads.write(
        engine_of(request).record_injection, uids=list(report.uids), harness=report.harness,
        hook=report.hook, project=report.project, query=report.query, chars=report.chars,
        session=report.session)
    return JSONResponse({"ok": True, "id": report_id})


def _maintenance_gate(request: Request) -> None:
    """Bulk maintenance needs a configured token (403 otherwise); the auth middleware has
    already answered 401 to requests without a valid one."""
    if not request.app.state.settings.token:
        raise ApiError(403, "bulk maintenance over HTTP is disabled without MEMORY_TOKEN; "
                            "use the `memory-mcp purge` / `memory-mcp backfill` CLI")


async def maintenance_purge(request: Request) -> JSONResponse:
    _maintenance_gate(request)
    report = await threads.write(engine_of(request).purge)
    return JSONResponse(report.to_dict())


async def maintenance_backfill(request: Request) -> JSONResponse:
    _maintenance_gate(request)
    return JSONResponse(await threads.write(engine_of(request).backfill))


ROUTES = [
    Route("/health", health, methods=["GET"]),
    Route("/ingest", ingest, methods=["POST"]),
    Route("/recall", recall, methods=["POST"]),
    Route("/inject/report", inject_report, methods=["POST"]),
    Route("/api/stats", stats, methods=["GET"]),
    Route("/api/memories", list_memories, methods=["GET"]),
    Route("/api/search", search, methods=["GET"]),
    Route("/api/memories/{uid}", get_memory, methods=["GET"]),
    Route("/api/memories/{uid}/injections", memory_injections, methods=["GET"]),
    Route("/api/memories/{uid}", forget_memory, methods=["DELETE"]),
    Route("/api/memories/{uid}", update_memory, methods=["PATCH"]),
    Route("/api/memories/{uid}/unsupersede", unsupersede_memory, methods=["POST"]),
    Route("/api/memories/{uid}/unforget", unforget_memory, methods=["POST"]),
    Route("/api/forgotten", list_forgotten, methods=["GET"]),
    Route("/api/injections", list_injections, methods=["GET"]),
    Route("/api/maintenance/purge", maintenance_purge, methods=["POST"]),
    Route("/api/maintenance/backfill", maintenance_backfill, methods=["POST"]),
]


async def api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return exc.response()


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=headers)


async def store_error(request: Request, exc: Exception) -> JSONResponse:
    """The store cannot answer (a PostgreSQL server down or unreachable): 503, one line."""
    store_problems.warn(request.method, request.url.path, str(exc))
    return JSONResponse({"error": str(exc)}, status_code=503)


async def sqlite_error(request: Request, exc: Exception) -> JSONResponse:
    """A damaged SQLite file (a backup copied over the live db, a disk fault) or a full disk
    met mid-request: 503 with the CLI's one line (what to run), not a 500 and a traceback."""
    assert isinstance(exc, sqlite3.DatabaseError)
    if not (damaged(exc) or sqlite3.SQLITE_FULL == (exc.sqlite_errorcode or 0) & 0xFF):
        return await unexpected_error(request, exc)
    problem = sqlite_problem(exc)
    store_problems.warn(request.method, request.url.path, problem)
    return JSONResponse({"error": problem}, status_code=503)


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse({"error": "internal error (see the service log)"}, status_code=500)


EXCEPTION_HANDLERS: dict[Any, Callable[..., Any]] = {
    ApiError: api_error,
    HTTPException: http_error,
    StoreError: store_error,
    sqlite3.DatabaseError: sqlite_error,
    Exception: unexpected_error,
}
