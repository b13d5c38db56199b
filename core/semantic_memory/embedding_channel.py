"""`EmbeddingChannel`: one vector channel, written once, over per-store primitives.

Everything a vector channel does that does not depend on how a store keeps and searches vectors
lives here: taking the engine's embedder, embedding before the write lock, dedup thresholds,
the cosine floor and its `weak` verdict, the embedding queue (`Deferrable`), backfill, counts,
and copying vectors between stores. A store's vector channel (the SQLite matrix/ANN one in
`semantic-memory-vector`, the pgvector one in `semantic-memory-postgres`) implements only the
four primitives marked abstract below, and names its table.

The table shape both stores share: `<table>(memory_id → memories.id, model, dim, vec)`; rows
are tagged with the embedder's (model id, dim) and only the configured pair is ever searched,
so vectors of two models are never compared (older ones wait for `backfill`). A store may keep
a row per memory and tag (PostgreSQL: the services of a team that embed with different models
each keep theirs) or one per memory (SQLite's channel: another model's row is replaced); the
shared SQL here reads either.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .channels import Backfills, Channel, Deferrable, Prepares, TransfersVectors
from .embedders import NO_EMBEDDER_PLUGIN, origin
from .errors import one_line
from .models import ChannelHit, Memory, NewMemory, RecallFilters, RecallHit

if TYPE_CHECKING:
    from .embedders import Embedder
    from .stores import MemoryStore

log = logging.getLogger("semantic_memory.vector")

#: Memories embedded per step of `backfill` (one read, one embedding call, one write).
BACKFILL_CHUNK = 64
#: Rows per page when `export_vectors` walks a store.
EXPORT_PAGE = 500
#: How long a memory whose embedding failed stays keyword-only, said in each such line: true
#: in a service (its queue retries: `Writer.catch_up`) and in a one-off command (a running
#: service's queue picks up other processes' writes; else `memory-mcp backfill`).
UNTIL_EMBEDDED = "until the embedding queue or backfill embeds them"


class BadQueryVector(ValueError):
    """The embedder's query vector cannot be searched with; the message says what it answered
    instead (it follows the embedder's name)."""


class EmbeddingChannel(Channel, Prepares, Deferrable, Backfills, TransfersVectors):
    """The base of a vector channel: it takes the engine's embedder in `bind`; its default
    weight, score-fusion share, neighbour gap and cosine floor are the model's; it is `active`
    (and `expensive`) only with a usable model.

    Its hits carry the cosine as `score` and as the `cosine` signal, and are marked `weak`
    below the cosine floor (MEMORY_RECALL_MIN_COSINE when >= 0, else the model's calibrated
    `Embedder.cosine_floor`; 0 = off): the engine drops a fused hit that only weak verdicts
    found, so the nearest of the irrelevant never reaches the results on its own.

    A subclass names its `table` and implements the per-store primitives `write_vectors`,
    `nearest`, `duplicate_of` and `decode_vector` (with `vector_column`, the SQL expression
    `decode_vector` reads)."""

    embedder: Embedder | None = None
    store: MemoryStore | None = None
    #: MEMORY_RECALL_MIN_COSINE: < 0 means the model's own floor.
    configured_floor: float = -1.0
    #: MEMORY_INJECT_MIN_COSINE: < 0 means the model's injection floor.
    configured_inject_floor: float = -1.0
    #: MEMORY_DEDUP_SIM: a new memory this close (cosine) to a live one of its project merges
    #: into it; outside (0, 1] near-duplicate merging is off.
    dedup_sim: float = 0.98
    #: The channel's vector table: (memory_id, model, dim, vec), a row per memory and tag (or
    #: one per memory, on a store that keeps a single model's).
    table: str = ""
    #: The SQL expression over `v.vec` whose value `decode_vector` turns into floats.
    vector_column: str = "v.vec"
    #: The parameter mark of the driver of the store it speaks ("?" sqlite3, "%s" psycopg):
    #: the shared SQL here is written with `?`.
    placeholder: str = "?"
    #: An SQL condition over `v`, a stored row of the configured model, and `m`, its memory,
    #: that holds when the row can be searched; one that fails it counts as missing (the queue
    #: and `backfill` embed its memory again) and is not exported (the SQLite channel: a BLOB
    #: of `dim` floats, made from the memory's current text).
    usable_row: str = "1 = 1"

    def __init__(self, settings: Any) -> None:
        self.configured_floor = float(settings.recall_min_cosine)
        self.configured_inject_floor = float(settings.inject_min_cosine)
        self.dedup_sim = float(settings.dedup_sim)
        #: ((embedder, model, query), vector) of the last query embedded (`_query_vector`).
        self._last_query: tuple[tuple[int, str | None, str], Any] | None = None

    # --- wiring: the embedder's side -------------------------------------------------------

    def bind(self, *, store: MemoryStore, embedder: Embedder | None) -> None:
        self.store, self.embedder = store, embedder

    @property
    def expensive(self) -> bool:
        """Embedding the query costs model time; an inactive channel costs nothing."""
        return self.active

    @property
    def weight(self) -> float:  # type: ignore[override]
        """Default fusion weight: the embedder's (a model property, like its prompts)."""
        return self.embedder.fusion_weight if self.embedder is not None else 1.0

    @property
    def fusion_share(self) -> float:
        """Its share of the weight under score fusion (MEMORY_FUSION=score): the embedder's."""
        return self.embedder.fusion_share if self.embedder is not None else 0.5

    @property
    def neighbour_gap(self) -> float:
        """Where session neighbours go when this channel answers: the embedder's choice."""
        return self.embedder.neighbour_gap if self.embedder is not None else 1.0

    @property
    def active(self) -> bool:
        return (self.inactive_reason() is None and self.embedder is not None
                and self.embedder.model_id is not None)

    def inactive_reason(self) -> str | None:
        """Why the channel is off (no model, a model that failed to load), None when on."""
        if self.embedder is None:
            return NO_EMBEDDER_PLUGIN
        if not self.embedder.available:
            return self.embedder.error or "embedder unavailable"
        return None

    def _embedder_origin(self) -> str:
        """How this channel's log lines name what failed: the channel, then the embedder with
        its plugin and distribution (`vector: embedder qa-hash of plugin qa_hash (qa-hash-embedder
        0.1)`): an embedding failure is the embedder's, whoever installed it."""
        assert self.embedder is not None
        return f"{self.name}: {origin(self.embedder)}"

    def tag(self) -> tuple[str, int]:
        """(model id, dim) of the configured embedder: the vectors this channel searches."""
        assert self.embedder is not None
        return str(self.embedder.model_id), int(self.embedder.dim)

    def cosine_floor(self) -> float:
        """The floor below which a hit is weak (and not vouched for): configured or model's."""
        if self.configured_floor >= 0:
            return self.configured_floor
        return self.embedder.cosine_floor if self.embedder is not None else 0.45

    def hits(self, scored: Iterable[tuple[int, float]]) -> list[ChannelHit]:
        """(id, cosine) pairs as this channel's hits, weak below the cosine floor."""
        floor = self.cosine_floor()
        return [ChannelHit(id=i, score=s, signals={"cosine": s}, weak=floor > 0 and s < floor)
                for i, s in scored]

    def inject_floor(self) -> float:
        """The cosine a hit needs for this channel to vouch for it (what a hook injects):
        MEMORY_INJECT_MIN_COSINE, never below the recall floor (-1: that floor). Apart from
        it because a model's recall floor is where unrelated texts land: near texts of
        another subject (two chats, two code stores) clear it, and were injected."""
        floor = self.configured_inject_floor
        if floor < 0 and self.embedder is not None:
            floor = self.embedder.inject_floor
        return max(floor, self.cosine_floor())

    def relevant(self, conn: Any, query: str, hits: list[RecallHit]) -> set[int]:
        """Hits at least as similar as the injection floor: the bar for injecting."""
        if not self.active:
            return set()
        floor = self.inject_floor()
        return {h.memory.id for h in hits if h.signals.get("cosine", -2.0) >= floor}

    def describe_embedder(self) -> dict[str, Any]:
        """The model part of `embedder_info()`: channel, active, the embedder's own `info()`
        (model, dim, device…), and `mode` hybrid, or bm25-only with the `reason`."""
        info: dict[str, Any] = {"channel": self.name, "active": self.active}
        if self.embedder is not None:
            info.update(self.embedder.info())
        reason = self.inactive_reason()
        if reason:
            info["reason"] = reason
        info["mode"] = "bm25-only" if reason else "hybrid"
        return info

    # --- per-store primitives ----------------------------------------------------------------

    @abstractmethod
    def write_vectors(self, conn: Any, ids: list[int], vecs: Sequence[Any],
                      tag: tuple[str, int]) -> None:
        """Upsert one vector per memory id, tagged (model, dim), inside the write transaction;
        what the store keeps of other tags' vectors of those memories is its own choice."""

    @abstractmethod
    def nearest(self, conn: Any, qvec: Any, k: int, filters: RecallFilters
                ) -> list[tuple[int, float]]:
        """The k live memories passing `filters` whose vectors of the configured model are
        nearest `qvec`, as (id, cosine), best first."""

    @abstractmethod
    def duplicate_of(self, conn: Any, vec: Any, project: str | None,
                     threshold: float) -> int | None:
        """Inside the write transaction (its own uncommitted rows included): the id of a live
        memory of `project` (None: no project) whose vector is within `threshold` of `vec`."""

    @abstractmethod
    def decode_vector(self, raw: Any, dim: int) -> list[float]:
        """A value of `vector_column` as floats (for `export_vectors`)."""

    # --- write path --------------------------------------------------------------------------

    def prepare(self, memories: Sequence[NewMemory]) -> list[Any]:
        """Embed the documents before the write transaction (None where no vector is made)."""
        if not memories or not self.active:
            return [None] * len(memories)
        assert self.embedder is not None
        try:
            return self.checked(self.embedder.embed_documents([m.content for m in memories]),
                                len(memories))
        except Exception as exc:  # noqa: BLE001 - a gap: the service's queue retries it
            # (`Writer.catch_up`: a batch with no vector is the model's failure), `backfill`
            # fills it elsewhere
            log.warning("%s: embedding %d memories failed (%s); they stay keyword-only %s",
                        self._embedder_origin(), len(memories), one_line(exc), UNTIL_EMBEDDED)
            return [None] * len(memories)

    def checked(self, vecs: Any, n: int) -> list[Any]:
        """The embedder's answer for `n` texts as `n` float32 rows of the configured dim, None
        for a row that must not be stored: an answer of another shape fails every row, a row
        holding NaN or infinity fails alone (one log line either way; the memories stay
        keyword-only). The service's queue tries a batch that got no row again later, and
        leaves a row refused beside others' vectors for `backfill` (`Writer.catch_up`). A
        stored row is searched
        under the model's tag: one of the wrong size failed, and one with NaN poisoned, every
        later search of it."""
        import numpy as np  # an embedder answers numpy arrays: there is one

        dim = self.tag()[1]
        try:
            rows = np.asarray(vecs, dtype=np.float32)
        except (TypeError, ValueError):  # ragged rows, None, text
            rows = None
        if rows is None or rows.shape != (n, dim):
            got = f"shape {rows.shape}" if rows is not None else type(vecs).__name__
            log.warning("%s answered %s for %d texts, not (%d, %d); they stay keyword-only %s",
                        self._embedder_origin(), got, n, n, dim, UNTIL_EMBEDDED)
            return [None] * n
        finite = np.isfinite(rows).all(axis=1)
        if not finite.all():
            log.warning("%s answered NaN or infinity for %d of %d texts; those stay "
                        "keyword-only %s", self._embedder_origin(), int((~finite).sum()), n,
                        UNTIL_EMBEDDED)
        return [row if ok else None for row, ok in zip(rows, finite.tolist())]

    def find_duplicate(self, conn: Any, memory: NewMemory, prepared: Any) -> int | None:
        """A live memory of the same project whose vector is within MEMORY_DEDUP_SIM."""
        if prepared is None or not 0 < self.dedup_sim <= 1 or not self.active:
            return None
        return self.duplicate_of(conn, prepared, memory.project, self.dedup_sim)

    def index(self, conn: Any, memories: list[Memory],
              prepared: Sequence[Any] | None = None) -> None:
        """Store the prepared vectors of newly inserted memories (same transaction)."""
        if not prepared or not self.active:
            return
        rows = [(m.id, v) for m, v in zip(memories, prepared, strict=True) if v is not None]
        if rows:
            self.write_vectors(conn, [i for i, _ in rows], [v for _, v in rows], self.tag())

    def forget(self, conn: Any, ids: list[int]) -> None:
        """Drop these memories' vectors (an edit: `index` then stores the new text's, if it
        was embedded; a purge: the ids may be reused)."""
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            conn.execute(self._sql(f"DELETE FROM {self.table} WHERE memory_id IN "
                                   f"({','.join('?' * len(chunk))})"), chunk)

    # --- read path ---------------------------------------------------------------------------

    def search(self, conn: Any, query: str, k: int, filters: RecallFilters
               ) -> list[ChannelHit]:
        if not self.active or k <= 0:
            return []
        try:
            qvec = self._query_vector(query)
        except Exception as exc:  # noqa: BLE001 - recall carries on with the other channels
            if isinstance(exc, BadQueryVector):
                log.warning("%s %s; keyword-only for this recall", self._embedder_origin(), exc)
            else:
                log.warning("%s: query embedding failed (%s); keyword-only for this recall",
                            self._embedder_origin(), one_line(exc))
            return []
        return self.hits(self.nearest(conn, qvec, k, filters))

    def _query_vector(self, query: str) -> Any:
        """The query's embedding. The last one is kept: a project's recall searches twice with
        one query (its memories, then the global ones), and a query costs model time."""
        assert self.embedder is not None
        key = (id(self.embedder), self.embedder.model_id, query)
        last = self._last_query  # one read: recalls run on several threads
        if last is not None and last[0] == key:
            return last[1]
        import numpy as np

        answer = self.embedder.embed_query(query)
        dim = self.tag()[1]
        try:  # None reads as a NaN of shape (), a str does not read: say what came instead
            vec = None if answer is None else np.asarray(answer, dtype=np.float32)
        except (TypeError, ValueError):
            vec = None
        if vec is None or vec.ndim == 0:
            got = "None" if answer is None else type(answer).__name__
            raise BadQueryVector(f"answered {got}, not a query vector of {dim} floats")
        if vec.shape != (dim,):  # not a cosine: no ranking
            raise BadQueryVector(f"answered a query vector of shape {vec.shape}, not ({dim},)")
        if not np.isfinite(vec).all():
            raise BadQueryVector(f"answered a query vector of {dim} floats holding NaN or "
                                 "infinity")
        self._last_query = (key, vec)
        return vec

    # --- the embedding queue (`Deferrable`): live memories without a vector of the model ----

    def _lacking(self) -> str:
        return self._sql(f"FROM memories m WHERE m.deleted = 0 AND NOT EXISTS (SELECT 1 FROM "
                         f"{self.table} v WHERE v.memory_id = m.id AND v.model = ? AND "
                         f"v.dim = ? AND {self.usable_row})")

    def pending_ids(self, conn: Any, limit: int) -> list[int]:
        if not self.active:
            return []
        return [r[0] for r in conn.execute(
            f"SELECT m.id {self._lacking()} ORDER BY m.id LIMIT {int(limit)}", self.tag())]

    def pending_count(self, conn: Any) -> int:
        if not self.active:
            return 0
        return int(conn.execute(f"SELECT count(*) {self._lacking()}", self.tag()).fetchone()[0])

    # --- maintenance and reporting -----------------------------------------------------------

    def counts(self, conn: Any) -> dict[str, int]:
        """Live memories with a vector of the configured model, without, and the vectors of
        live memories made by another model (replaced by `backfill` on a store of one vector
        per memory; kept beside this model's on one of a vector per memory and model). The
        live count is read apart: a memory with vectors of two models is one memory."""
        model, dim = self.tag()
        live, vectorized, other = conn.execute(self._sql(
            "SELECT (SELECT count(*) FROM memories WHERE deleted = 0), "
            f"coalesce(sum(CASE WHEN v.model = ? AND v.dim = ? AND {self.usable_row} "
            "THEN 1 ELSE 0 END), 0), "
            "coalesce(sum(CASE WHEN NOT (v.model = ? AND v.dim = ?) THEN 1 ELSE 0 END), 0) "
            f"FROM memories m JOIN {self.table} v ON v.memory_id = m.id WHERE m.deleted = 0"),
            (model, dim, model, dim)).fetchone()
        return {"vectorized": int(vectorized), "missing": int(live) - int(vectorized),
                "other_model_vectors": int(other)}

    def embedder_info(self, conn: Any = None) -> dict[str, Any]:
        """What stats and /health report about the vector side: the model, and its counts
        (read through `conn`, else a snapshot of the bound store)."""
        info = self.describe_embedder()
        if info["mode"] != "hybrid":
            return info
        try:
            if conn is not None:
                info.update(self.counts(conn))
            elif self.store is not None:
                with self.store.snapshot() as snap:
                    info.update(self.counts(snap))
        except Exception as exc:  # noqa: BLE001 - a report must not fail on a busy store
            log.warning("%s: counting vectors failed (%s)", self.name, exc)
        return info

    def backfill(self, store: MemoryStore,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Embed every live memory without a vector of the configured model (other models'
        vectors are kept beside it, or replaced on a store of one vector per memory), chunk
        by chunk: each chunk is read, embedded outside any transaction, then written in a
        short write transaction of its own.

        Unlike the service's queue it merges no near-duplicates: the queue's merge stands in
        for the check ingest skipped when it deferred (only memories created since the service
        started), while backfill repairs memories stored before the model, by another model or
        while it failed, which a person has had for long and which no check would have merged
        then; merging them now would forget memories by surprise."""
        if not self.active:
            return {"embedded": 0, "reason": self.inactive_reason()}
        assert self.embedder is not None
        model, dim = self.tag()
        with store.snapshot() as conn:
            total = int(conn.execute(f"SELECT count(*) {self._lacking()}",
                                     (model, dim)).fetchone()[0])
        done = last = failed = 0
        if progress:
            progress(0, total)
        page = self._sql(f"SELECT m.id, m.content {self._lacking()} AND m.id > ? "
                         f"ORDER BY m.id LIMIT {BACKFILL_CHUNK}")
        while True:
            with store.snapshot() as conn:  # keyset pages: no list of the whole store in memory
                chunk = conn.execute(page, (model, dim, last)).fetchall()
            if not chunk:
                break
            last = chunk[-1][0]
            try:
                vecs = self.embedder.embed_documents([c for _, c in chunk])
            except Exception as exc:  # noqa: BLE001
                reason = f"{origin(self.embedder)} raised {one_line(exc)}"
                log.error("%s: backfill embedding failed: %s", self.name, reason)
                # it stops here: every memory it did not embed is one not embedded, not only
                # this chunk's (a model that fails to load fails them all)
                return {"embedded": done, "failed": max(total - done, failed + len(chunk)),
                        "total": max(total, done + failed + len(chunk)), "reason": reason}
            made = [(i, text, v) for (i, text), v in zip(chunk, self.checked(vecs, len(chunk)))
                    if v is not None]
            failed += len(chunk) - len(made)
            with store.write() as conn:  # not a memory purged or edited while it was embedded
                now = self._texts(conn, [i for i, _, _ in made])
                keep = [(i, v) for i, text, v in made if now.get(i) == text]
                if keep:
                    self.write_vectors(conn, [i for i, _ in keep], [v for _, v in keep],
                                       (model, dim))
            done += len(keep)  # not a memory edited or purged meanwhile: not embedded here
            if progress:
                progress(min(done + failed, total), max(total, done + failed))
        out = {"embedded": done, "total": max(total, done + failed), "model": model,
               "dim": dim}
        return {**out, "failed": failed} if failed else out

    # --- copying between stores (`memory-mcp migrate`) ---------------------------------------

    def export_vectors(self, store: MemoryStore) -> Iterator[tuple[str, str, int, list[float]]]:
        """(uid, model, dim, vector) of every stored vector, whatever its model. Paged by
        memory: a page holds every row of the memories it reaches (about EXPORT_PAGE rows),
        so a memory's vectors of several models are never split between two pages."""
        end = self._sql(f"SELECT memory_id FROM {self.table} WHERE memory_id > ? "
                        f"ORDER BY memory_id LIMIT 1 OFFSET {EXPORT_PAGE - 1}")
        page = self._sql(f"SELECT v.memory_id, m.uid, v.model, v.dim, {self.vector_column} "
                         f"FROM {self.table} v JOIN memories m ON m.id = v.memory_id "
                         f"WHERE v.memory_id > ? AND v.memory_id <= ? AND {self.usable_row} "
                         "ORDER BY v.memory_id")
        last = 0
        while True:
            with store.snapshot() as conn:
                bound = conn.execute(end, (last,)).fetchone()
                upto = int(bound[0]) if bound is not None else 2**63 - 1
                rows = conn.execute(page, (last, upto)).fetchall()
            for memory_id, uid, model, dim, raw in rows:
                vec = self.decode_vector(raw, int(dim))
                if _usable(vec, int(dim)):  # else missing here: the target embeds it again
                    yield uid, model, int(dim), vec
                else:
                    log.warning("%s: the stored vector of memory %d is not %d finite floats; "
                                "not copied", self.name, memory_id, int(dim))
            if bound is None:  # the last page
                return
            last = upto

    def import_vectors(self, conn: Any, rows: list[tuple[str, str, int, Any]]) -> int:
        """Store exported vectors with their own model tags, for the memories of these uids
        that are stored here, leaving out any that is not `dim` finite floats; returns how
        many."""
        if not rows:
            return 0
        ids: dict[str, int] = {}
        uids = [r[0] for r in rows]
        for start in range(0, len(uids), 500):
            chunk = uids[start : start + 500]
            ids.update(conn.execute(self._sql(
                f"SELECT uid, id FROM memories WHERE uid IN ({','.join('?' * len(chunk))})"),
                chunk).fetchall())
        groups: dict[tuple[str, int], list[tuple[int, Any]]] = {}
        for uid, model, dim, vec in rows:
            if uid in ids and _usable(vec, int(dim)):
                groups.setdefault((model, int(dim)), []).append((ids[uid], vec))
        for tag, items in groups.items():
            self.write_vectors(conn, [i for i, _ in items], [v for _, v in items], tag)
        return sum(len(items) for items in groups.values())

    # --- helpers -----------------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        """`sql` written with `?` marks, in the driver's parameter style."""
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _texts(self, conn: Any, ids: list[int]) -> dict[int, str]:
        """id -> text of those of `ids` still stored."""
        if not ids:
            return {}
        return dict(conn.execute(self._sql(
            f"SELECT id, content FROM memories WHERE id IN ({','.join('?' * len(ids))})"), ids))


def _usable(vec: Any, dim: int) -> bool:
    """Whether `vec` is `dim` finite floats: a vector that can be stored and searched."""
    import numpy as np

    row = np.asarray(vec, dtype=np.float32)
    return row.shape == (dim,) and bool(np.isfinite(row).all())
