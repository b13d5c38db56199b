"""The core pipeline: ingest -> filters -> dedup -> store + index; recall -> channels -> fuse ->
post-process -> injection block. Interfaces (CLI, MCP, REST) all go through `MemoryEngine`."""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import secrets
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from . import neighbours
from .channels import Channel
from .config import Settings
from .default_plugins.redaction import redact
from .errors import InvalidMemory, Rejected
from .fusion import keyword_gated_weights, keyword_leads, rrf, score_fusion, with_share
from .models import (
    EXPIRING_KIND,
    MAX_PROJECT_CHARS,
    MAX_SESSION_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    ChannelHit,
    IngestResult,
    Memory,
    NewMemory,
    RecallFilters,
    RecallHit,
    now,
)
from .plugins import PluginManager, build_plugin_manager
from .store import MEMORY_COLUMNS, Store, content_hash, row_to_memory
from .telemetry import INJECTION_COLUMNS, memory_injections, per_day, row_to_dict

log = logging.getLogger("semantic_memory")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_UID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_RECALL_K = 200
#: What every interface says while recall is by words only (no embedder set up).
KEYWORD_MODE_NOTE = (
    "Recall is by words until an embedder is set up (MEMORY_MODEL_PATH, see docs/vector.md): "
    "a query finds memories that share its words, not a rephrasing of them."
)
#: The fields of an export line, in order (`forgotten` is added to forgotten memories only).
EXPORT_FIELDS = ("uid", "content", "kind", "source", "project", "tags", "created_at",
                 "updated_at", "session", "seq")
DAY = 86_400.0
#: Days of per-day injection counts in the telemetry summary (the browse page's chart).
SUMMARY_DAYS = 30
#: Columns whose distinct values `values()` offers (completion, filter lists).
VALUE_COLUMNS = ("project", "kind", "source")

#: One statement inserting a JSON array of rows (needs RETURNING: SQLite 3.35+); None = row by
#: row. Column order: uid, content, content_hash, kind, source, project, tags, created, updated,
#: deleted, session, seq.
_BATCH_INSERT = (
    "INSERT INTO memories (uid, content, content_hash, kind, source, project, tags, created_at, "
    "updated_at, deleted, session, seq) SELECT "
    + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(12))
    + " FROM json_each(?) ORDER BY key RETURNING id, uid"
    if sqlite3.sqlite_version_info >= (3, 35) else None
)


def validate(memory: NewMemory, max_chars: int) -> None:
    """Raise InvalidMemory with a one-line reason naming the field."""
    if not isinstance(memory.content, str):
        raise InvalidMemory("content: must be a string")
    if not memory.content.strip():
        raise InvalidMemory("content: must not be empty")
    if len(memory.content) > max_chars:
        raise InvalidMemory(
            f"content: {len(memory.content)} characters exceeds the limit of {max_chars}"
        )
    if "\x00" in memory.content:
        raise InvalidMemory("content: contains NUL characters (binary data is not stored)")
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
    if not isinstance(memory.tags, list) or len(memory.tags) > MAX_TAGS:
        raise InvalidMemory(f"tags: expected a list of at most {MAX_TAGS} strings")
    for tag in memory.tags:
        if not isinstance(tag, str) or not 0 < len(tag) <= MAX_TAG_CHARS:
            raise InvalidMemory(f"tags: each tag must be a string of 1..{MAX_TAG_CHARS} characters")
    for name in ("created_at", "updated_at"):
        value = getattr(memory, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InvalidMemory(f"{name}: expected unix seconds")
    if memory.uid is not None and (not isinstance(memory.uid, str) or not _UID.match(memory.uid)):
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


def select_embedder(embedders: list[Any], name: str = "") -> Any | None:
    """The embedder named `name` (MEMORY_EMBEDDER), else the first registered; None if none."""
    if name:
        for embedder in embedders:
            if getattr(embedder, "name", None) == name:
                return embedder
        log.warning("MEMORY_EMBEDDER=%s is not registered; using %s", name,
                    getattr(embedders[0], "name", "?") if embedders else "none")
    return embedders[0] if embedders else None


def _place_in_sessions(conn: Any, items: list[NewMemory], batch_session: bool) -> None:
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
            last = conn.execute("SELECT max(seq) FROM memories WHERE session = ?",
                                (item.session,)).fetchone()[0]
            next_seq[item.session] = 0 if last is None else last + 1
        item.seq = next_seq[item.session]
        next_seq[item.session] += 1


def _times(item: NewMemory, ts: float) -> tuple[float, float]:
    """(created_at, updated_at) of a new row: the item's own when it brings them, else now."""
    created = float(item.created_at) if item.created_at is not None else ts
    if item.updated_at is not None:
        return created, float(item.updated_at)
    return created, created if item.created_at is not None else ts


def _recall_mode(embedder_info: dict[str, Any] | None) -> str:
    return "keyword" if embedder_info is None or embedder_info.get("active") is False \
        else "hybrid"


def _memory_totals(conn: Any) -> tuple[int, int]:
    """(live, forgotten-not-yet-purged) memories, from two indexes (no table scan)."""
    total = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    forgotten = conn.execute("SELECT count(*) FROM memories WHERE deleted = 1").fetchone()[0]
    return total - forgotten, forgotten


def _injection_totals(conn: Any) -> dict[str, int]:
    """Injection reports, all and of the last 7 days, and the characters they injected."""
    total, last_7_days, chars, chars_7_days = conn.execute(
        "SELECT count(*), coalesce(sum(ts >= ?1), 0), coalesce(sum(chars), 0), "
        "coalesce(sum(CASE WHEN ts >= ?1 THEN chars ELSE 0 END), 0) FROM injections",
        (now() - 7 * DAY,)).fetchone()
    return {"total": total, "last_7_days": last_7_days, "chars": chars,
            "last_7_days_chars": chars_7_days}


@dataclass
class PurgeReport:
    soft_deleted: int = 0
    expired_artifacts: int = 0
    expired_injections: int = 0
    vacuumed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class MemoryEngine:
    """One open store with its plugins. Thread-safe; share one per process."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        plugins: Iterable[Any] = (),
        plugin_manager: PluginManager | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env()
        self._executor: ThreadPoolExecutor | None = None  # recall's pool, made on first use
        self._pool_lock = threading.Lock()
        self._cost: dict[str, float] = {}  # channel -> smoothed seconds per search
        self.pm = plugin_manager or build_plugin_manager(self.settings, tuple(plugins))
        self.store = Store(self.settings.resolved_db_path)
        self.embedders: list[Any] = []
        self.pm.hook.register_embedders(register=self.embedders.append, settings=self.settings)
        self.embedder = select_embedder(self.embedders, self.settings.embedder)
        self.channels: list[Channel] = []
        self.pm.hook.register_channels(register=self.channels.append, settings=self.settings)
        self.channels.sort(key=lambda c: c.name)
        for channel in self.channels:  # optional: channels that embed get the configured embedder
            use = getattr(channel, "use_embedder", None)
            if callable(use):
                use(self.embedder)
        configured = self.settings.weights()
        self.weights = {c.name: configured.get(c.name, c.weight) for c in self.channels}
        with self.store.write() as conn:
            for channel in self.channels:
                channel.setup(conn)

    # --- write path ------------------------------------------------------------------------

    def ingest(self, items: list[NewMemory], *, batch_is_session: bool = True
               ) -> list[IngestResult]:
        """Store a batch in one transaction. Invalid input raises InvalidMemory before anything
        is written; a filter's refusal is reported per item as `rejected`. Items without a
        session of their own share the batch's, unless `batch_is_session` is False (a bulk
        load cut into batches, whose neighbours mean nothing)."""
        for item in items:
            validate(item, self.settings.max_content_chars)
        batch_session = batch_is_session and len(items) > 1  # one memory alone has no neighbours
        accepted: list[tuple[int, NewMemory]] = []
        results: list[IngestResult] = [IngestResult("rejected")] * len(items)
        for position, item in enumerate(items):
            try:
                self.pm.hook.filter_ingest(memory=item, settings=self.settings)
                validate(item, self.settings.max_content_chars)  # a filter may have emptied it
            except (Rejected, InvalidMemory) as exc:
                results[position] = IngestResult("rejected", reason=str(exc))
                continue
            accepted.append((position, item))
        if not accepted:
            return results
        # Optional channel step outside the write lock (e.g. embedding): one value per item,
        # handed to that channel's find_duplicate and index.
        prepared: dict[str, list[Any]] = {}
        for channel in self.channels:
            prepare = getattr(channel, "prepare", None)
            if callable(prepare):
                prepared[channel.name] = list(prepare([item for _, item in accepted]))
        if not prepared and _BATCH_INSERT and not any(
            callable(getattr(c, "find_duplicate", None)) for c in self.channels
        ):
            with self.store.write() as conn:
                accepted = self._skip_restored(conn, accepted, results)
                _place_in_sessions(conn, [item for _, item in accepted], batch_session)
                inserted = self._insert_batch(conn, accepted, results)
                if inserted:
                    for channel in self.channels:
                        channel.index(conn, inserted)
            return results
        with self.store.write() as conn:
            kept = {position for position, _ in self._skip_restored(conn, accepted, results)}
            _place_in_sessions(conn, [item for position, item in accepted if position in kept],
                               batch_session)
            for n, (position, item) in enumerate(accepted):
                if position not in kept:
                    continue
                mine = {name: values[n] for name, values in prepared.items()}
                result, memory = self._insert_or_refresh(conn, item, mine)
                results[position] = result
                if memory is None:
                    continue
                # index item by item, so a later item of the batch can dedup against it
                for channel in self.channels:
                    if channel.name in mine:
                        channel.index(conn, [memory], [mine[channel.name]])  # type: ignore[call-arg]
                    else:
                        channel.index(conn, [memory])
        return results

    def store_one(self, item: NewMemory) -> IngestResult:
        return self.ingest([item])[0]

    @staticmethod
    def _skip_restored(conn: Any, accepted: list[tuple[int, NewMemory]],
                       results: list[IngestResult]) -> list[tuple[int, NewMemory]]:
        """Leave out restored items whose uid is already stored (an import run twice): they
        are `duplicate`, and the stored memory stays as it is."""
        uids = [item.uid for _, item in accepted if item.uid is not None]
        known: set[str] = set()
        for start in range(0, len(uids), 500):
            chunk = uids[start : start + 500]
            known.update(uid for (uid,) in conn.execute(
                f"SELECT uid FROM memories WHERE uid IN ({','.join('?' * len(chunk))})", chunk))
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
        """Exact-dedup a batch (one lookup per 500 hashes) and insert its new memories with a
        few multi-row INSERTs. FTS5 flushes its pending index at every statement boundary, so
        the channels' insert triggers cost ~3x less per row in one big statement than in one
        statement per row. Used when no channel needs items indexed one by one (near-dup)."""
        ts = now()
        digests = [content_hash(item.content) for _, item in accepted]
        known: dict[str, tuple[int | None, str]] = {}  # hash -> (id or None if new here, uid)
        unique = list(dict.fromkeys(digests))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            for digest, id_, uid in conn.execute(
                "SELECT content_hash, id, uid FROM memories WHERE deleted = 0 AND content_hash "
                f"IN ({','.join('?' * len(chunk))})", chunk,
            ):
                known.setdefault(digest, (id_, uid))
        refresh_ids: list[int] = []
        refresh_uids: list[str] = []
        rows: list[list[Any]] = []
        for (position, item), digest in zip(accepted, digests):
            # A forgotten memory being restored is not live: it neither dedups nor is deduped.
            hit = None if item.forgotten else known.get(digest)
            if hit is not None:
                if hit[0] is None:
                    refresh_uids.append(hit[1])
                else:
                    refresh_ids.append(hit[0])
                results[position] = IngestResult("duplicate", uid=hit[1])
                continue
            uid = item.uid or secrets.token_hex(8)
            if not item.forgotten:
                known[digest] = (None, uid)
            results[position] = IngestResult("new", uid=uid)
            created, updated = _times(item, ts)
            rows.append([uid, item.content, digest, item.kind, item.source, item.project,
                         sorted(set(item.tags)), created, updated, int(item.forgotten),
                         item.session, item.seq])
        ids: dict[str, int] = {}
        start = 0
        while start < len(rows):  # statements of <= 500 rows and ~8 MB of text
            end, size = start, 0
            while end < len(rows) and end - start < 500 and size < 8_000_000:
                size += len(rows[end][1])
                end += 1
            payload = json.dumps(
                [[*r[:6], json.dumps(r[6], ensure_ascii=False), *r[7:]] for r in rows[start:end]],
                ensure_ascii=False,
            )
            ids.update((uid, id_) for id_, uid in conn.execute(_BATCH_INSERT, (payload,)))
            start = end
        refresh_ids += [ids[uid] for uid in refresh_uids]
        for start in range(0, len(refresh_ids), 500):
            chunk = refresh_ids[start : start + 500]
            conn.execute(
                f"UPDATE memories SET updated_at = ? WHERE id IN ({','.join('?' * len(chunk))})",
                [ts, *chunk],
            )
        return [Memory(ids[r[0]], r[0], r[1], r[3], r[4], r[5], r[6], r[7], r[8], bool(r[9]),
                       r[10], r[11]) for r in rows]

    def _insert_or_refresh(
        self, conn: Any, item: NewMemory, prepared: dict[str, Any] | None = None
    ) -> tuple[IngestResult, Memory | None]:
        digest = content_hash(item.content)
        ts = now()
        existing = None if item.forgotten else conn.execute(
            "SELECT id, uid FROM memories WHERE content_hash = ? AND deleted = 0 LIMIT 1",
            (digest,),
        ).fetchone()
        # near-duplicates: channels with find_duplicate (e.g. vectors)
        if existing is None and not item.forgotten:
            for channel in self.channels:
                find = getattr(channel, "find_duplicate", None)
                if not callable(find):
                    continue
                dup_id = find(conn, item, (prepared or {}).get(channel.name))
                if dup_id is not None:
                    existing = conn.execute(
                        "SELECT id, uid FROM memories WHERE id = ?", (dup_id,)).fetchone()
                    if existing:
                        break
        if existing:
            conn.execute("UPDATE memories SET updated_at = ? WHERE id = ?", (ts, existing[0]))
            return IngestResult("duplicate", uid=existing[1]), None
        created, updated = _times(item, ts)
        uid = item.uid or secrets.token_hex(8)
        tags = sorted(set(item.tags))
        cursor = conn.execute(
            "INSERT INTO memories (uid, content, content_hash, kind, source, project, tags, "
            "created_at, updated_at, deleted, session, seq) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (uid, item.content, digest, item.kind, item.source, item.project,
             json.dumps(tags, ensure_ascii=False), created, updated, int(item.forgotten),
             item.session, item.seq),
        )
        memory = Memory(cursor.lastrowid, uid, item.content, item.kind, item.source,
                        item.project, tags, created, updated, item.forgotten, item.session,
                        item.seq)
        return IngestResult("new", uid=uid), memory

    def forget(self, uid: str) -> bool:
        """Soft-delete one memory; False when no live memory has this uid."""
        with self.store.write() as conn:
            cursor = conn.execute(
                "UPDATE memories SET deleted = 1, updated_at = ? WHERE uid = ? AND deleted = 0",
                (now(), uid),
            )
        return cursor.rowcount > 0

    # --- read path -------------------------------------------------------------------------

    def recall(
        self, query: str, k: int = 10, filters: RecallFilters | None = None, *,
        exclude: Callable[[Memory], bool] | None = None, relevant_only: bool = False,
    ) -> list[RecallHit]:
        """Search every channel, fuse with weighted RRF, post-process, bring the top hits'
        neighbours along (`neighbours.py`), return the top k.

        `exclude`: memories to leave out (e.g. those already in an agent's context).
        `relevant_only`: keep only hits a channel vouches for (`_vouched`): what an injection
        takes, where a ranked list of the nearest memories is not enough.
        """
        filters = filters or RecallFilters()
        k = max(1, min(int(k), MAX_RECALL_K))
        if not query or not query.strip():
            return []
        # Fusion needs slack below k: a fused top-k member may rank up to ~2k in one channel.
        depth = max(2 * k, self.settings.recall_depth)
        cheap = [c for c in self.channels if not getattr(c, "expensive", False)]
        expensive = [c for c in self.channels if getattr(c, "expensive", False)]
        keyword = [c.name for c in cheap]
        with self.store.snapshot() as conn:
            rankings: dict[str, list[int]] = {}
            scored: dict[str, list[tuple[int, float]]] = {}
            signals: dict[int, dict[str, float]] = {}

            def collect(channel: Channel, found: list[ChannelHit] | None) -> None:
                if found is None:
                    return
                rankings[channel.name] = [h.id for h in found]
                scored[channel.name] = [(h.id, h.score) for h in found]
                for h in found:
                    if h.signals:
                        signals.setdefault(h.id, {}).update(h.signals)

            found = self._search_at_once(cheap, conn, query, depth, filters)
            for channel in cheap:  # a fixed order: ties fuse the same way every time
                collect(channel, found[channel.name])
            # `expensive` channels (embedding the query) come after the cheap ones, skipped by
            # the keyword fast path when the keyword evidence is confident.
            confidence: float | None = None
            if expensive:
                confidence = self._keyword_confidence(conn, query, rankings)
            expensive_names = [c.name for c in expensive]
            for channel in expensive:
                if (self.settings.fast_path and confidence is not None
                        and confidence >= self.settings.fast_path_min
                        and keyword_leads(self.weights, keyword, expensive_names)):
                    continue
                collect(channel, self._search(channel, conn, query, depth, filters))
            answered = [c for c in expensive if c.name in rankings]
            gap = self.settings.neighbour_gap
            if gap < 0:  # 1, or the answering embedder's own
                gap = float(getattr(answered[0], "neighbour_gap", 1.0)) if answered else 1.0
            if answered and self.settings.fusion == "score":
                share = self.settings.fusion_vector_share
                if share < 0:  # the embedder's own
                    share = float(getattr(answered[0], "fusion_share", 0.5))
                weights = with_share(self.weights, [c.name for c in answered], share)
                fused = score_fusion(scored, weights, limit=depth)
            else:
                weights = keyword_gated_weights(self.weights, keyword,
                                                [c.name for c in answered], confidence,
                                                self.settings.fusion_gate_power)
                fused = rrf(rankings, weights, self.settings.rrf_k, limit=depth)
            memories = self._load(conn, [f.id for f in fused])
            hits = [
                RecallHit(memories[f.id], f.score, f.ranks, dict(signals.get(f.id, {})))
                for f in fused if f.id in memories
            ]
            self.pm.hook.modify_hits(query=query, hits=hits, settings=self.settings, conn=conn)
            hits.sort(key=lambda h: h.score, reverse=True)
            if exclude is not None:
                hits = [h for h in hits if not exclude(h.memory)]
            if relevant_only:
                hits = self._vouched(conn, query, hits, k)
            return neighbours.expand(conn, hits, k, self.settings.neighbours, gap, filters,
                                     exclude)

    def _vouched(self, conn: Any, query: str, hits: list[RecallHit], k: int) -> list[RecallHit]:
        """The best k hits that some channel vouches for, in rank order. Channels opt in with
        `relevant(conn, query, hits) -> set of ids` (BM25: IDF coverage of the query at least
        MEMORY_INJECT_MIN_COVERAGE; vector: cosine at least its floor). Hits are judged a page
        of k at a time, so a strong top k costs one page."""
        judges = [c for c in self.channels if callable(getattr(c, "relevant", None))]
        kept: list[RecallHit] = []
        for start in range(0, len(hits), k):
            page = hits[start : start + k]
            vouched: set[int] = set()
            for channel in judges:
                try:
                    vouched |= channel.relevant(conn, query, page)  # type: ignore[attr-defined]
                except Exception:  # noqa: BLE001 - no verdict from this channel
                    log.exception("channel %s relevance failed", channel.name)
            kept += [h for h in page if h.memory.id in vouched]
            if len(kept) >= k:
                break
        return kept[:k]

    def _search(
        self, channel: Channel, conn: Any, query: str, depth: int, filters: RecallFilters
    ) -> list[ChannelHit] | None:
        """One channel's hits; None when it fails (one broken channel must not take recall
        down). Keeps a smoothed search time per channel (`recall` plans with it)."""
        start = time.perf_counter()
        try:
            return channel.search(conn, query, depth, filters)
        except Exception:  # noqa: BLE001
            log.exception("channel %s failed; recall continues without it", channel.name)
            return None
        finally:
            took = time.perf_counter() - start
            self._cost[channel.name] = 0.8 * self._cost.get(channel.name, took) + 0.2 * took

    def _search_at_once(
        self, channels: list[Channel], conn: Any, query: str, depth: int, filters: RecallFilters
    ) -> dict[str, list[ChannelHit] | None]:
        """Every channel's hits, searched at the same time, each on its own read snapshot
        (SQLite releases the GIL while it searches). This thread takes the slowest channel so
        far and the pool the others: measured ~0.7 ms better at 100k memories than the other
        way round, as each thread's page cache keeps serving the same index."""
        by_cost = sorted(channels, key=lambda c: self._cost.get(c.name, 0.0), reverse=True)
        pending = [(c, self._pool().submit(self._search_own_snapshot, c, query, depth, filters))
                   for c in by_cost[1:]]
        found = {c.name: self._search(c, conn, query, depth, filters) for c in by_cost[:1]}
        found.update((c.name, future.result()) for c, future in pending)
        return found

    def _search_own_snapshot(
        self, channel: Channel, query: str, depth: int, filters: RecallFilters
    ) -> list[ChannelHit] | None:
        with self.store.snapshot() as conn:
            return self._search(channel, conn, query, depth, filters)

    def _pool(self) -> ThreadPoolExecutor:
        """Threads for channel searches beyond the caller's own (one per CPU, made once)."""
        with self._pool_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=os.cpu_count() or 2, thread_name_prefix="recall")
            return self._executor

    def _keyword_confidence(
        self, conn: Any, query: str, rankings: dict[str, list[int]]
    ) -> float | None:
        """How sure the cheap channels already are (0..1): the highest `confidence` any of
        them reports for its own ranking (channels opt in with
        `confidence(conn, query, ids) -> float | None`, e.g. BM25's IDF coverage)."""
        best: float | None = None
        for channel in self.channels:
            judge = getattr(channel, "confidence", None)
            if not callable(judge) or channel.name not in rankings:
                continue
            try:
                value = judge(conn, query, rankings[channel.name])
            except Exception:  # noqa: BLE001 - no verdict, no fast path
                log.exception("channel %s confidence failed", channel.name)
                continue
            if value is not None and (best is None or value > best):
                best = float(value)
        return best

    def injection_block(self, query: str, hits: list[RecallHit], budget_chars: int) -> str:
        """The ready-to-inject text for these hits (empty when nothing fits)."""
        block = self.pm.hook.format_injection(query=query, hits=hits, budget_chars=budget_chars)
        return block or ""

    @staticmethod
    def _load(conn: Any, ids: list[int]) -> dict[int, Memory]:
        out: dict[int, Memory] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({marks})", chunk
            ):
                out[row[0]] = row_to_memory(row)
        return out

    def get(self, uid: str) -> Memory | None:
        row = self.store.read().execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE uid = ?", (uid,)
        ).fetchone()
        return row_to_memory(row) if row else None

    def list(
        self, filters: RecallFilters | None = None, limit: int = 50, offset: int = 0
    ) -> list[Memory]:
        """Live memories, newest-updated first."""
        where, params = (filters or RecallFilters()).sql("m")
        rows = self.store.read().execute(
            f"SELECT {', '.join('m.' + c for c in MEMORY_COLUMNS.split(', '))} FROM memories m "
            f"WHERE {where} ORDER BY m.updated_at DESC, m.id DESC LIMIT ? OFFSET ?",
            [*params, max(0, limit), max(0, offset)],
        ).fetchall()
        return [row_to_memory(r) for r in rows]

    def count(self, filters: RecallFilters | None = None) -> int:
        where, params = (filters or RecallFilters()).sql("m")
        return self.store.read().execute(
            f"SELECT count(*) FROM memories m WHERE {where}", params
        ).fetchone()[0]

    def counts(self) -> dict[str, int]:
        """Cheap totals for health checks: live and forgotten memories, injection reports."""
        with self.store.snapshot() as conn:
            live, deleted = _memory_totals(conn)
            injections = conn.execute("SELECT count(*) FROM injections").fetchone()[0]
        return {"memories": live, "forgotten": deleted, "injections": injections}

    def export(self, include_deleted: bool = False) -> Iterator[dict[str, Any]]:
        """Every memory as the JSON-lines record `import` accepts, oldest first: importing it
        restores the same memories (uids, timestamps, and with `include_deleted` the forgotten
        ones, marked `"forgotten": true`)."""
        cursor = self.store.read().execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories"
            + ("" if include_deleted else " WHERE deleted = 0")
            + " ORDER BY id"
        )
        for row in cursor:
            memory = row_to_memory(row)
            record = memory.to_dict()
            out = {key: record[key] for key in EXPORT_FIELDS}
            if memory.deleted:
                out["forgotten"] = True
            yield out

    def stats(self) -> dict[str, Any]:
        conn = self.store.read()

        def grouped(column: str, where: str = "") -> dict[str, int]:
            return {
                str(name): count
                for name, count in conn.execute(
                    f"SELECT {column}, count(*) FROM memories WHERE {where}deleted = 0 "
                    f"GROUP BY {column} ORDER BY count(*) DESC LIMIT 50"
                )
            }

        live, deleted = _memory_totals(conn)
        embedder = self.embedder_info()
        return {
            "memories": live,
            "forgotten": deleted,
            "by_kind": grouped("kind"),
            "by_source": grouped("source"),
            "by_project": grouped("project", "project IS NOT NULL AND "),
            "without_project": conn.execute(
                "SELECT count(*) FROM memories WHERE deleted = 0 AND project IS NULL"
            ).fetchone()[0],
            "channels": [
                {"name": c.name, "weight": self.weights[c.name]} for c in self.channels
            ],
            "injections": _injection_totals(conn),
            "recall_mode": _recall_mode(embedder),
            "embedder": embedder,
            "device": (embedder or {}).get("device"),
            "db_path": str(self.store.path),
            "db_bytes": self.store.size_bytes(),
            "schema_version": self.store.schema_version,
        }

    # --- telemetry -------------------------------------------------------------------------

    def record_injection(
        self, *, uids: list[str], harness: str | None = None, hook: str | None = None,
        project: str | None = None, query: str | None = None, chars: int = 0,
        session: str | None = None,
    ) -> int:
        """Append one injection report; returns its id. Free text is redacted like memories."""
        project = redact(project) if project else project
        query = redact(query) if query else query
        with self.store.write() as conn:
            cursor = conn.execute(
                "INSERT INTO injections (ts, harness, hook, project, query, uids, chars, session) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (now(), harness, hook, project, query, json.dumps(uids), int(chars), session),
            )
            conn.executemany(
                "INSERT INTO injection_items (injection_id, uid) VALUES (?, ?)",
                [(cursor.lastrowid, uid) for uid in dict.fromkeys(uids)],
            )
        return int(cursor.lastrowid)

    def injected_in_session(self, session: str) -> frozenset[str]:
        """Uids of the memories already injected in this agent session (one index range)."""
        return frozenset(uid for (uid,) in self.store.read().execute(
            "SELECT DISTINCT i.uid FROM injections s JOIN injection_items i "
            "ON i.injection_id = s.id WHERE s.session = ?", (session,)))

    def in_session_context(self, session: str) -> Callable[[Memory], bool]:
        """Whether a memory is already in the context of agent session `session`: injected
        into it, or flushed from it (tagged `session:<session>`). A harness names its context
        anew after each compaction, so what compaction dropped can come back."""
        injected = self.injected_in_session(session)
        tag = f"session:{session}"
        return lambda memory: memory.uid in injected or tag in memory.tags

    def injections(
        self, *, harness: str | None = None, project: str | None = None,
        limit: int = 50, offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Injection telemetry rows, newest first."""
        clauses, params = ["1 = 1"], []
        for column, value in (("harness", harness), ("project", project)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        rows = self.store.read().execute(
            f"SELECT {INJECTION_COLUMNS} FROM injections "
            f"WHERE {' AND '.join(clauses)} ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?",
            [*params, max(0, limit), max(0, offset)],
        ).fetchall()
        return [row_to_dict(r) for r in rows]

    def memory_injections(self, uid: str, limit: int = 50, offset: int = 0
                          ) -> tuple[list[dict[str, Any]], int]:
        """The injections memory `uid` took part in, newest first, and their total."""
        with self.store.snapshot() as conn:
            return memory_injections(conn, uid, limit, offset)

    def injection_summary(self, top: int = 10) -> dict[str, Any]:
        """Totals (all time and 7 days), per-harness / per-hook counts, the most-injected
        memories and per-day counts of the last SUMMARY_DAYS days."""
        with self.store.snapshot() as conn:
            totals = _injection_totals(conn)

            def grouped(column: str) -> dict[str, int]:
                return {str(k): v for k, v in conn.execute(
                    f"SELECT coalesce({column}, ''), count(*) FROM injections "
                    f"GROUP BY 1 ORDER BY 2 DESC LIMIT 50")}

            top_rows = conn.execute(
                "SELECT i.uid, count(*) AS n, m.content FROM injection_items i "
                "LEFT JOIN memories m ON m.uid = i.uid GROUP BY i.uid ORDER BY n DESC, i.uid "
                "LIMIT ?", (top,),
            ).fetchall()
            return {
                **totals, "approx_tokens": totals["chars"] // 4,
                "last_7_days_approx_tokens": totals["last_7_days_chars"] // 4,
                "by_harness": grouped("harness"), "by_hook": grouped("hook"),
                "per_day": per_day(conn, SUMMARY_DAYS, now()),
                "top_memories": [{"uid": u, "injections": n,
                                  "content": (c or "")[:200] if c is not None else None}
                                 for u, n, c in top_rows],
            }

    def values(self, column: str, prefix: str = "", limit: int = 100) -> tuple[list[str], int]:
        """Distinct values of `column` (one of VALUE_COLUMNS) among live memories that start
        with `prefix` (case-insensitive), most used first, at most `limit`; and how many match."""
        if column not in VALUE_COLUMNS:
            raise ValueError(f"values: unknown column {column!r}")
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self.store.read().execute(
            f"SELECT {column}, count(*) FROM memories WHERE deleted = 0 AND {column} IS NOT NULL "
            f"AND {column} LIKE ? ESCAPE '\\' GROUP BY {column} ORDER BY 2 DESC, 1",
            (like,)).fetchall()
        return [str(r[0]) for r in rows[: max(0, limit)]], len(rows)

    @property
    def recall_mode(self) -> str:
        """"hybrid" when an embedder is active, else "keyword" (recall by words only)."""
        return _recall_mode(self.embedder_info())

    def embedder_info(self) -> dict[str, Any] | None:
        """What the vector side reports (model, dim, device, vectorized count), or None when no
        channel has an embedder. Channels opt in with an `embedder_info()` method."""
        for channel in self.channels:
            info = getattr(channel, "embedder_info", None)
            if callable(info):
                result = info()
                if result is not None:
                    return dict(result)
        return None

    # --- maintenance -----------------------------------------------------------------------

    def purge(self) -> PurgeReport:
        """Hard-delete soft-deleted memories, apply TTLs, VACUUM only when something went."""
        report = PurgeReport()
        current = now()
        with self.store.write() as conn:
            report.soft_deleted = conn.execute("DELETE FROM memories WHERE deleted = 1").rowcount
            if self.settings.ttl_artifact_days > 0:
                cutoff = current - self.settings.ttl_artifact_days * DAY
                report.expired_artifacts = conn.execute(
                    "DELETE FROM memories WHERE kind = ? AND updated_at < ?",
                    (EXPIRING_KIND, cutoff),
                ).rowcount
            if self.settings.ttl_injection_days > 0:
                cutoff = current - self.settings.ttl_injection_days * DAY
                report.expired_injections = conn.execute(
                    "DELETE FROM injections WHERE ts < ?", (cutoff,)
                ).rowcount
        if report.soft_deleted or report.expired_artifacts or report.expired_injections:
            if report.soft_deleted or report.expired_artifacts:
                self.store.optimize_fts()
            self.store.vacuum()
            report.vacuumed = True
        return report

    def startup_maintenance(self) -> PurgeReport | None:
        """The routine every service start runs when MEMORY_MAINTENANCE_ON_START is on."""
        if not self.settings.maintenance_on_start:
            return None
        report = self.purge()
        log.info("startup maintenance: %s", report.to_dict())
        return report

    def backfill(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Let every channel that keeps derived data (e.g. vectors) fill in what live memories
        lack. Channels opt in with `backfill(store)` (or `backfill(store, progress)`, called
        with (done, total)) returning a count or a dict with `embedded`; the result sums them
        per channel."""
        workers = [c for c in self.channels if callable(getattr(c, "backfill", None))]
        if not workers:
            return {"embedded": 0, "reason": "no embedder configured"}
        out: dict[str, Any] = {"embedded": 0, "channels": {}}
        for channel in workers:
            if progress is not None and "progress" in inspect.signature(
                    channel.backfill).parameters:  # type: ignore[attr-defined]
                result = channel.backfill(self.store, progress=progress)  # type: ignore[attr-defined]
            else:
                result = channel.backfill(self.store)  # type: ignore[attr-defined]
            detail = dict(result) if isinstance(result, dict) else {"embedded": int(result or 0)}
            out["channels"][channel.name] = detail
            out["embedded"] += int(detail.get("embedded", 0))
        return out

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self.store.close()
