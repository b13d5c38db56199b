"""The write path, one stage of the engine: validate -> `filter_ingest` hooks -> prepare
(outside the write lock) -> exact and near-duplicate dedup -> store -> every channel indexes
(each inside a savepoint, so one failing channel never costs the write) -> supersession.
Edits in place (`update`) and purge notifications (`forget_ids`) go through here too."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import secrets
import shlex
import sys
import threading
import time
from dataclasses import dataclass, fields, replace
from typing import Any

from . import held, neardup, supersede
from .channels import Channel, Deferrable, Prepares
from .config import Settings
from .errors import InvalidMemory, Rejected, UnknownMemory, one_line
from .limits import (MAX_FUTURE_S, MAX_PROJECT_CHARS, MAX_SESSION_CHARS, MAX_TAG_CHARS,
                     MAX_TAGS)
from .lite import encodes
from .models import (IngestResult, Memory, NewMemory, RecallFilters, in_time_range, iso, now,
                     project_name)
from .plugins import CORE_PLUGINS, PluginManager
from .safety.terminal import strip_terminal_controls
from .safety.textnorm import strip_format_chars
from .sources import CAPTURED_SOURCES, FLUSH_SOURCE
from .stores import MemoryStore
from .stores.base import content_hash

log = logging.getLogger("semantic_memory")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
UID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: The channel that finds supersession candidates at ingest, and how many it returns.
SUPERSEDE_CHANNEL = "porter"
SUPERSEDE_CANDIDATES = 5
#: Longer texts are documents, not one restated value: the rule leaves them alone.
SUPERSEDE_MAX_CHARS = 500
#: The digit-free words (from the start) of an untrusted memory that search for the runs it
#: repeats (`Writer._reruns`): a whole 2 KB tool capture as the query cost ~100 ms a write.
RERUN_PROBE_WORDS = 16
#: How many of its session's latest current flush memories a new one is compared with: the
#: shorter copy of a grown exchange is the newest of them (every memory of a re-flush before
#: it is a duplicate). Read from the (session, seq) index, so a write costs one small query.
GROWTH_WINDOW = 4
#: The kind a write has when its caller names none (NewMemory's default, every interface's):
#: a duplicate does not report it as a kind it left unapplied (`_not_applied`).
DEFAULT_KIND = next(f.default for f in fields(NewMemory) if f.name == "kind")


def validate(memory: NewMemory, max_chars: int) -> None:
    """Raise InvalidMemory with a one-line reason naming the field."""
    if not isinstance(memory.content, str):
        raise InvalidMemory("content: must be a string")
    # Blank as every injection block shows it: invisible characters and terminal controls
    # are dropped there, so such a memory showed up empty and took a recall slot.
    if not strip_format_chars(strip_terminal_controls(memory.content)).strip():
        raise InvalidMemory("content: must not be empty")
    if len(memory.content) > max_chars:
        raise InvalidMemory(
            f"content: {len(memory.content)} characters exceeds the limit of {max_chars}"
        )
    if "\x00" in memory.content:
        raise InvalidMemory("content: contains NUL characters (binary data is not stored)")
    for name in ("content", "project", "session"):  # no store can write a lone surrogate
        if isinstance(value := getattr(memory, name), str) and not encodes(value):
            raise InvalidMemory(f"{name}: not UTF-8 text")
    for name in ("project", "session"):  # SQLite cut them at a NUL; PostgreSQL refused them
        if isinstance(value := getattr(memory, name), str) and "\x00" in value:
            raise InvalidMemory(f"{name}: contains NUL characters")
    for name in ("kind", "source"):
        value = getattr(memory, name)
        if not isinstance(value, str) or not _NAME.match(value):
            raise InvalidMemory(
                f"{name}: expected a short identifier (letters, digits, _.:-), got {value!r}"
            )
    if memory.project is not None and (
        not isinstance(memory.project, str) or not 0 < len(memory.project) <= MAX_PROJECT_CHARS
    ):
        raise InvalidMemory(f"project: expected a string of 1..{MAX_PROJECT_CHARS} characters")
    if isinstance(memory.project, str) and ("\n" in memory.project or "\t" in memory.project):
        raise InvalidMemory("project: must be one line (no newline or tab)")
    if not isinstance(memory.tags, list) or len(memory.tags) > MAX_TAGS:
        raise InvalidMemory(f"tags: expected a list of at most {MAX_TAGS} strings")
    for tag in memory.tags:
        if not isinstance(tag, str) or not 0 < len(tag) <= MAX_TAG_CHARS:
            raise InvalidMemory(f"tags: each tag must be a string of 1..{MAX_TAG_CHARS} characters")
        if not encodes(tag):
            raise InvalidMemory("tags: not UTF-8 text")
        if "\x00" in tag:
            raise InvalidMemory("tags: contains NUL characters")
    for name in ("created_at", "updated_at"):
        value = getattr(memory, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InvalidMemory(f"{name}: expected unix seconds")
        if value is not None and not in_time_range(value):
            raise InvalidMemory(f"{name}: time out of range (1970 to year 9999)")
        # a restored memory (a uid: an export's line, a migrate) is as the store that took it
        # holds it, whatever that machine's clock said then: refused, the copy loses it
        if value is not None and value > now() + MAX_FUTURE_S and memory.uid is None:
            raise InvalidMemory(f"{name}: {iso(value)} is more than a day ahead of this "
                                "machine's clock")
    if memory.uid is not None and (not isinstance(memory.uid, str) or not UID.match(memory.uid)):
        raise InvalidMemory("uid: expected 1..64 letters, digits, _ or -")
    if not isinstance(memory.forgotten, bool):
        raise InvalidMemory("forgotten: expected true or false")
    if memory.session is not None and (
        not isinstance(memory.session, str) or not 0 < len(memory.session) <= MAX_SESSION_CHARS
    ):
        raise InvalidMemory(f"session: expected a string of 1..{MAX_SESSION_CHARS} characters")
    if memory.seq is not None and (
        isinstance(memory.seq, bool) or not isinstance(memory.seq, int) or memory.seq < 0
        or memory.session is None
    ):
        raise InvalidMemory("seq: expected a whole number >= 0, with a session")


def _place_in_sessions(store: MemoryStore, conn: Any, items: list[NewMemory],
                       batch_session: bool) -> None:
    """Give each item about to be stored its session and its place there: an item without a
    session joins the batch's own (with `batch_session`); its `seq` continues the session's
    order (a restored item keeps its own)."""
    batch = f"batch:{secrets.token_hex(8)}" if batch_session else None
    next_seq: dict[str, int] = {}
    for item in items:
        item.session = item.session or batch
        if item.session is None or item.seq is not None:
            continue
        if item.session not in next_seq:
            last = store.last_seq(conn, item.session)
            next_seq[item.session] = 0 if last is None else last + 1
        item.seq = next_seq[item.session]
        next_seq[item.session] += 1


def _captured(item: NewMemory) -> bool:
    """Whether `item` is automatic capture (CAPTURED_SOURCES), not a restored memory: a flush
    sends the whole session again at every compaction and at its end, so a resumed session
    re-sends what its user forgot meanwhile. Only an explicit store ("remember …",
    memory_store, `memory-mcp store`) of that text is a person asking again."""
    return item.uid is None and not item.forgotten and item.source in CAPTURED_SOURCES


def _flat(text: str) -> str:
    """`text` with every run of whitespace one space: a transcript's reply blocks are joined
    with blank lines, and a piece of a cut exchange ends where the cut was."""
    return " ".join(text.split())


def grows(older: Memory, newer: Memory | NewMemory) -> bool:
    """Whether `newer` is a later flush of the exchange `older` holds, grown: both flushed
    (FLUSH_SOURCE) in one session, project and kind, and `newer`'s text (whitespace aside)
    starts with all of `older`'s and goes on after a word. The grown piece of an exchange cut
    into pieces starts with its shorter copy too: the pieces before it are cut alike. (Claude
    Code's PreCompact may fire mid-turn, then again once the turn ends.) Not tool captures:
    two calls of a tool whose output grew (a log read twice) are two events."""
    return (newer.source == FLUSH_SOURCE == older.source and newer.session is not None
            and (older.session, older.project, older.kind)
            == (newer.session, newer.project, newer.kind)
            and _flat(newer.content).startswith(_flat(older.content) + " "))


def _forgotten_duplicate(uid: str) -> IngestResult:
    """The answer to captured text a forgotten memory holds: a duplicate of that memory, which
    stays forgotten (its grace period is not restarted); the reason says so."""
    return IngestResult("duplicate", uid=uid, reason=(
        f"forgotten: memory {uid} holds this text and was forgotten; automatic capture does "
        f"not store it again (`memory-mcp unforget {uid}` brings it back)"))


def _purged_duplicate() -> IngestResult:
    """The answer to captured text a purge removed from the project (`store.purged_by_hash`):
    a duplicate of no memory any more; the reason says so."""
    return IngestResult("duplicate", reason=(
        "purged: a memory of this project held this text and was purged; automatic capture "
        "does not store it again (an explicit store does)"))


def _not_applied(result: IngestResult, item: NewMemory, held: Memory | None) -> IngestResult:
    """`result`, a duplicate of memory `held`, saying which of `item`'s kind and tags the
    memory does not have: a duplicate only refreshes the memory (so a plain store of known
    text, whose kind is the default, never rewrites what a person chose), and the caller
    must not believe it tagged it. The reason names the update that applies them. The default
    kind is no request: re-storing a decision's text without a kind says nothing of it, and
    neither is automatic capture's (a flush's `note`: the hook's, not a person's choice)."""
    if held is None or held.deleted or _captured(item):
        return result
    missing: dict[str, Any] = {}
    if item.kind not in (held.kind, DEFAULT_KIND):
        missing["kind"] = item.kind
    if tags := sorted(set(item.tags) - set(held.tags)):
        missing["tags"] = tags
    if not missing:
        return result
    kind = missing.get("kind", held.kind)
    union = sorted(set(held.tags) | set(tags))
    command = " ".join(["memory-mcp update", held.uid, "--kind", shlex.quote(kind),
                        *(f"--tag {shlex.quote(t)}" for t in union)])
    asked = " and ".join(f"{name} {value!r}" for name, value in missing.items())
    return replace(result, not_applied=missing, reason=(
        f"not applied: {asked}; memory {held.uid} already holds this text, as kind "
        f"{held.kind!r} with tags {held.tags}, and a duplicate only refreshes it: update it "
        f"to apply them (memory_update, or `{command}`)"))


def _before(candidate: Memory, memory: Memory, dated: bool) -> bool:
    """Whether `candidate` came before the new `memory`, so that `memory` may supersede it.
    A write that brought its own time (`dated`: a spooled or imported one) is placed by it;
    one that did not is the newest word whatever the clocks say (a clock stepped back, a
    teammate's behind on a shared store), so it is placed by arrival, the id. Strictly
    before: one batch shares a timestamp, and its later items are stored before its earlier
    ones are judged; by id they never replace each other."""
    if not dated:
        return candidate.id < memory.id
    return (candidate.created_at, candidate.id) < (memory.created_at, memory.id)


def _newest_restating(memory: Memory, candidates: list[Memory]) -> Memory | None:
    """The newest of `candidates` (current, of `memory`'s project and kind) dated after
    `memory` that restates it with changed details: the one that would have superseded it,
    had it been stored in time (the rule's limits as at ingest)."""
    newer = [m for m in candidates
             if (m.created_at, m.id) > (memory.created_at, memory.id)
             and len(m.content) <= SUPERSEDE_MAX_CHARS
             and supersede.may_replace(m.source, memory.source)
             and supersede.supersedes(memory.content, m.content)]
    return max(newer, key=lambda m: (m.created_at, m.id), default=None)


def _history_reason(memory: Memory, newer: Memory) -> str:
    """Why a new memory was stored superseded: a `new` answer alone would let its caller
    believe recall now answers it."""
    return (f"stored as history: memory {newer.uid}, dated later ({iso(newer.created_at)}) "
            f"than this one ({iso(memory.created_at)}), restates it with changed details, so "
            f"it is superseded by {newer.uid} and recall answers that one "
            f"(`memory-mcp unsupersede {memory.uid}` makes it current)")


def _times(item: NewMemory, ts: float) -> tuple[float, float]:
    """(created_at, updated_at) of a new row: the item's own when it brings them, else now."""
    created = float(item.created_at) if item.created_at is not None else ts
    if item.updated_at is not None:
        return created, float(item.updated_at)
    return created, created if item.created_at is not None else ts


def _new_row(item: NewMemory, uid: str, ts: float) -> Memory:
    """The memory `item` becomes (its id comes from the store)."""
    created, updated = _times(item, ts)
    return Memory(0, uid, item.content, item.kind, item.source, item.project,
                  sorted(set(item.tags)), created, updated, item.forgotten, item.session,
                  item.seq)


def _edited(current: Memory, content: str | None, kind: str | None, tags: list[str] | None,
            project: str | None) -> NewMemory:
    """The version an edit asks for, as a NewMemory the ingest filters can judge."""
    return NewMemory(
        current.content if content is None else content,
        kind=current.kind if kind is None else kind, source=current.source,
        project=current.project if project is None else (project_name(project) or None),
        tags=list(current.tags) if tags is None else list(tags))


def edit_version(memory: Memory) -> str:
    """The version of what an edit changes (text, kind, project, tags): the precondition of
    `Writer.update` (`if_version`). A digest of those values rather than `updated_at`, which
    interfaces show in whole seconds (two writes in one second would look the same) and which
    a re-ingest of the same text moves without changing anything an editor sees."""
    values = json.dumps([memory.content, memory.kind, memory.project, sorted(memory.tags)],
                        ensure_ascii=False)
    return hashlib.sha256(values.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class UpdateResult:
    """Outcome of an edit: `updated`, `unchanged`, `rejected`, `duplicate` or `conflict` (the
    memory changed since the caller read it: `if_version`), with the memory as it is now (the
    new version when updated, else the stored one)."""

    status: str
    memory: Memory
    reason: str | None = None
    duplicate_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "uid": self.memory.uid}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.duplicate_of is not None:
            out["duplicate_of"] = self.duplicate_of
        memory = self.memory.to_dict()
        memory.pop("deleted", None)
        return out | {"memory": memory}


def run_filters(pm: PluginManager, item: NewMemory, settings: Settings) -> None:
    """Every `filter_ingest` on a `validate`d `item`, in pluggy's order. A filter refuses with
    `Rejected` (or `InvalidMemory`); one that raises anything else refuses the memory too, in
    one line naming it: filters enforce hygiene, so nothing is stored unfiltered (fail
    closed). So does one that overruns MEMORY_CHANNEL_TIMEOUT_S in the service (`held`: a
    hung filter held every write, four of them the whole write lane), and every write while
    that call still runs: a filter cannot be skipped. (A late call may go on editing `item`:
    a refused memory is never stored.) The memory is validated again after each filter, so
    one that edits it into something no store takes (content None, tags a str, nothing left)
    is named in the reason, not the user's text."""
    timeout = settings.channel_timeout_s if settings.serving else 0.0
    seconds = timeout if timeout > 0 else math.inf  # a one-off command: its user can stop it
    for plugin, call in pm.calls("filter_ingest", memory=item, settings=settings):
        if held.running_late(pm, "filter_ingest", plugin):
            reason = (f"plugin {pm.origin(plugin)}: filter_ingest still runs on an earlier "
                      f"memory past its {timeout:g} s (MEMORY_CHANNEL_TIMEOUT_S); refused "
                      "rather than stored unfiltered")
            log.warning("%s", reason)
            raise Rejected(reason)
        try:
            held.call_held(pm, "filter_ingest", plugin, call,
                           math.inf if plugin in CORE_PLUGINS else seconds)
        except (Rejected, InvalidMemory):
            raise
        except held.Overran as exc:
            took = "took longer than" if exc.started else "did not start (no free thread) within"
            reason = (f"plugin {pm.origin(plugin)}: filter_ingest {took} {timeout:g} s "
                      "(MEMORY_CHANNEL_TIMEOUT_S); refused rather than stored unfiltered")
            log.warning("%s", reason)
            raise Rejected(reason) from None
        except Exception as exc:  # noqa: BLE001 - refused, never stored unfiltered
            reason = (f"plugin {pm.origin(plugin)}: filter_ingest failed ({one_line(exc)}); "
                      "refused rather than stored unfiltered")
            log.warning("%s", reason)
            raise Rejected(reason) from None
        try:
            validate(item, settings.max_content_chars)
        except InvalidMemory as exc:
            reason = (f"plugin {pm.origin(plugin)}: filter_ingest left the memory invalid "
                      f"({exc}); refused")
            log.warning("%s", reason)
            raise Rejected(reason) from None


#: Seconds a batch the model made no vector for waits before the queue tries it again.
EMBED_RETRY_S = 10.0
#: The longest such wait, after failures in a row (a model down for long, a lone bad text).
EMBED_RETRY_MAX_S = 300.0


@dataclass(frozen=True)
class _Retry:
    """A memory waiting for the queue's retry: when it is due, when it last failed (both
    monotonic) and how many times in a row."""

    due: float
    failed_at: float
    failures: int


class Writer:
    """The engine's write stage: one per engine, sharing its store, plugins and channels."""

    def __init__(self, store: MemoryStore, pm: PluginManager, settings: Settings,
                 channels: list[Channel]) -> None:
        self.store, self.pm, self.settings, self.channels = store, pm, settings, channels
        self._preparers = [c for c in channels if isinstance(c, Prepares)]
        #: True where a service runs the embedding queue (`service/embed_queue.py`):
        #: `Deferrable` channels are then prepared by `catch_up`, not at ingest, and `queued`
        #: is set whenever a write left them work.
        self.defer = False
        self.queued = threading.Event()
        #: When this process started deferring: only memories created since then are merged
        #: into an older near-duplicate when their vector arrives. A restored memory (an import
        #: of an export keeps its creation time) was judged already, as ingest never checks it.
        self.defer_since = now()
        #: The queue's marks (`catch_up`), under `_marks_lock` (the queue's thread and the
        #: write lane both change them). A batch that made no vector at all (the model raised,
        #: hung up, answered a wrong shape) is the model's failure, not its texts': each of its
        #: memories waits in `_retry` until due (EMBED_RETRY_S, doubled per failure in a row
        #: up to EMBED_RETRY_MAX_S), and all are due at once when an embed succeeds again.
        #: A memory the model answers no vector for while it embeds others (`checked` refused
        #: that text's row) goes to `_refused`: skipped for this process's life and left out
        #: of `pending` (`backfill`, an edit or a restart tries it again).
        self._retry: dict[int, _Retry] = {}
        self._refused: set[int] = set()
        self._marks_lock = threading.Lock()
        #: When a batch of the queue last made a vector (monotonic; 0: never).
        self._embedded_at = 0.0
        #: Memories edited or brought back (`unforget`) in this process while it defers: their
        #: vector comes from the queue, but such a memory is never merged into a near-duplicate
        #: (`update` refuses rather than merges; a person brought it back). Each maps to when
        #: its write was committed (monotonic; inf while in the transaction): the mark goes once
        #: the queue embedded the memory, or a later look at the queue (`_drop_marks_of_gone`)
        #: no longer finds it there, so the set does not grow for the process's life.
        self._edited: dict[int, float] = {}

    def deferrable(self) -> bool:
        """Whether some active channel can be prepared in the background."""
        return any(c.active and isinstance(c, Deferrable) for c in self._preparers)

    def _deferred(self, channel: Prepares) -> bool:
        return self.defer and isinstance(channel, Deferrable)

    def ingest(self, items: list[NewMemory], *, batch_is_session: bool = True,
               prepare: bool = True) -> list[IngestResult]:
        """Store a batch in one transaction. Invalid input raises InvalidMemory before anything
        is written; a filter's refusal is reported per item as `rejected`. Items without a
        session of their own share the batch's, unless `batch_is_session` is False (a bulk
        load cut into batches, whose neighbours mean nothing). `prepare=False` skips the
        channels' `prepare` step (embedding): a migration copies the vectors instead."""
        for item in items:
            validate(item, self.settings.max_content_chars)
            self.check_replaces(item)
        batch_session = batch_is_session and len(items) > 1  # one memory alone has no neighbours
        accepted: list[tuple[int, NewMemory]] = []
        results: list[IngestResult] = [IngestResult("rejected")] * len(items)
        for position, item in enumerate(items):
            try:
                run_filters(self.pm, item, self.settings)  # validates what each filter left
            except (Rejected, InvalidMemory) as exc:
                results[position] = IngestResult("rejected", reason=str(exc))
                continue
            accepted.append((position, item))
        if not accepted:
            return results
        # The `Prepares` step outside the write lock (e.g. embedding): one value per item,
        # handed to that channel's find_duplicate and index. Only active channels prepare.
        preparers = [c for c in self._preparers if c.active and not self._deferred(c)] \
            if prepare else []
        if self.defer and any(c.active and self._deferred(c) for c in self._preparers):
            self.queued.set()
        prepared = self._prepare(preparers, [item for _, item in accepted])
        if not preparers:
            with self.store.write() as conn:
                accepted = self._skip_restored(conn, accepted, results)
                _place_in_sessions(self.store, conn, [item for _, item in accepted],
                                   batch_session)
                inserted = self._insert_batch(conn, accepted, results)
                if inserted:
                    for channel in self.channels:
                        self._index(conn, channel, inserted)
                by_uid = {memory.uid: memory for memory in inserted}
                for position, item in accepted:
                    results[position] = self._supersede(
                        conn, item, by_uid.get(results[position].uid or ""), results[position],
                        rule=batch_is_session)
            return results
        with self.store.write() as conn:
            kept = {position for position, _ in self._skip_restored(conn, accepted, results)}
            _place_in_sessions(self.store, conn,
                               [item for position, item in accepted if position in kept],
                               batch_session)
            for n, (position, item) in enumerate(accepted):
                if position not in kept:
                    continue
                mine = {name: values[n] for name, values in prepared.items()}
                result, memory = self._insert_or_refresh(conn, item, preparers, mine)
                if memory is not None:
                    # index item by item, so a later item of the batch can dedup against it
                    for channel in self.channels:
                        self._index(conn, channel, [memory],
                                    [mine[channel.name]] if channel.name in mine else None)
                results[position] = self._supersede(conn, item, memory, result,
                                                    rule=batch_is_session)
        return results

    def _prepare(self, channels: list[Prepares], items: list[NewMemory]) -> dict[str, list[Any]]:
        """Each channel's `prepare` values for `items`; a channel whose `prepare` raises or
        answers the wrong number of values is left out of this write's preparation (one line
        naming it; its `index` then gets no prepared values)."""
        prepared: dict[str, list[Any]] = {}
        for channel in channels:
            name = channel.name  # type: ignore[attr-defined]
            try:
                values = list(channel.prepare(items))
            except Exception as exc:  # noqa: BLE001
                log.warning("channel %s: prepare failed (%s); written without it", name,
                            one_line(exc))
                continue
            if len(values) != len(items):
                log.warning("channel %s: prepare answered %d values for %d memories; written "
                            "without it", name, len(values), len(items))
                continue
            prepared[name] = values
        return prepared

    def _index(self, conn: Any, channel: Channel, memories: list[Memory],
               prepared: list[Any] | None = None) -> None:
        """`channel.index` inside a savepoint: when it raises, what it wrote is undone and the
        write goes on without it (one line naming it; `memory-mcp backfill` or the channel's
        catch-up repairs it). The memory itself and the other channels are unaffected."""
        if self.settings.trace_hooks:
            sys.stderr.write(f"channel {channel.name}.index({len(memories)} memories)\n")
        try:
            with self.store.savepoint(conn, "channel_index"):
                channel.index(conn, memories, prepared)
        except Exception as exc:  # noqa: BLE001
            log.warning("channel %s: index failed for %d memories (%s); stored without it",
                        channel.name, len(memories), one_line(exc))

    def forget_ids(self, conn: Any, ids: list[int]) -> None:
        """Tell every channel these memory ids are gone (a purge) or rewritten (an edit)."""
        for channel in self.channels:
            try:
                with self.store.savepoint(conn, "channel_forget"):
                    channel.forget(conn, ids)
            except Exception as exc:  # noqa: BLE001
                log.warning("channel %s: forget failed for %d memories (%s)", channel.name,
                            len(ids), one_line(exc))

    def check_replaces(self, item: NewMemory) -> None:
        """`replaces` must name a live memory (a typo must not pass silently) of the new
        memory's project, global for global (`supersede.cross_project`): raises InvalidMemory
        in one line, before anything is written."""
        if item.replaces is None:
            return
        found = self.store.get(item.replaces) if isinstance(item.replaces, str) and \
            UID.match(item.replaces) else None
        if found is None or found.deleted:
            raise InvalidMemory(f"replaces: no live memory with uid {str(item.replaces)[:80]!r}")
        refusal = supersede.cross_project(found.uid, found.project, item.project or None)
        if refusal is not None:
            raise InvalidMemory(refusal)

    def _supersede(self, conn: Any, item: NewMemory, memory: Memory | None,
                   result: IngestResult, rule: bool = True) -> IngestResult:
        """After `item` was stored as `memory` (None: it was a duplicate of memory
        `result.uid`), mark what it replaces: the memory it names in `replaces`, and, for a new
        fact, preference or decision, the older ones of its project and kind the rule says it
        restates with changed details (not in a bulk load, `rule=False`: its order is a
        file's, not time's, and a search per item would slow it ~10x). "Older" is by the
        item's own time when it brings one, else by arrival (`_before`). A dated item that
        arrives late (a spooled write replayed after a newer restatement was stored) is
        itself history: superseded by that newer memory, its `reason` says so. A duplicate of
        a replaced memory brings it back (`_revive`). A restored memory (it has a uid) keeps
        its recorded state instead. Returns `result` naming the memories it superseded."""
        uid = result.uid
        if uid is None:  # rejected, or captured text a purge removed (`_purged_duplicate`)
            return result
        if item.uid is not None:
            if memory is not None and item.superseded_by:
                self.store.supersede(conn, [memory.id], item.superseded_by)
            return result
        revived = self._revive(conn, item, uid) if memory is None and rule \
            and self.settings.supersede else None
        replaced: dict[int, str] = {}  # id -> uid
        if item.replaces and item.replaces != uid:
            old = self.store.live_by_uid(conn, item.replaces)
            # of its project (`check_replaces`), also if it moved since that check
            if old is not None and old.project == item.project:
                replaced[old.id] = old.uid
        newer: Memory | None = None  # a current memory dated after `item`, stored before it
        if rule and memory is not None and self.settings.supersede and not memory.deleted \
                and memory.kind in supersede.SUPERSEDABLE_KINDS \
                and len(memory.content) <= SUPERSEDE_MAX_CHARS:
            dated = item.created_at is not None
            candidates = self._candidates(conn, memory)
            replaced.update((m.id, m.uid) for m in candidates
                            if _before(m, memory, dated)
                            and supersede.may_replace(memory.source, m.source)
                            and supersede.supersedes(m.content, memory.content))
            if dated:  # arrived late (a spooled write replayed): what came since may restate it
                newer = _newest_restating(memory, [m for m in candidates if m.id < memory.id])
        if rule and memory is not None and self.settings.supersede and not memory.deleted \
                and supersede.untrusted(memory.source):
            dated = item.created_at is not None
            replaced.update((m.id, m.uid) for m in self._reruns(conn, memory)
                            if _before(m, memory, dated))
        if rule and memory is not None and not memory.deleted and memory.source == FLUSH_SOURCE:
            replaced.update((m.id, m.uid) for m in self._outgrown(conn, memory))
        if replaced:
            self.store.supersede(conn, list(replaced), uid)
        uids = ([revived] if revived else []) + list(replaced.values())
        result = replace(result, supersedes=uids) if uids else result
        if newer is not None and memory is not None:
            self.store.supersede(conn, [memory.id], newer.uid)
            result = replace(result, reason=_history_reason(memory, newer))
        return result

    def _reruns(self, conn: Any, memory: Memory) -> list[Memory]:
        """The current memories of untrusted `memory`'s project, source and kind that say
        what it says but for its digit-holding words (`neardup.same_template`): the same
        test run, build or status read again, whose newest run is the current one. Sixty
        captures of one template differing in numbers otherwise filled a recall's whole
        candidate list (50 deep), so the user's decision ranked below them was never seen.
        Whatever its kind (an `artifact` too); not with MEMORY_SUPERSEDE=0."""
        probe = neardup.probe(memory.content, RERUN_PROBE_WORDS)
        return [m for m in self._candidates(conn, memory, probe, memory.source)
                if m.source == memory.source and neardup.same_template(m.content, memory.content)]

    def _outgrown(self, conn: Any, memory: Memory) -> list[Memory]:
        """The current memories among the GROWTH_WINDOW before flush memory `memory` in its
        session (of its source and kind) that it grew (`grows`): shorter flushes of the same
        exchange, which it replaces whatever MEMORY_SUPERSEDE says (two copies of one
        exchange are no value that changed). One indexed query, earlier side first."""
        filters = RecallFilters(source=memory.source, kind=memory.kind)
        near = self.store.adjacent(conn, [memory], GROWTH_WINDOW, filters).get(memory.id, [])
        return [m for _, m in near
                if m.seq is not None and memory.seq is not None and m.seq < memory.seq
                and grows(m, memory)]

    def _revive(self, conn: Any, item: NewMemory, uid: str) -> str | None:
        """`item` restated memory `uid` (word for word, or a near-duplicate with the same
        details). If a newer memory had replaced that one (a value changed and then changed
        back: 6543 -> 6544 -> 6543), the restatement is the newest word: `uid` is current again
        and the newest memory of its chain is replaced by it. Not for kinds the rule never
        supersedes, nor for an item dated before that newest memory (an old transcript stored
        late says nothing about now), nor for an untrusted item when that newest memory is
        trusted (`supersede.may_replace`). Returns the uid of the memory it superseded, if any."""
        if item.kind not in supersede.SUPERSEDABLE_KINDS:
            return None
        restated = self.store.live_by_uid(conn, uid)
        if restated is None or restated.superseded_by is None:
            return None
        newest, seen = restated, {restated.uid}
        while newest.superseded_by is not None and newest.superseded_by not in seen:
            later = self.store.live_by_uid(conn, newest.superseded_by)
            if later is None:
                break
            seen.add(later.uid)
            newest = later
        if item.created_at is not None and item.created_at < newest.created_at:
            return None
        if not supersede.may_replace(item.source, newest.source):
            return None
        self.store.make_current(conn, [restated.id])
        if newest is restated:
            return None
        self.store.supersede(conn, [newest.id], restated.uid)
        return newest.uid

    def _newer_restating(self, conn: Any, memory: Memory) -> Memory | None:
        """The newest current memory of `memory`'s project and kind, newer than it, that
        restates it with changed details: what would have superseded it, had it been live
        when that one was stored (`_candidates`; the rule's limits as at ingest)."""
        if not self.settings.supersede or memory.kind not in supersede.SUPERSEDABLE_KINDS:
            return None
        return _newest_restating(memory, self._candidates(conn, memory))

    def _candidates(self, conn: Any, memory: Memory, query: str | None = None,
                    source: str | None = None) -> list[Memory]:
        """The current memories of `memory`'s project and kind (and `source`, when given;
        itself left out) that may restate it: the porter BM25 channel's best few for its text
        (or `query`, shorter), so a write costs one
        small search; without that channel (PostgreSQL, whose full-text channel would cache
        corpus statistics from inside this write), or for a text holding CJK (a run is one
        token to porter), the memories of the project and kind holding the most of its
        `supersede.probe_words`, newest first among equals (pg_trgm answers the ILIKEs).
        Not the trigram channel: its
        remembered phrase counts, taken inside this write, would steer later searches."""
        channel = next((c for c in self.channels if c.name == SUPERSEDE_CHANNEL), None)
        try:
            found: list[Memory] = []
            if channel is not None:
                filters = RecallFilters(project=memory.project, kind=memory.kind, source=source)
                hits = channel.search(conn, query or memory.content, SUPERSEDE_CANDIDATES,
                                      filters)
                found = list(self.store.load(
                    conn, [h.id for h in hits if h.id != memory.id]).values())
            probe = supersede.probe_words(memory.content) if channel is None or \
                supersede.has_cjk(memory.content) else []  # a CJK run: one token to porter
            if probe:
                seen = {m.id for m in found}
                found += [m for m in self.store.containing(
                    conn, memory, probe, SUPERSEDE_CANDIDATES * 4, source) if m.id not in seen]
        except Exception as exc:  # a write never fails for a missed supersession
            log.warning("supersession: candidate search failed: %s", exc)
            return []
        return [m for m in found
                if m.project == memory.project and m.kind == memory.kind and not m.deleted
                and m.superseded_by is None]

    def _skip_restored(self, conn: Any, accepted: list[tuple[int, NewMemory]],
                       results: list[IngestResult]) -> list[tuple[int, NewMemory]]:
        """Leave out restored items whose uid is already stored (an import run twice): they
        are `duplicate`, and the stored memory stays as it is."""
        known = self.store.known_uids(
            conn, [item.uid for _, item in accepted if item.uid is not None])
        kept = []
        for position, item in accepted:
            if item.uid in known:
                results[position] = IngestResult("duplicate", uid=item.uid)
            else:
                kept.append((position, item))
                if item.uid is not None:
                    known.add(item.uid)  # the same uid twice in one batch: the first wins
        return kept

    def _insert_batch(
        self, conn: Any, accepted: list[tuple[int, NewMemory]], results: list[IngestResult]
    ) -> list[Memory]:
        """Exact-dedup a batch and insert its new memories in one store call. Used when no
        channel needs items indexed one by one (near-duplicates). Returns the new memories."""
        ts = now()
        keys = [(item.project, content_hash(item.content)) for _, item in accepted]
        known = self.store.live_by_hash(conn, keys)  # (project, hash) -> (id, uid), live
        captured = [key for (_, item), key in zip(accepted, keys, strict=True)
                    if _captured(item) and key not in known]
        forgotten = self.store.forgotten_by_hash(conn, captured) if captured else {}
        unheld = [key for key in captured if key not in forgotten]
        purged = self.store.purged_by_hash(conn, unheld) if unheld else set()
        later: dict[tuple[str | None, str], str] = {}  # the same for items earlier in the batch
        refresh: list[int] = []
        duplicates: list[tuple[int, NewMemory]] = []  # answered `duplicate` of a live memory
        rows: list[tuple[int, Memory]] = []
        for (position, item), key in zip(accepted, keys, strict=True):
            # A forgotten memory being restored is not live: it neither dedups nor is deduped.
            uid = None if item.forgotten else (known[key][1] if key in known
                                               else later.get(key))
            if uid is None and key in forgotten and _captured(item):
                results[position] = _forgotten_duplicate(forgotten[key][1])
                continue
            if uid is None and key in purged and _captured(item):
                results[position] = _purged_duplicate()
                continue
            if uid is not None:
                if key in known:
                    refresh.append(known[key][0])
                results[position] = IngestResult("duplicate", uid=uid)
                duplicates.append((position, item))
                continue
            row = _new_row(item, item.uid or secrets.token_hex(8), ts)
            if not item.forgotten:
                later[key] = row.uid
            rows.append((position, row))
        stored = self.store.insert(conn, [row for _, row in rows]) if rows else []
        inserted = []
        for (position, _), (memory, new) in zip(rows, stored, strict=True):
            results[position] = IngestResult("new" if new else "duplicate", uid=memory.uid)
            if new:
                inserted.append(memory)
            else:  # another writer stored the same text first (a shared store)
                refresh.append(memory.id)
        self.store.touch(conn, refresh, ts)
        if duplicates:  # one query for the batch's duplicates of memories stored before it
            held = {m.uid: m for m in self.store.load(conn, [i for i, _ in known.values()])
                    .values()} | {m.uid: m for m in inserted}
            for position, item in duplicates:
                results[position] = _not_applied(results[position], item,
                                                 held.get(results[position].uid or ""))
        return inserted

    def _insert_or_refresh(
        self, conn: Any, item: NewMemory, dedupers: list[Prepares],
        prepared: dict[str, Any] | None = None,
    ) -> tuple[IngestResult, Memory | None]:
        ts = now()
        key = (item.project, content_hash(item.content))
        existing = None if item.forgotten else self.store.live_by_hash(conn, [key]).get(key)
        if existing is None and _captured(item):
            forgotten = self.store.forgotten_by_hash(conn, [key]).get(key)
            if forgotten is not None:
                return _forgotten_duplicate(forgotten[1]), None
            if self.store.purged_by_hash(conn, [key]):
                return _purged_duplicate(), None
        # near-duplicates: channels with find_duplicate (e.g. vectors), when the texts also
        # have the same details (a changed number is an update, not a duplicate); a restored
        # memory (an import or migration of one already judged) is only checked for its exact
        # text
        if existing is None and not item.forgotten and item.uid is None:
            for channel in dedupers:
                name = channel.name  # type: ignore[attr-defined]
                try:
                    dup_id = channel.find_duplicate(conn, item, (prepared or {}).get(name))
                except Exception as exc:  # noqa: BLE001 - no verdict: store it as new
                    log.warning("channel %s: find_duplicate failed (%s)", name, one_line(exc))
                    continue
                if dup_id is not None:
                    found = self.store.load(conn, [dup_id]).get(dup_id)
                    # a grown flush of an exchange is close to its shorter copy: it replaces
                    # that copy (`_outgrown`), merged into it what was added would be lost
                    if found is not None and found.project == item.project \
                            and not grows(found, item) \
                            and supersede.same_details(found.content, item.content):
                        existing = (found.id, found.uid)
                        break
        if existing is None:
            memory, new = self.store.insert(
                conn, [_new_row(item, item.uid or secrets.token_hex(8), ts)])[0]
            if new:
                return IngestResult("new", uid=memory.uid), memory
            existing = (memory.id, memory.uid)  # another writer stored it first
        self.store.touch(conn, [existing[0]], ts)
        held = self.store.load(conn, [existing[0]]).get(existing[0])
        return _not_applied(IngestResult("duplicate", uid=existing[1]), item, held), None

    def update(self, uid: str, *, content: str | None = None, kind: str | None = None,
               tags: list[str] | None = None, project: str | None = None,
               if_version: str | None = None) -> UpdateResult:
        """Edit a live memory in place: the uid, id, created_at, source and session stay,
        `updated_at` moves, and the version replaced is kept as a revision. A field left None
        stays as it is; `project=""` makes the memory global. The new version goes through the
        ingest filters (redaction, injection filter) like any write; a refusal changes nothing.

        Re-indexing keeps the row id: the FTS5 channels' triggers re-index `UPDATE OF content`,
        every channel's `index` then runs again on the new row (with the new text's embedding)
        after its `forget` dropped what an upsert would not replace.

        `if_version` (the `edit_version` the caller read) makes the edit conditional: when the
        stored memory's version differs, nothing changes and the answer is `conflict`; checked
        inside the write transaction, so no write can slip in between. Without it the last
        edit wins, as ever.

        Raises UnknownMemory (no live memory `uid`) or InvalidMemory (a bad field, or nothing
        given to change). Returns `updated`, `unchanged` (the same values: no revision),
        `rejected` (by a filter), `duplicate` (another live memory holds the new text: the
        edit is refused rather than merged, so no memory disappears by surprise) or
        `conflict`."""
        if content is None and kind is None and tags is None and project is None:
            raise InvalidMemory("nothing to change: give content, kind, tags or project")
        current = self.store.get(uid) if isinstance(uid, str) and UID.match(uid) else None
        if current is None or current.deleted:
            raise UnknownMemory(f"no live memory with uid {str(uid)[:80]!r}")
        item = _edited(current, content, kind, tags, project)
        validate(item, self.settings.max_content_chars)
        try:
            run_filters(self.pm, item, self.settings)  # validates what each filter left
        except (Rejected, InvalidMemory) as exc:
            return UpdateResult("rejected", current, reason=str(exc))
        if item.content != current.content and item.content.strip() == current.content.strip():
            # only the whitespace at an end differs (where a cut <private> span stood): the
            # same text, not a new version
            item = replace(item, content=current.content)
        changed_text = item.content != current.content
        # embed outside the write lock; a deferred channel (the service's embedding queue)
        # not at all: its old vector is dropped with the edit, so the queue embeds the new
        # text, and an edit never waits for a model in the write lane
        preparers = [c for c in self._preparers if c.active and not self._deferred(c)] \
            if changed_text else []
        prepared = {name: values[0]
                    for name, values in self._prepare(preparers, [item]).items()}
        given = frozenset(name for name, value in (
            ("content", content), ("kind", kind), ("tags", tags), ("project", project))
            if value is not None)
        with self.store.write() as conn:
            result = self._write_edit(conn, uid, item, given, prepared, if_version)
        if result.status == "updated" and changed_text:
            self._committed(result.memory.id)
        return result

    def _write_edit(self, conn: Any, uid: str, item: NewMemory, given: frozenset[str],
                    prepared: dict[str, Any], if_version: str | None) -> UpdateResult:
        """The write half of `update`, in its transaction: the memory is read again there, so
        a concurrent forget, edit or write of the same text is seen, and the fields this edit
        does not give (`given`) are kept as they are now, not as they were read before the
        lock: a content edit racing a tag edit keeps both."""
        old = self.store.live_by_uid(conn, uid)
        if old is None:  # forgotten since it was read
            raise UnknownMemory(f"no live memory with uid {uid[:80]!r}")
        if if_version is not None and if_version != edit_version(old):
            return UpdateResult("conflict", old, reason=(
                f"changed since you opened it: memory {uid} was changed at "
                f"{iso(old.updated_at)}; nothing was saved, reload it to see that version"))
        content = item.content if "content" in given else old.content
        kind = item.kind if "kind" in given else old.kind
        project = item.project if "project" in given else old.project
        tags = sorted(set(item.tags)) if "tags" in given else old.tags
        new = Memory(old.id, old.uid, content, kind, old.source, project, tags,
                     old.created_at, old.updated_at, False, old.session, old.seq)
        if (new.content, new.kind, new.project, new.tags) == \
                (old.content, old.kind, old.project, old.tags):
            return UpdateResult("unchanged", old)
        if (new.content, new.project) != (old.content, old.project):
            key = (new.project, content_hash(new.content))
            other = self.store.live_by_hash(conn, [key]).get(key)
            if other is not None and other[1] != uid:
                return UpdateResult("duplicate", old, reason=(
                    f"content: memory {other[1]} already holds this text in this project; "
                    "forget one of the two instead"), duplicate_of=other[1])
        new.updated_at = max(now(), old.updated_at)
        self.store.replace(conn, old, new, new.updated_at)
        if new.content != old.content:
            self._reindex(conn, new, prepared)
            with self._marks_lock:  # a new text: the queue tries it afresh, never merges it
                self._retry.pop(new.id, None)
                self._refused.discard(new.id)
            self._mark_unmerged(new.id)
        new.superseded_by = old.superseded_by
        if (new.content, new.kind, new.project) != (old.content, old.kind, old.project):
            self._recheck_replaced(conn, new)
            if self._recheck_replacer(conn, old, new):
                new.superseded_by = None
        return UpdateResult("updated", new)

    def _recheck_replaced(self, conn: Any, memory: Memory) -> None:
        """After an edit of `memory`'s text, kind or project: the memories it had replaced
        that it no longer restates (by the rule, in its project and kind) are current again,
        as when it is forgotten; left replaced, nothing would show them."""
        replaced = [m for m in (self.store.get(uid) for uid in self.store.supersedes(memory.uid))
                    if m is not None]
        stale = [m.id for m in replaced
                 if not (m.project == memory.project and m.kind == memory.kind
                         and supersede.supersedes(m.content, memory.content))]
        if stale:
            self.store.make_current(conn, stale)

    def _recheck_replacer(self, conn: Any, old: Memory, new: Memory) -> bool:
        """After an edit of a superseded memory's text, kind or project (`old` -> `new`):
        whether it is current again, because the edit unlinked it from the memory that
        replaced it. Moved to another project or kind than that one's (the rule links only
        within one), or restated by it before the edit and not after. A replacement the rule
        never made (an explicit `replaces`) stays when only the text changed: a person said
        so. Left superseded, nothing would show the memory edited."""
        if old.superseded_by is None:
            return False
        by = self.store.live_by_uid(conn, old.superseded_by)
        if by is None:  # names no live memory (`clear_dangling_supersessions`)
            unlinked = True
        else:
            def restated(m: Memory) -> bool:
                return (m.project, m.kind) == (by.project, by.kind) \
                    and supersede.supersedes(m.content, by.content)

            moved = (new.project, new.kind) != (old.project, old.kind) \
                and (new.project, new.kind) != (by.project, by.kind)
            unlinked = moved or (restated(old) and not restated(new))
        if unlinked:
            self.store.make_current(conn, [new.id])
        return unlinked

    def unforget(self, uid: str) -> tuple[Memory | None, str | None]:
        """Take a forget back (`store.restore_forgotten`, whose answer this is), in one write
        transaction with what the memory needs to stay back:

        - its vector, as an edit's: in a one-off command embedded before the lock; in a
          service left to the embedding queue (a stuck model never holds an unforget), with
          the memory marked as an edit is (`_edited`): a person brought it back, and the
          queue would judge a memory created since the service started a near-duplicate again
          and merge it away within seconds;
        - its place among supersessions: a fact, preference or decision that a newer current
          memory of its project and kind restates with changed details (stored while it was
          forgotten: 6544 forgotten, 6546 stored, 6544 brought back) comes back superseded by
          that one, as it would be had it stayed live; brought back current, it stood beside
          the newer value in recall."""
        found = self.store.get(uid)
        channels: list[Prepares] = []
        prepared: dict[str, list[Any]] = {}
        if found is not None and found.deleted:
            channels = [c for c in self._preparers if c.active and isinstance(c, Deferrable)
                        and not self._deferred(c)]
            prepared = self._prepare(channels, [NewMemory(
                found.content, kind=found.kind, source=found.source, project=found.project)])
        with self.store.write() as conn:
            found, holder = self.store.restore_forgotten(conn, uid, now())
            if found is None or not found.deleted or holder is not None:
                return found, holder
            memory = replace(found, deleted=False)
            for channel in channels:
                values = prepared.get(channel.name)  # type: ignore[attr-defined]
                if values and values[0] is not None:
                    self._index(conn, channel, [memory], values)  # type: ignore[arg-type]
            self._mark_unmerged(memory.id)
            if memory.superseded_by is None:  # replaced before its forget: history still
                newer = self._newer_restating(conn, memory)
                if newer is not None:
                    self.store.supersede(conn, [memory.id], newer.uid)
        self._committed(memory.id)
        return found, None

    def _mark_unmerged(self, memory_id: int) -> None:
        """Inside an edit's or unforget's write transaction, where the queue embeds this
        memory: mark it never to be merged (`_edited`), before any batch can see it."""
        if self.defer and any(c.active and self._deferred(c) for c in self._preparers):
            with self._marks_lock:
                self._edited[memory_id] = float("inf")

    def _committed(self, memory_id: int) -> None:
        """After that transaction committed: the mark may go once a later look at the queue
        misses the memory (`_drop_marks_of_gone`), and the queue, perhaps asleep, is woken."""
        with self._marks_lock:
            if memory_id not in self._edited:
                return
            self._edited[memory_id] = time.monotonic()
        self.queued.set()

    def _reindex(self, conn: Any, memory: Memory, prepared: dict[str, Any]) -> None:
        """Index an edited memory again in every channel (inside the edit's transaction)."""
        self.forget_ids(conn, [memory.id])
        for channel in self.channels:
            self._index(conn, channel, [memory],
                        [prepared[channel.name]] if channel.name in prepared else None)

    # --- the embedding queue (Deferrable channels) ---------------------------------------

    def catch_up(self, limit: int = 64, retry_s: float | None = None) -> int:
        """One batch of the embedding queue: for each active `Deferrable` channel, prepare
        (embed) up to `limit` memories it has not indexed, outside the write lock, then index
        them; a memory whose vector shows it near-duplicates an older one (`find_duplicate`)
        is merged into it, as ingest would have. Returns how many memories were handled (0:
        nothing to do now). A batch that made no vector waits `retry_s` (EMBED_RETRY_S)
        before it is tried again (`retry_in` says when), so a model that is down never spins
        the queue and one that is back finds its memories again (`_retry`, `_refused`)."""
        retry_s = EMBED_RETRY_S if retry_s is None else retry_s
        handled = 0
        for channel in self._preparers:
            if not (channel.active and isinstance(channel, Deferrable)):
                continue
            name = channel.name  # type: ignore[attr-defined]
            clock = time.monotonic()
            with self._marks_lock:
                skip = self._refused | {i for i, m in self._retry.items() if m.due > clock}
            with self.store.snapshot() as conn:
                asked = limit + len(skip)
                pending = channel.pending_ids(conn, asked)
                self._drop_marks_of_gone(pending, asked, clock)
                ids = [i for i in pending if i not in skip][:limit]
                waiting = self.store.load(conn, ids)
            memories = [m for m in waiting.values() if not m.deleted]
            if not memories:
                continue
            values = self._prepare([channel], [
                NewMemory(m.content, kind=m.kind, source=m.source, project=m.project)
                for m in memories]).get(name)
            if values is None or all(v is None for v in values):  # the model's failure
                self._mark_failed([m.id for m in memories], retry_s)
                continue
            self._embedded([m.id for m in memories])
            with self.store.write() as conn:
                current = self.store.load(conn, [m.id for m in memories])
                for memory, value in zip(memories, values, strict=True):
                    now_memory = current.get(memory.id)
                    if now_memory is None or now_memory.deleted \
                            or now_memory.content != memory.content:
                        continue  # forgotten or edited meanwhile: the edit queued it again
                    if value is None:  # the model made vectors, not this text's: refused
                        with self._marks_lock:
                            self._refused.add(memory.id)
                        continue
                    handled += 1
                    # judged before its own vector is stored (its nearest would be itself);
                    # a memory merged keeps its vector, as any forgotten one does: brought
                    # back (`unforget`), it is not in the queue to be judged again
                    with self._marks_lock:  # embedded now: an edit marks it again
                        edited = self._edited.pop(memory.id, None) is not None
                    if not edited:
                        self._merge_if_duplicate(conn, channel, memory, value)
                    self._index(conn, channel, [memory], [value])  # type: ignore[arg-type]
        return handled

    def _mark_failed(self, ids: list[int], retry_s: float) -> None:
        """A batch made no vector: its memories wait for the retry, each doubling its wait
        per failure in a row; one retried alone that fails again after the model embedded
        others since is refused (the text, not the model: a lone NaN row looks the same)."""
        clock = time.monotonic()
        with self._marks_lock:
            for i in ids:
                before = self._retry.get(i)
                if len(ids) == 1 and before is not None and before.failed_at < self._embedded_at:
                    self._retry.pop(i)
                    self._refused.add(i)
                    continue
                failures = before.failures + 1 if before is not None else 1
                wait = min(retry_s * 2 ** (failures - 1), max(retry_s, EMBED_RETRY_MAX_S))
                self._retry[i] = _Retry(clock + wait, clock, failures)

    def _embedded(self, ids: list[int]) -> None:
        """The model made vectors again (for some of `ids`): every memory waiting for a retry
        is due now."""
        with self._marks_lock:
            self._embedded_at = time.monotonic()
            for i in ids:
                self._retry.pop(i, None)
            for i, mark in self._retry.items():
                self._retry[i] = _Retry(0.0, mark.failed_at, mark.failures)

    def _drop_marks_of_gone(self, pending: list[int], asked: int, since: float) -> None:
        """Forget the marks of memories no longer in the queue (forgotten, purged, embedded
        by `backfill`; brought back with their vector): `pending` holds every waiting id up
        to its last, or all of them, read after monotonic time `since`. An edit's mark goes
        only when its write committed before `since` (`_committed`): the read saw it."""
        last = pending[-1] if len(pending) >= asked else None
        waiting = set(pending)

        def gone(i: int) -> bool:
            return i not in waiting and (last is None or i < last)

        with self._marks_lock:
            for i in [i for i in (*self._retry, *self._refused) if gone(i)]:
                self._retry.pop(i, None)
                self._refused.discard(i)
            for i in [i for i, at in self._edited.items() if at < since and gone(i)]:
                del self._edited[i]

    def retry_in(self) -> float | None:
        """Seconds until the first memory waiting for a retry is due (0: now), None when none
        waits: the queue sleeps until then, not a whole rescan."""
        with self._marks_lock:
            if not self._retry:
                return None
            return max(0.0, min(m.due for m in self._retry.values()) - time.monotonic())

    def refused(self) -> int:
        """Memories the queue will not embed in this process (their model refused their text):
        found by their words; `backfill` or a restart tries them again."""
        with self._marks_lock:
            return len(self._refused)

    def _merge_if_duplicate(self, conn: Any, channel: Prepares, memory: Memory,
                            value: Any) -> None:
        """When `memory` near-duplicates an older live one (with the same details) now that
        its vector is known, forget it: the older one takes its place, one line in the log as
        every forget is. Only a memory created since this process began (`defer_since`):
        ingest never judged it."""
        if value is None or memory.created_at < self.defer_since:
            return
        probe = NewMemory(memory.content, kind=memory.kind, source=memory.source,
                          project=memory.project)
        try:
            dup = channel.find_duplicate(conn, probe, value)
        except Exception as exc:  # noqa: BLE001 - no verdict: keep it
            log.warning("channel %s: find_duplicate failed (%s)",
                        channel.name, one_line(exc))  # type: ignore[attr-defined]
            return
        if dup is None or dup == memory.id:
            return
        older = self.store.load(conn, [dup]).get(dup)
        if older is None or older.project != memory.project \
                or not supersede.same_details(older.content, memory.content):
            return
        if grows(older, memory) or grows(memory, older):  # one exchange flushed twice:
            return  # the longer replaced the shorter at ingest (`_outgrown`), nothing is lost
        self.store.merge_duplicate(conn, memory.id, dup, now())
        log.info("forgot memory %s (near-duplicate of %s)", memory.uid, older.uid)

    def pending(self) -> int:
        """Memories waiting in the embedding queue (all `Deferrable` channels): not those it
        refused (`refused`), which it will not embed; `stats.embedder.missing` counts them."""
        total = 0
        with self._marks_lock:
            refused = set(self._refused)
        with self.store.snapshot() as conn:
            for channel in self._preparers:
                if channel.active and isinstance(channel, Deferrable):
                    count = channel.pending_count(conn)
                    if refused and count:
                        count -= len(refused.intersection(channel.pending_ids(conn, count)))
                    total += count
        return total
