"""What every SQL store shares: the memory model's queries in SQL both SQLite and PostgreSQL
speak. A store subclass supplies its connections, schema and the few statements that differ
(bulk insert, per-day grouping, maintenance); it writes `?` for parameters and `_q` turns them
into its driver's style.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ..models import EXPIRING_KIND, Holdings, Memory, RecallFilters, folded, now
from ..sources import PIECE_HEAD

if TYPE_CHECKING:
    from ..config import Settings

#: The columns a memory is read with, in `row_to_memory`'s order.
MEMORY_COLUMNS = ("id, uid, content, kind, source, project, tags, created_at, updated_at, deleted, "
                  "session, seq, superseded_by")
#: The same, of `memories m` (queries whose filters are written over the alias `m`).
MEMORY_COLUMNS_OF_M = ", ".join("m." + c for c in MEMORY_COLUMNS.split(", "))
#: The columns an injection row is read with, in `injection_to_dict`'s order.
INJECTION_COLUMNS = "id, ts, harness, hook, project, query, uids, chars, session"
#: Columns whose distinct values a store groups and offers (stats, completion, filter lists).
VALUE_COLUMNS = ("project", "kind", "source")
#: Parameters per IN (…) list: below every engine's limit.
CHUNK = 500


class StoreError(RuntimeError):
    """The store cannot be used (newer schema, not a database, unreachable server, …)."""


def content_hash(content: str) -> str:
    """Hash used for exact-duplicate detection: whitespace runs collapse, case is kept."""
    return hashlib.sha256(" ".join(content.split()).encode("utf-8")).hexdigest()


def row_to_memory(row: tuple) -> Memory:
    """Build a Memory from a row selected with MEMORY_COLUMNS."""
    return Memory(
        id=row[0], uid=row[1], content=row[2], kind=row[3], source=row[4], project=row[5],
        tags=json.loads(row[6]) if row[6] != "[]" else [],  # most have none: skip the parser
        created_at=row[7], updated_at=row[8], deleted=bool(row[9]), session=row[10], seq=row[11],
        superseded_by=row[12],
    )


def memory_row(memory: Memory) -> tuple[Any, ...]:
    """The values an INSERT of `memory` writes (uid … seq, tags as JSON text)."""
    return (memory.uid, memory.content, content_hash(memory.content), memory.kind,
            memory.source, memory.project, json.dumps(memory.tags, ensure_ascii=False),
            memory.created_at, memory.updated_at, int(memory.deleted), memory.session,
            memory.seq)


def injection_to_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """One `injections` row (INJECTION_COLUMNS) with its time as unix seconds."""
    return {"id": row[0], "ts": row[1], "harness": row[2], "hook": row[3], "project": row[4],
            "query": row[5], "uids": json.loads(row[6]), "chars": row[7], "session": row[8]}


def top_values(counts: dict[str | None, int], *, named_only: bool = False, limit: int = 50
               ) -> dict[str, int]:
    """`value_counts`' counts most first, then by value, at most `limit`; with `named_only`,
    None is left out, else it counts under ""."""
    ranked = sorted(((value or "", n) for value, n in counts.items()
                     if not (named_only and value is None)), key=lambda item: (-item[1], item[0]))
    return dict(ranked[:max(0, limit)])


def starting_with(counts: dict[str | None, int], prefix: str) -> list[tuple[str, int]]:
    """(value, count) of `value_counts`' counts whose value starts with `prefix`, letter case
    aside (both lower-cased), most first, then by value; None (no value) is left out."""
    folded = prefix.lower()
    return sorted(((value, n) for value, n in counts.items()
                   if value is not None and value.lower().startswith(folded)),
                  key=lambda item: (-item[1], item[0]))


def _value_conditions(where: str, include_superseded: bool) -> str | None:
    """`RecallFilters.sql("m")`'s condition without its opening live (and current) clauses,
    which take no parameter: the filters on values alone, "" for none. None if the condition
    does not open so."""
    head = "m.deleted = 0" + ("" if include_superseded else " AND m.superseded_by IS NULL")
    if where == head:
        return ""
    return where[len(head) + 5:] if where.startswith(head + " AND ") else None


def _scope(alias: str, project: str | None, global_only: bool) -> tuple[str, list[Any]]:
    """The condition on `{alias}.project` that keeps one project (None: every one), or with
    `global_only` the rows of none."""
    if global_only:
        return f"{alias}.project IS NULL", []
    if project is not None:
        return f"{alias}.project = ?", [project]
    return "", []


def _holds(needle: str, content: str, tags: str) -> bool:
    """Whether a row's content or its tags (their JSON text) hold `needle` (`folded`)."""
    return needle in folded(content) or (tags != "[]" and needle in folded(tags))


def _across(needle: str, earlier: str, later: str) -> bool:
    """Whether `needle` (`folded`) runs across the cut between two pieces of one long
    exchange: `later` a piece after the first, headed by its question (PIECE_HEAD), the
    blank at the cut dropped (or none there: a word cut for want of one)."""
    if not later.startswith(PIECE_HEAD) or "\n" not in later:
        return False
    size = len(needle)
    tail, head = folded(earlier[-size:]), folded(later.split("\n", 1)[1][:size])
    return needle in f"{tail} {head}" or needle in tail + head


def chunks(values: list[Any]) -> Iterator[list[Any]]:
    """`values` a CHUNK at a time, for IN (…) lists."""
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


def marks(values: list[Any]) -> str:
    """The `?, ?, …` of an IN (…) list of `values`."""
    return ",".join("?" * len(values))


@dataclass(frozen=True)
class Retention:
    """How long maintenance keeps what it may purge, in days, under the names of the settings
    that give them: forgotten memories (MEMORY_FORGET_GRACE_DAYS; 0: purged at the next run),
    artifacts and injection reports (MEMORY_TTL_ARTIFACT_DAYS, MEMORY_TTL_INJECTION_DAYS;
    0: never expire)."""

    forget_grace_days: int
    ttl_artifact_days: int
    ttl_injection_days: int

    @classmethod
    def of(cls, settings: Settings) -> Retention:
        """The periods `settings` ask for."""
        return cls(**{f.name: int(getattr(settings, f.name)) for f in fields(cls)})

    def longest(self, other: Retention) -> Retention:
        """Each period the longer of the two: a grace the greater, a TTL the greater unless
        either is 0 (never expire), which is the longest of all."""
        def ttl(a: int, b: int) -> int:
            return 0 if 0 in (a, b) else max(a, b)

        return Retention(max(self.forget_grace_days, other.forget_grace_days),
                         ttl(self.ttl_artifact_days, other.ttl_artifact_days),
                         ttl(self.ttl_injection_days, other.ttl_injection_days))

    def items(self) -> dict[str, int]:
        """setting name -> days."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


class SQLMemoryStore:
    """The shared half of a SQL store; see the module docstring. Subclasses provide `name`,
    `location`, `write()`, `read()`, `snapshot()`, `close()`, `schema_version`,
    `size_bytes()`, `insert()`, `injections_per_day()`, `purge()`'s cleanup and `optimize()`."""

    name = ""
    location = ""
    #: The driver's parameter mark, replacing every `?` of the shared SQL.
    placeholder = "?"
    #: The case-insensitive LIKE of the engine (PostgreSQL: ILIKE).
    like_operator = "LIKE"

    def _q(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _run(self, conn: Any, sql: str, params: Any = ()) -> Any:
        return conn.execute(self._q(sql), params)

    def write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def long_write(self) -> AbstractContextManager[Any]:
        """A write transaction for work that may legitimately take long (a channel's setup):
        a store with a round-trip deadline lifts it here. By default, `write`."""
        return self.write()

    def read(self) -> Any:
        raise NotImplementedError

    def snapshot(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def damage(self, exc: BaseException) -> str | None:
        """What to do when `exc`, met by a query, says the store itself is damaged (not a
        statement or one channel failing); None when it does not, or the engine cannot tell."""
        return None

    @contextmanager
    def spare_snapshot(self) -> Iterator[Any | None]:
        """A snapshot for a channel searching beside the recall's own, on another thread
        (SQLite: that thread's own connection). A store with a bounded pool yields None when
        no connection is free at once: a recall must never wait for a second one."""
        with self.snapshot() as conn:
            yield conn

    @contextmanager
    def savepoint(self, conn: Any, name: str) -> Iterator[None]:
        """Inside a transaction: when the block raises, undo only what it did (the exception
        goes on), and leave the transaction usable. How the engine keeps one failing channel
        out of a write, and out of the rest of a recall. When the connection itself is gone
        (a deadline closed it), the block's error is the one that says why."""
        self._run(conn, f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            try:
                self._run(conn, f"ROLLBACK TO SAVEPOINT {name}")
                self._run(conn, f"RELEASE SAVEPOINT {name}")
            except Exception:  # noqa: BLE001 - the transaction fails with what follows
                pass
            raise
        self._run(conn, f"RELEASE SAVEPOINT {name}")

    # --- ingest (inside the caller's write transaction) -------------------------------------

    def known_uids(self, conn: Any, uids: list[str]) -> set[str]:
        """The uids of `uids` already stored, live or forgotten."""
        known: set[str] = set()
        for chunk in chunks(uids):
            known.update(r[0] for r in self._run(
                conn, f"SELECT uid FROM memories WHERE uid IN ({marks(chunk)})", chunk))
        return known

    def live_by_hash(self, conn: Any, keys: list[tuple[str | None, str]]
                     ) -> dict[tuple[str | None, str], tuple[int, str]]:
        """(project, content hash) -> (id, uid) of the live memory of that project holding that
        text. Duplicates are per project, as recall's project filter is: the same text stored
        for two projects is two memories, each found in its own project."""
        return self._by_hash(conn, keys, deleted=False)

    def forgotten_by_hash(self, conn: Any, keys: list[tuple[str | None, str]]
                          ) -> dict[tuple[str | None, str], tuple[int, str]]:
        """`live_by_hash` among the forgotten memories not yet purged (the oldest one of a
        text): what keeps a hook's flush of a resumed session from storing again what its
        user forgot. SQLite seeks the hash index; PostgreSQL, whose hash index holds the live
        memories only, reads the forgotten ones' partial index (those of the grace period)."""
        return self._by_hash(conn, keys, deleted=True)

    def purged_by_hash(self, conn: Any, keys: list[tuple[str | None, str]]
                       ) -> set[tuple[str | None, str]]:
        """Those of `keys` with a tombstone (`_bury`): a purge removed a memory of that
        project holding that text. What keeps a hook's flush of a resumed session from
        storing again what its user forgot once the memory is gone, as `forgotten_by_hash`
        does before."""
        wanted = {(project or "", digest): (project, digest) for project, digest in keys}
        found: set[tuple[str | None, str]] = set()
        for chunk in chunks(list(dict.fromkeys(digest for _, digest in keys))):
            for project, digest in self._run(
                    conn, f"SELECT project, content_hash FROM purged_texts WHERE content_hash "
                          f"IN ({marks(chunk)})", chunk):
                if (project, digest) in wanted:
                    found.add(wanted[(project, digest)])
        return found

    def _by_hash(self, conn: Any, keys: list[tuple[str | None, str]], deleted: bool
                 ) -> dict[tuple[str | None, str], tuple[int, str]]:
        # `deleted` written out, not a parameter: a partial index (PostgreSQL's live hashes,
        # both stores' forgotten ids) serves only a query whose condition names its value.
        wanted = set(keys)
        found: dict[tuple[str | None, str], tuple[int, str]] = {}
        for chunk in chunks(list(dict.fromkeys(digest for _, digest in keys))):
            for project, digest, id_, uid in self._run(
                conn, f"SELECT project, content_hash, id, uid FROM memories WHERE deleted = "
                f"{int(deleted)} AND content_hash IN ({marks(chunk)}) ORDER BY id", chunk):
                if (project, digest) in wanted:
                    found.setdefault((project, digest), (id_, uid))
        return found

    def last_seq(self, conn: Any, session: str) -> int | None:
        """The highest place taken in `session`, None for a new session."""
        return self._run(conn, "SELECT max(seq) FROM memories WHERE session = ?",
                         (session,)).fetchone()[0]

    def insert(self, conn: Any, rows: list[Memory]) -> list[tuple[Memory, bool]]:
        """Store new memories (their `id` is ignored): each comes back with its id and True,
        or, where a live memory with the same content won a race, as that one with False."""
        raise NotImplementedError

    def touch(self, conn: Any, ids: list[int], ts: float) -> None:
        """Refresh `updated_at` (a duplicate came in again)."""
        for chunk in chunks(ids):
            self._run(conn, f"UPDATE memories SET updated_at = ? WHERE id IN ({marks(chunk)})",
                      [ts, *chunk])

    def merge_duplicate(self, conn: Any, memory_id: int, into_id: int, ts: float) -> None:
        """Memory `memory_id` turned out to duplicate `into_id` (a near-duplicate found when
        its vector arrived): it is forgotten and `into_id` refreshed, as if it had been
        deduplicated at ingest. `into_id` takes the forgotten memory's place among
        supersessions: it replaces what that one had replaced, and is current when that one
        was (left as they were, `into_id` could stay replaced by what the forgotten one had
        replaced, itself replaced by a forgotten memory: recall would find neither)."""
        rows = {id_: (uid, by) for id_, uid, by in self._run(
            conn, "SELECT id, uid, superseded_by FROM memories WHERE id IN (?, ?) "
                  "AND deleted = 0", (memory_id, into_id))}
        if memory_id not in rows or into_id not in rows:
            return
        (merged, merged_by), (kept, _) = rows[memory_id], rows[into_id]
        self._run(conn, "UPDATE memories SET deleted = 1, updated_at = ? WHERE id = ?",
                  (ts, memory_id))
        self._run(conn, "UPDATE memories SET superseded_by = ? WHERE superseded_by = ? "
                        "AND id <> ?", (kept, merged, into_id))
        self._run(conn, "UPDATE memories SET superseded_by = ? WHERE id = ?",
                  (None if merged_by == kept else merged_by, into_id))
        self.touch(conn, [into_id], ts)

    def load(self, conn: Any, ids: list[int]) -> dict[int, Memory]:
        """id -> Memory of those ids still stored."""
        out: dict[int, Memory] = {}
        for chunk in chunks(ids):
            for row in self._run(conn, f"SELECT {MEMORY_COLUMNS} FROM memories "
                                       f"WHERE id IN ({marks(chunk)})", chunk):
                out[row[0]] = row_to_memory(row)
        return out

    # --- memories ---------------------------------------------------------------------------

    def get(self, uid: str) -> Memory | None:
        row = self._run(self.read(), f"SELECT {MEMORY_COLUMNS} FROM memories WHERE uid = ?",
                        (uid,)).fetchone()
        return row_to_memory(row) if row else None

    def memories_passing(self, conn: Any, filters: RecallFilters) -> str:
        """The `memories m` a page or count of the memories passing `filters` reads. Here
        as written: the engine's planner picks the index (PostgreSQL from the statistics it
        keeps of each value)."""
        return "memories m"

    def list(self, filters: RecallFilters, limit: int, offset: int) -> list[Memory]:
        """Live memories passing `filters`, newest-updated first."""
        where, params = filters.sql("m")
        conn = self.read()
        rows = self._run(conn, f"SELECT {MEMORY_COLUMNS_OF_M} FROM "
                               f"{self.memories_passing(conn, filters)} WHERE {where} "
                               "ORDER BY m.updated_at DESC, m.id DESC LIMIT ? OFFSET ?",
                         [*params, max(0, limit), max(0, offset)]).fetchall()
        return [row_to_memory(r) for r in rows]

    def count(self, filters: RecallFilters, at_most: int | None = None) -> int:
        """How many memories pass `filters`. With `at_most`, min(that, at_most): the rows are
        read up to there only, so a page can say "more than N" without reading every match.

        Without it the count is exact, from indexes (`_count_current`): each filter has its
        own (project, kind and source, each with `updated_at`), so one filter is counted in its
        index alone; two (a project and a kind) read the rows of one, which `at_most` bounds."""
        where, params = filters.sql("m")
        if at_most is not None:
            conn = self.read()
            return self._run(conn, f"SELECT count(*) FROM (SELECT 1 FROM "
                                   f"{self.memories_passing(conn, filters)} "
                                   f"WHERE {where} LIMIT ?) AS page",
                             [*params, max(0, at_most)]).fetchone()[0]
        values = _value_conditions(where, filters.include_superseded)
        if values is None:
            return self._run(self.read(), f"SELECT count(*) FROM memories m WHERE {where}",
                             params).fetchone()[0]
        with self.snapshot() as conn:
            return self._count_current(conn, self.memories_passing(conn, filters), where,
                                       values, params, filters.include_superseded)

    def _count_current(self, conn: Any, memories: str, where: str, values: str,
                       params: list[Any], include_superseded: bool) -> int:
        """`count(*) WHERE {where}`, `where` being the live (and, unless `include_superseded`,
        current) clauses AND `values` ("": no other condition) over `m`, reading the fewer
        rows of two ways, chosen from index-only counts. Where fewer rows pass `values` (in
        the project's or `updated_at`'s index) than are forgotten or replaced (their partial
        indexes), those are read (a small project). Else all that pass `values` are counted
        in the index (no filter: the smallest one), less the forgotten and the replaced
        among them (the whole store, a large project: no row read per memory). There the
        condition is inside the aggregate: in the WHERE clause, SQLite could walk the
        project's index rather than the few rows of the partial one. `memories` is
        `memories_passing`'s, for the queries that read the rows passing `values`."""
        matching = self._run(conn, f"SELECT count(*) FROM {memories}"
                             + (f" WHERE {values}" if values else ""), params).fetchone()[0]
        gone = ["m.deleted = 1"]
        if not include_superseded:
            gone.append("m.superseded_by IS NOT NULL AND m.deleted = 0")
        # at most this many to subtract (index-only; a forgotten replaced one counts twice)
        most = sum(self._run(conn, f"SELECT count(*) FROM memories m WHERE {clause}"
                             ).fetchone()[0]
                   for clause in ("m.deleted = 1", "m.superseded_by IS NOT NULL")[:len(gone)])
        if matching <= most:
            return int(self._run(conn, f"SELECT count(*) FROM {memories} WHERE {where}",
                                 params).fetchone()[0])
        passing = f"count(CASE WHEN {values} THEN 1 END)" if values else "count(*)"
        for clause in gone:
            matching -= self._run(conn, f"SELECT {passing} FROM memories m WHERE {clause}",
                                  params).fetchone()[0]
        return int(matching)

    def any_live(self, conn: Any, filters: RecallFilters) -> bool:
        """Whether some memory passes `filters` (for a project or global filter, one seek of
        the project index)."""
        where, params = filters.sql("m")
        return self._run(conn, f"SELECT 1 FROM memories m WHERE {where} LIMIT 1",
                         params).fetchone() is not None

    def totals(self, conn: Any) -> tuple[int, int]:
        """(current, forgotten-not-yet-purged) memories, from indexes (no table scan): live
        ones replaced by a newer memory (supersession) are history, not counted."""
        total = self._run(conn, "SELECT count(*) FROM memories").fetchone()[0]
        forgotten = self._run(conn, "SELECT count(*) FROM memories WHERE deleted = 1"
                              ).fetchone()[0]
        replaced = self._run(conn, "SELECT count(*) FROM memories WHERE superseded_by IS NOT "
                                   "NULL AND deleted = 0").fetchone()[0]
        return total - forgotten - replaced, forgotten

    def value_counts(self, conn: Any, columns: tuple[str, ...] = VALUE_COLUMNS
                     ) -> dict[str, dict[str | None, int]]:
        """Current memories (live, not superseded) per value of each of `columns` (of
        VALUE_COLUMNS; NULL as None), every value that has some, in few reads whatever the
        store's size: every row counted per value in that column's index alone (index-only:
        each column has one), less the forgotten and the replaced, each read once from its
        partial index for all the columns. (Grouping by `deleted` and `superseded_by` too
        read every row: 1.5 s at 1M; kind and source in one pass of the table, 0.6 s.)
        The subtracted rows are grouped by `column || ''` (the same values, NULL kept):
        grouped by a column itself, SQLite walks that column's index to skip a sort and reads
        every row to test the WHERE clause, rather than the few rows of the partial index."""
        if unknown := set(columns) - set(VALUE_COLUMNS):
            raise ValueError(f"unknown column(s) {sorted(unknown)}")
        counts: dict[str, dict[str | None, int]] = {column: {} for column in columns}

        def tally(names: list[str], sign: int, where: str = "") -> None:
            grouped = ", ".join(f"{name} || ''" if where else name for name in names)
            for *values, n in self._run(conn, f"SELECT {grouped}, count(*) FROM memories "
                                              f"{where}GROUP BY {grouped}"):
                for name, value in zip(names, values):
                    counts[name][value] = counts[name].get(value, 0) + sign * int(n)

        for column in columns:
            tally([column], 1)
        for gone in ("deleted = 1", "superseded_by IS NOT NULL AND deleted = 0"):
            tally(list(columns), -1, f"WHERE {gone} ")
        return {column: {value: n for value, n in values.items() if n > 0}
                for column, values in counts.items()}

    def last_updated(self, conn: Any) -> float | None:
        """The newest `updated_at` of any memory, forgotten ones included (one index seek): it
        moves with every write that changes a memory's values (ingest, edit, forget, a
        duplicate's refresh); what a caller caches from the counts is stale once it or
        `totals` has moved."""
        return self._run(conn, "SELECT max(updated_at) FROM memories").fetchone()[0]

    def values(self, column: str, prefix: str) -> list[tuple[str, int]]:
        """(value, current memories) of `column` starting with `prefix`, case-insensitive,
        most used first: `value_counts`' counts (its index, not every row), filtered here."""
        if column not in VALUE_COLUMNS:
            raise ValueError(f"values: unknown column {column!r}")
        with self.snapshot() as conn:
            counts = self.value_counts(conn, (column,))[column]
        return starting_with(counts, prefix)

    def export(self, include_deleted: bool) -> Iterator[Memory]:
        """Every memory (live, and forgotten with `include_deleted`), oldest first."""
        last = 0
        while True:  # pages by id: no cursor held open across a long export
            rows = self._run(self.read(), f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id > ?"
                             + ("" if include_deleted else " AND deleted = 0")
                             + " ORDER BY id LIMIT ?", (last, 1000)).fetchall()
            if not rows:
                return
            yield from (row_to_memory(r) for r in rows)
            last = rows[-1][0]

    def export_current(self, filters: RecallFilters) -> Iterator[Memory]:
        """The memories passing `filters`, oldest first, a page at a time (no cursor held
        open): for one project (or `global_only`), a walk of the project index."""
        where, params = filters.sql("m")
        last = 0
        while True:
            rows = self._run(self.read(), f"SELECT {MEMORY_COLUMNS_OF_M} FROM memories m "
                                          f"WHERE {where} AND m.id > ? ORDER BY m.id LIMIT ?",
                             [*params, last, 1000]).fetchall()
            if not rows:
                return
            yield from (row_to_memory(r) for r in rows)
            last = rows[-1][0]

    def adjacent(self, conn: Any, memories: list[Memory], window: int, filters: RecallFilters
                 ) -> dict[int, list[tuple[int, Memory]]]:
        """Per memory id, (distance, memory) of the nearest `window` live memories on each side
        of that memory in its session that pass `filters`, the earlier side first: gaps left
        by forgotten or filtered memories are skipped. A memory outside any session has none.
        Two indexed queries per memory (in-process for SQLite; a store whose every statement
        is a round trip answers all of them in one)."""
        where, params = filters.sql("m")
        found: dict[int, list[tuple[int, Memory]]] = {}
        for memory in memories:
            near = found.setdefault(memory.id, [])
            if memory.session is None or memory.seq is None:
                continue
            for op, order in (("<", "DESC"), (">", "ASC")):
                rows = self._run(
                    conn, f"SELECT {MEMORY_COLUMNS_OF_M} FROM memories m WHERE m.session = ? "
                          f"AND m.seq {op} ? "
                          f"AND {where} ORDER BY m.seq {order} LIMIT ?",
                    [memory.session, memory.seq, *params, window]).fetchall()
                near += [(d, row_to_memory(row)) for d, row in enumerate(rows, start=1)]
        return found

    def live_by_uid(self, conn: Any, uid: str) -> Memory | None:
        """The live memory `uid`, read in the caller's transaction; None if there is none."""
        row = self._run(conn, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE uid = ? "
                              "AND deleted = 0", (uid,)).fetchone()
        return row_to_memory(row) if row else None

    def replace(self, conn: Any, old: Memory, new: Memory, ts: float) -> None:
        """Write `new` over `old`'s row (same id and uid: an edit), keeping `old`'s content,
        kind, project, tags and updated_at as a revision replaced at `ts`. The FTS5 tables'
        update triggers re-index the text; the engine re-indexes the other channels."""
        self._run(conn, "INSERT INTO memory_revisions (memory_id, content, kind, project, tags, "
                        "updated_at, replaced_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                  (old.id, old.content, old.kind, old.project,
                   json.dumps(old.tags, ensure_ascii=False), old.updated_at, ts))
        self._run(conn, "UPDATE memories SET content = ?, content_hash = ?, kind = ?, "
                        "project = ?, tags = ?, updated_at = ? WHERE id = ?",
                  (new.content, content_hash(new.content), new.kind, new.project,
                   json.dumps(new.tags, ensure_ascii=False), new.updated_at, old.id))

    def revisions(self, uid: str) -> list[dict[str, Any]]:
        """The earlier versions of memory `uid`, newest first: content, kind, project, tags,
        updated_at (when that version was written) and replaced_at (when an edit replaced it),
        times as unix seconds."""
        rows = self._run(self.read(), "SELECT r.content, r.kind, r.project, r.tags, "
                                      "r.updated_at, r.replaced_at FROM memory_revisions r "
                                      "JOIN memories m ON m.id = r.memory_id WHERE m.uid = ? "
                                      "ORDER BY r.id DESC", (uid,)).fetchall()
        return [{"content": c, "kind": k, "project": p, "tags": json.loads(t),
                 "updated_at": u, "replaced_at": r} for c, k, p, t, u, r in rows]

    def export_revisions(self) -> Iterator[dict[str, Any]]:
        """Every earlier version of every memory, oldest first, named by its memory's `uid`
        (ids differ between stores): what `restore_revisions` takes."""
        last = 0
        while True:
            rows = self._run(self.read(), "SELECT r.id, m.uid, r.content, r.kind, r.project, "
                                          "r.tags, r.updated_at, r.replaced_at "
                                          "FROM memory_revisions r JOIN memories m "
                                          "ON m.id = r.memory_id WHERE r.id > ? "
                                          "ORDER BY r.id LIMIT 1000", (last,)).fetchall()
            if not rows:
                return
            yield from ({"uid": u, "content": c, "kind": k, "project": p, "tags": json.loads(t),
                         "updated_at": up, "replaced_at": r}
                        for _, u, c, k, p, t, up, r in rows)
            last = rows[-1][0]

    def restore_revisions(self, rows: list[dict[str, Any]]) -> int:
        """Append exported revisions (a migration) in one transaction, each to the memory of
        its `uid`; returns how many found their memory."""
        restored = 0
        with self.write() as conn:
            for row in rows:
                found = self._run(conn, "SELECT id FROM memories WHERE uid = ?",
                                  (row["uid"],)).fetchone()
                if found is None:
                    continue
                self._run(conn, "INSERT INTO memory_revisions (memory_id, content, kind, "
                                "project, tags, updated_at, replaced_at) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                          (found[0], row["content"], row["kind"], row["project"],
                           json.dumps(row["tags"], ensure_ascii=False), row["updated_at"],
                           row["replaced_at"]))
                restored += 1
        return restored

    # --- supersession ----------------------------------------------------------------------

    def supersede(self, conn: Any, ids: list[int], uid: str) -> None:
        """Mark the memories `ids` as replaced by memory `uid`."""
        for chunk in chunks(ids):
            self._run(conn, f"UPDATE memories SET superseded_by = ? WHERE id IN ({marks(chunk)})",
                      [uid, *chunk])

    def make_current(self, conn: Any, ids: list[int]) -> None:
        """Clear the memories `ids`' `superseded_by`: recall returns them again."""
        for chunk in chunks(ids):
            self._run(conn, "UPDATE memories SET superseded_by = NULL "
                            f"WHERE id IN ({marks(chunk)})", chunk)

    def containing(self, conn: Any, memory: Memory, words: Sequence[str], limit: int,
                   source: str | None = None) -> list[Memory]:
        """The current memories of `memory`'s project and kind (and `source`, when given;
        itself left out) whose text contains any of `words`, case-insensitive: per word the
        `limit` newest, those holding the most words first: supersession candidates where no
        porter channel finds them. Per word, not the newest holding any: twenty newer
        memories sharing one common word pushed the restated one out (each search stays one
        index walk; ranking every memory that holds a word by the words held took 3x as
        long a write at 50,000 memories)."""
        project = "project IS NULL" if memory.project is None else "project = ?"
        params = [*([] if memory.project is None else [memory.project]), memory.kind, memory.id,
                  *([] if source is None else [source])]
        found: dict[int, Memory] = {}
        for word in words:
            like = word.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            rows = self._run(conn, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {project} AND "
                                   "kind = ? AND deleted = 0 AND superseded_by IS NULL AND "
                                   f"id <> ? {'' if source is None else 'AND source = ? '}"
                                   f"AND content {self.like_operator} ? ESCAPE '\\' "
                                   "ORDER BY id DESC LIMIT ?",
                             [*params, f"%{like}%", limit]).fetchall()
            found.update((m.id, m) for m in map(row_to_memory, rows))
        held = {i: sum(w.lower() in m.content.lower() for w in words) for i, m in found.items()}
        return sorted(found.values(), key=lambda m: (-held[m.id], -m.id))[:limit]

    def unsupersede(self, uid: str) -> str | None:
        """Make memory `uid` current again; returns the uid that had replaced it, None when it
        was not superseded (or is not a live memory)."""
        with self.write() as conn:
            row = self._run(conn, "SELECT id, superseded_by FROM memories WHERE uid = ? AND "
                                  "deleted = 0", (uid,)).fetchone()
            if row is None or row[1] is None:
                return None
            self.make_current(conn, [row[0]])
            return str(row[1])

    def supersedes(self, uid: str, conn: Any = None) -> list[str]:
        """The uids of the live memories that memory `uid` replaced, newest first (in `conn`'s
        transaction when given)."""
        return [r[0] for r in self._run(
            conn or self.read(), "SELECT uid FROM memories WHERE superseded_by = ? AND "
                                 "deleted = 0 ORDER BY updated_at DESC, id DESC", (uid,))]

    def clear_dangling_supersessions(self, conn: Any) -> int:
        """Clear every `superseded_by` that names no live memory of the same project (one
        purged, forgotten or never stored, the row itself, or one of another project, which
        `replaces` refuses and only an imported file or a later move makes): a memory must not
        stay hidden behind a uid its project does not hold.
        A forget clears what names the memory it forgets; this repairs what a purge (an
        expired artifact, an old forget) or an imported file left. Then break each cycle of
        supersessions (`_break_cycles`: A replaced by B, B by A, which only an edited or
        foreign file makes), which would hide all its memories and every chain into it.
        Returns how many live memories are current again; forgotten ones are cleared too, so
        that brought back they are current. One probe of the uid index per superseded row
        (its partial index), twice."""
        dangling = ("superseded_by IS NOT NULL AND (superseded_by = uid OR NOT EXISTS ("
                    "SELECT 1 FROM memories o WHERE o.uid = memories.superseded_by "
                    "AND o.deleted = 0 AND (o.project = memories.project "
                    "OR (o.project IS NULL AND memories.project IS NULL))))")
        current = self._run(conn, "UPDATE memories SET superseded_by = NULL WHERE "
                                  f"deleted = 0 AND {dangling}").rowcount
        self._run(conn, f"UPDATE memories SET superseded_by = NULL WHERE deleted = 1 AND "
                        f"{dangling}")
        return int(current) + self._break_cycles(conn)

    def _break_cycles(self, conn: Any) -> int:
        """Make the newest memory (latest `created_at`, then `updated_at`, then uid: the same
        on every store) of each supersession cycle among live memories current: the cycle
        becomes a chain ending in it, and so does every chain that ran into the cycle. Run
        after dangling uids are cleared, so every live superseded memory names a live one.
        Only memories replaced by a replaced memory can be on a cycle; the rest are read
        once, by the index, and left. Returns how many memories are current again."""
        rows = self._run(conn, "SELECT m.id, m.uid, m.superseded_by, m.created_at, "
                               "m.updated_at FROM memories m JOIN memories t ON "
                               "t.uid = m.superseded_by AND t.deleted = 0 "
                               "WHERE m.superseded_by IS NOT NULL AND m.deleted = 0 "
                               "AND t.superseded_by IS NOT NULL").fetchall()
        by_uid = {row[1]: row for row in rows}
        done: set[str] = set()  # walked: on a chain out, or a cycle already found
        heads: list[int] = []
        for start in by_uid:
            path: list[str] = []
            on_path: set[str] = set()
            uid: str = start
            while uid in by_uid and uid not in done and uid not in on_path:
                path.append(uid)
                on_path.add(uid)
                uid = by_uid[uid][2]
            if uid in on_path:  # came back to this walk: path[from uid:] is a cycle
                cycle = [by_uid[u] for u in path[path.index(uid):]]
                heads.append(max(cycle, key=lambda r: (r[3], r[4], r[1]))[0])
            done.update(path)
        self.make_current(conn, heads)
        return len(heads)

    def forget(self, uid: str, ts: float) -> list[str] | None:
        """Soft-delete one memory, its `updated_at` set to `ts` (when it was forgotten: what
        the start-up purge's grace period counts from). Returns the uids of the live memories
        it had replaced, current again (newest first; usually none); None when no live memory
        has this uid."""
        with self.write() as conn:
            cursor = self._run(conn, "UPDATE memories SET deleted = 1, updated_at = ? "
                                     "WHERE uid = ? AND deleted = 0", (ts, uid))
            if cursor.rowcount == 0:
                return None
            current = self.supersedes(uid, conn)
            self._run(conn, "UPDATE memories SET superseded_by = NULL WHERE superseded_by = ?",
                      (uid,))
            return current

    def forgotten(self, limit: int, project: str | None = None, global_only: bool = False
                  ) -> list[Memory]:
        """Forgotten memories not yet purged, the latest forgotten first (a forgotten memory's
        `updated_at` is when it was forgotten), at most `limit`; of `project` only, or with
        `global_only` of none."""
        where, params = "deleted = 1", []
        if global_only:
            where += " AND project IS NULL"
        elif project is not None:
            where, params = where + " AND project = ?", [project]
        rows = self._run(self.read(), f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where} "
                                      "ORDER BY updated_at DESC, id DESC LIMIT ?",
                         [*params, max(0, limit)]).fetchall()
        return [row_to_memory(r) for r in rows]

    def unforget(self, uid: str, ts: float) -> tuple[Memory | None, str | None]:
        """Make forgotten memory `uid` live again, its `updated_at` set to `ts`, unless a live
        memory of its project now holds its text (a store keeps one live copy of a text per
        project): `restore_forgotten` in a transaction of its own."""
        with self.write() as conn:
            return self.restore_forgotten(conn, uid, ts)

    def restore_forgotten(self, conn: Any, uid: str, ts: float
                          ) -> tuple[Memory | None, str | None]:
        """`unforget` inside the caller's write transaction (where the engine also gives the
        memory back its vector and its place among supersessions). Returns (the memory as it
        was found, None once it is live again), or the uid of the live memory holding its text
        in place of None (nothing changed). The memory is None for a uid never stored or
        purged, and not `deleted` for a live one (nothing changed). The channels kept what
        they derived from it while it was forgotten (only a purge or an edit drops that), so
        it is found again at once."""
        row = self._run(conn, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE uid = ?",
                        (uid,)).fetchone()
        memory = row_to_memory(row) if row else None
        if memory is None or not memory.deleted:
            return memory, None
        key = (memory.project, content_hash(memory.content))
        holder = self.live_by_hash(conn, [key]).get(key)
        if holder is not None:
            return memory, holder[1]
        self._run(conn, "UPDATE memories SET deleted = 0, updated_at = ? WHERE id = ?",
                  (ts, memory.id))
        return memory, None

    # --- injection telemetry ----------------------------------------------------------------

    def record_injection(self, row: dict[str, Any], uids: list[str]) -> int:
        """Append one injection report (`row`: ts, harness, hook, project, query, chars,
        session) with its memories; returns its id."""
        with self.write() as conn:
            return self._append_injection(conn, row, uids)

    def _append_injection(self, conn: Any, row: dict[str, Any], uids: list[str]) -> int:
        id_ = self._run(
            conn, "INSERT INTO injections (ts, harness, hook, project, query, uids, chars, "
                  "session) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (row["ts"], row.get("harness"), row.get("hook"), row.get("project"),
             row.get("query"), json.dumps(uids), int(row.get("chars", 0)),
             row.get("session"))).fetchone()[0]
        items = [(id_, uid) for uid in dict.fromkeys(uids)]
        if items:
            conn.cursor().executemany(self._q("INSERT INTO injection_items (injection_id, uid) "
                                              "VALUES (?, ?)"), items)
        return int(id_)

    def injected_in_session(self, session: str) -> set[str]:
        """Uids of the memories already injected in this agent session (one index range)."""
        return {uid for (uid,) in self._run(
            self.read(), "SELECT DISTINCT i.uid FROM injections s JOIN injection_items i "
                         "ON i.injection_id = s.id WHERE s.session = ?", (session,))}

    def injections(self, harness: str | None, project: str | None, limit: int, offset: int,
                   global_only: bool = False) -> list[dict[str, Any]]:
        """Injection rows, newest first; of `harness` and `project` only, or with
        `global_only` those made outside any project."""
        clauses, params = ["1 = 1"], []
        for column, value in (("harness", harness), ("project", project)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if global_only:
            clauses.append("project IS NULL")
        rows = self._run(self.read(), f"SELECT {INJECTION_COLUMNS} FROM injections "
                                      f"WHERE {' AND '.join(clauses)} "
                                      "ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?",
                         [*params, max(0, limit), max(0, offset)]).fetchall()
        return [injection_to_dict(r) for r in rows]

    def memory_injections(self, uid: str, limit: int, offset: int
                          ) -> tuple[list[dict[str, Any]], int]:
        """The injections one memory took part in, newest first, and how many there are."""
        with self.snapshot() as conn:
            total = self._run(conn, "SELECT count(DISTINCT injection_id) FROM injection_items "
                                    "WHERE uid = ?", (uid,)).fetchone()[0]
            columns = ", ".join(f"s.{c}" for c in INJECTION_COLUMNS.split(", "))
            rows = self._run(conn, f"SELECT {columns} FROM injections s WHERE s.id IN ("
                                   "SELECT injection_id FROM injection_items WHERE uid = ?) "
                                   "ORDER BY s.ts DESC, s.id DESC LIMIT ? OFFSET ?",
                             (uid, max(0, limit), max(0, offset))).fetchall()
        return [injection_to_dict(r) for r in rows], total

    def injection_count(self, conn: Any) -> int:
        """How many injection reports there are: a count of the smallest index, where
        `injection_totals` reads every report for its sums."""
        return int(self._run(conn, "SELECT count(*) FROM injections").fetchone()[0])

    def injection_totals(self, conn: Any, since: float) -> dict[str, int]:
        """Injection reports, all and since `since`, and the characters they injected."""
        total, recent, chars, recent_chars = self._run(
            conn, "SELECT count(*), coalesce(sum(CASE WHEN ts >= ? THEN 1 ELSE 0 END), 0), "
                  "coalesce(sum(chars), 0), coalesce(sum(CASE WHEN ts >= ? THEN chars ELSE 0 "
                  "END), 0) FROM injections", (since, since)).fetchone()
        return {"total": int(total), "last_7_days": int(recent), "chars": int(chars),
                "last_7_days_chars": int(recent_chars)}

    def injection_groups(self, conn: Any, column: str) -> dict[str, int]:
        """Injection reports per harness or hook, most first."""
        if column not in ("harness", "hook"):
            raise ValueError(f"unknown column {column!r}")
        return {str(k): int(v) for k, v in self._run(
            conn, f"SELECT coalesce({column}, ''), count(*) FROM injections "
                  "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 50")}

    def top_injected(self, conn: Any, top: int) -> list[tuple[str, int, str | None]]:
        """(uid, injections, content; None once forgotten or purged) of the most-injected
        memories: the items counted per uid in their index alone, and only the top ones joined
        to their memory (joining every item first read a memory per item: 0.9 s for 500k
        items). A forgotten memory's text is shown nowhere else until it is taken back."""
        return [(u, int(n), c) for u, n, c in self._run(
            conn, "SELECT t.uid, t.n, m.content FROM (SELECT uid, count(*) AS n "
                  "FROM injection_items GROUP BY uid ORDER BY n DESC, uid LIMIT ?) AS t "
                  "LEFT JOIN memories m ON m.uid = t.uid AND m.deleted = 0 "
                  "ORDER BY t.n DESC, t.uid", (top,))]

    def injections_per_day(self, conn: Any, start: float) -> dict[str, tuple[int, int]]:
        """"YYYY-MM-DD" (UTC) -> (injections, characters) since `start`."""
        raise NotImplementedError

    def injection_counts(self, conn: Any, uids: list[str]) -> dict[str, int]:
        """uid -> how many injections it took part in (for the uids that have any)."""
        out: dict[str, int] = {}
        for chunk in chunks(uids):
            out.update((u, int(n)) for u, n in self._run(
                conn, f"SELECT uid, count(*) FROM injection_items WHERE uid IN ({marks(chunk)}) "
                      "GROUP BY uid", chunk))
        return out

    def export_injections(self) -> Iterator[dict[str, Any]]:
        """Every injection report, oldest first, with its memories (`uids`)."""
        last = 0
        while True:
            rows = self._run(self.read(), f"SELECT {INJECTION_COLUMNS} FROM injections "
                                          "WHERE id > ? ORDER BY id LIMIT 1000", (last,)
                             ).fetchall()
            if not rows:
                return
            yield from (injection_to_dict(r) for r in rows)
            last = rows[-1][0]

    def restore_injections(self, rows: list[dict[str, Any]]) -> int:
        """Append exported injection reports (a migration) in one transaction; returns how
        many."""
        with self.write() as conn:
            for row in rows:
                self._append_injection(conn, row, list(row.get("uids") or []))
        return len(rows)

    # --- maintenance ------------------------------------------------------------------------

    def purge(self, artifact_cutoff: float | None, injection_cutoff: float | None,
              on_delete: Callable[[Any, list[int]], None] | None = None,
              forgotten_cutoff: float | None = None) -> tuple[int, int, int, int]:
        """Hard-delete forgotten memories (with `forgotten_cutoff`, only those forgotten
        before it: their `updated_at`), live artifacts last updated before `artifact_cutoff`
        and injection reports before `injection_cutoff` (None: keep); what the memories gone
        had replaced is current again, in the same transaction (`clear_dangling_supersessions`,
        as a forget does), and the injection reports that named them lose their uids and
        prompt (`_unreport`). Returns the three counts and how many memories are current
        again. `on_delete(conn, ids)` hears of the memories about to go, in the same
        transaction (their ids may be reused: channels drop what they derived from them)."""
        # The forgotten are read from their partial index `memories_forgotten`: `+updated_at`
        # is no column SQLite may seek an index with, so it does not walk `memories_updated`
        # over every memory older than the cutoff instead (2 s at 1M memories, in the write
        # lock, at every start). Expired artifacts are a range of `memories_kind`.
        gone, gone_params = "deleted = 1", []
        if forgotten_cutoff is not None:
            gone, gone_params = gone + " AND +updated_at < ?", [forgotten_cutoff]
        with self.write() as conn:
            rows = self._run(conn, f"SELECT id, uid FROM memories WHERE {gone}",
                             gone_params).fetchall()
            if artifact_cutoff is not None:
                rows += self._run(conn, "SELECT id, uid FROM memories WHERE kind = ? AND "
                                        "updated_at < ? AND deleted = 0",
                                  (EXPIRING_KIND, artifact_cutoff)).fetchall()
            if rows and on_delete is not None:
                on_delete(conn, [id_ for id_, _ in rows])
            self._unreport(conn, [uid for _, uid in rows])
            self._bury(conn, gone, gone_params)
            forgotten = self._run(conn, f"DELETE FROM memories WHERE {gone}",
                                  gone_params).rowcount
            artifacts = injections = 0
            if artifact_cutoff is not None:  # a forgotten one waits for its grace as any
                artifacts = self._run(conn, "DELETE FROM memories WHERE kind = ? "
                                            "AND updated_at < ? AND deleted = 0",
                                      (EXPIRING_KIND, artifact_cutoff)).rowcount
            if injection_cutoff is not None:
                injections = self._run(conn, "DELETE FROM injections WHERE ts < ?",
                                       (injection_cutoff,)).rowcount
            current = self.clear_dangling_supersessions(conn)
        return forgotten, artifacts, injections, current

    def _bury(self, conn: Any, where: str, params: list[Any]) -> None:
        """Record the (project, content hash) of the memories `where` picks, about to be
        hard-deleted in this transaction, in `purged_texts` (a tombstone: the hash, never the
        text; kept for good, its time the latest purge's): automatic capture does not store
        such a text again (`purged_by_hash`). DISTINCT: PostgreSQL refuses an upsert that
        touches one row twice."""
        self._run(conn, "INSERT INTO purged_texts (project, content_hash, purged_at) "
                        "SELECT DISTINCT coalesce(project, ''), content_hash, ? FROM memories "
                        f"WHERE {where} ON CONFLICT (content_hash, project) "
                        "DO UPDATE SET purged_at = excluded.purged_at", [now(), *params])

    def export_purged(self) -> Iterator[dict[str, Any]]:
        """Every tombstone (`_bury`) as `{"project", "content_hash", "purged_at"}` (project
        None for the global memories'), what `restore_purged` takes (a migration)."""
        last = ("", "")
        while True:
            rows = self._run(self.read(), "SELECT content_hash, project, purged_at FROM "
                                          "purged_texts WHERE (content_hash, project) > (?, ?) "
                                          "ORDER BY content_hash, project LIMIT 1000",
                             last).fetchall()
            if not rows:
                return
            yield from ({"project": project or None, "content_hash": digest, "purged_at": ts}
                        for digest, project, ts in rows)
            last = (rows[-1][0], rows[-1][1])

    def restore_purged(self, rows: list[dict[str, Any]]) -> int:
        """Add exported tombstones (a migration) in one transaction; returns how many the
        store holds of them now."""
        with self.write() as conn:
            for row in rows:
                self._run(conn, "INSERT INTO purged_texts (project, content_hash, purged_at) "
                                "VALUES (?, ?, ?) ON CONFLICT (content_hash, project) DO NOTHING",
                          (row["project"] or "", row["content_hash"], row["purged_at"]))
            return len(self.purged_by_hash(conn, [(row["project"], row["content_hash"])
                                                  for row in rows]))

    def _splice(self, conn: Any, ids: list[int], uids: set[str]) -> None:
        """Before the memories `ids` (uids `uids`) go: what one of them had superseded is
        superseded by what superseded it (its newest version past those going too), so that
        purging the middle of a chain (A replaced by B, B by C) leaves A superseded by C, not
        current beside it. What one that was current had superseded is current again
        (`clear_dangling_supersessions`, after the delete)."""
        newer = {uid: by for chunk in chunks(ids) for uid, by in self._run(
            conn, f"SELECT uid, superseded_by FROM memories WHERE id IN ({marks(chunk)})",
            chunk).fetchall()}
        for uid in uids:
            heir, seen = newer.get(uid), {uid}
            while heir in uids and heir not in seen:
                seen.add(heir)
                heir = newer.get(heir)
            if heir is not None and heir not in uids:
                self._run(conn, "UPDATE memories SET superseded_by = ? WHERE superseded_by = ?",
                          (heir, uid))

    def _unreport(self, conn: Any, uids: list[str]) -> None:
        """Take memories being purged out of the injection reports that name them (inside the
        purge's transaction): their uids leave each report, and its `query`, the prompt they
        were recalled for, is blanked (NULL); the report stays, with its time, harness and
        size, in the telemetry. Before, a report kept the prompt and the purged uid for as
        long as MEMORY_TTL_INJECTION_DAYS."""
        purged = set(uids)
        for chunk in chunks(uids):
            reports = self._run(
                conn, "SELECT id, uids FROM injections WHERE id IN (SELECT injection_id FROM "
                      f"injection_items WHERE uid IN ({marks(chunk)}))", chunk).fetchall()
            for id_, named in reports:
                kept = [uid for uid in json.loads(named) if uid not in purged]
                self._run(conn, "UPDATE injections SET query = NULL, uids = ? WHERE id = ?",
                          (json.dumps(kept), id_))
            self._run(conn, f"DELETE FROM injection_items WHERE uid IN ({marks(chunk)})",
                      chunk)

    def holding(self, text: str, project: str | None = None, global_only: bool = False
                ) -> Holdings:
        """Every place this store keeps `text` (case-insensitive, `folded`): memories, live,
        superseded or forgotten, whose content or tags hold it; earlier versions of the other
        memories that hold it; injection reports whose prompt holds it. Of `project` only, or
        with `global_only` of none. A scan of every row, a page at a time in one snapshot:
        rare, by hand, and exact where a full-text index would miss a part of a word."""
        needle = folded(text)
        where, params = _scope("m", project, global_only)
        found = Holdings()
        with self.snapshot() as conn:
            held: dict[int, None] = {}  # in scan order
            before: tuple[int, str, str | None] | None = None  # the row before: a piece?
            for id_, content, tags, session in self._pages(
                    conn, "m.id, m.content, m.tags, m.session FROM memories m", where, params):
                if _holds(needle, content, tags):
                    held[id_] = None
                elif before is not None and session is not None and before[2] == session \
                        and _across(needle, before[1], content):
                    held.update({before[0]: None, id_: None})
                    found.across.update((before[0], id_))
                before = (id_, content, session)
            ids = list(held)
            for chunk in chunks(ids):
                found.memories += self.load(conn, chunk).values()
            found.revisions = {id_: uid for id_, uid, memory_id, content, tags in self._pages(
                conn, "r.id, m.uid, m.id, r.content, r.tags FROM memory_revisions r "
                      "JOIN memories m ON m.id = r.memory_id", where, params, key="r.id")
                if memory_id not in held and _holds(needle, content, tags)}
            where, params = _scope("i", project, global_only)
            found.reports = [id_ for id_, query in self._pages(
                conn, "i.id, i.query FROM injections i",
                " AND ".join(filter(None, ["i.query IS NOT NULL", where])), params, key="i.id")
                if needle in folded(query)]
        found.memories.sort(key=lambda m: m.id)
        return found

    def _pages(self, conn: Any, select: str, where: str, params: list[Any],
               key: str = "m.id") -> Iterator[tuple[Any, ...]]:
        """Every row of `SELECT {select} WHERE {where}`, in pages of `key` order (the first
        column) so that no page holds more than a few MB of text."""
        last = 0
        while True:
            rows = self._run(conn, f"SELECT {select} WHERE {key} > ?"
                                   + (f" AND {where}" if where else "")
                                   + f" ORDER BY {key} LIMIT 2000", [last, *params]).fetchall()
            if not rows:
                return
            yield from rows
            last = rows[-1][0]

    def purge_holdings(self, found: Holdings, text: str,
                       on_delete: Callable[[Any, list[int]], None] | None = None
                       ) -> tuple[int, int, int, int]:
        """Hard-delete what `holding(text)` found, in one transaction: the memories (and their
        revisions; the reports that named them lose uid and prompt, as in `purge`), the
        revisions, and the prompt of the reports (blanked; the report stays in the telemetry).
        Each is checked again inside the transaction: one edited since no longer holding
        `text` stays. Returns how many memories, revisions and prompts went, and how many
        memories are current again (one purged had replaced them)."""
        needle = folded(text)
        with self.write() as conn:
            # a piece held for text cut across it and its neighbour goes as it was found
            as_found = {m.id: m.content for m in found.memories if m.id in found.across}
            ids = [id_ for chunk in chunks([m.id for m in found.memories])
                   for id_, content, tags in self._run(
                       conn, f"SELECT id, content, tags FROM memories WHERE id IN "
                             f"({marks(chunk)})", chunk).fetchall()
                   if _holds(needle, content, tags) or as_found.get(id_) == content]
            revisions = [id_ for chunk in chunks(list(found.revisions))
                         for id_, content, tags in self._run(
                             conn, f"SELECT id, content, tags FROM memory_revisions WHERE id "
                                   f"IN ({marks(chunk)})", chunk).fetchall()
                         if _holds(needle, content, tags)]
            reports = [id_ for chunk in chunks(found.reports)
                       for id_, query in self._run(
                           conn, f"SELECT id, query FROM injections WHERE id IN "
                                 f"({marks(chunk)}) AND query IS NOT NULL", chunk).fetchall()
                       if needle in folded(query)]
            if ids:
                if on_delete is not None:
                    on_delete(conn, ids)
                gone = set(ids)
                uids = [m.uid for m in found.memories if m.id in gone]
                self._unreport(conn, uids)
                self._splice(conn, ids, set(uids))
            for chunk in chunks(ids):
                self._bury(conn, f"id IN ({marks(chunk)})", chunk)
                self._run(conn, f"DELETE FROM memories WHERE id IN ({marks(chunk)})", chunk)
            for chunk in chunks(revisions):
                self._run(conn, f"DELETE FROM memory_revisions WHERE id IN ({marks(chunk)})",
                          chunk)
            for chunk in chunks(reports):
                self._run(conn, f"UPDATE injections SET query = NULL WHERE id IN "
                                f"({marks(chunk)})", chunk)
            current = self.clear_dangling_supersessions(conn) if ids else 0
        return len(ids), len(revisions), len(reports), current

    def retention(self, own: Retention) -> Retention:
        """The periods maintenance keeps things for on this store, given a service's `own`
        (which it announces): a store of one user (SQLite's file) keeps `own`, as the user
        set it last; a store a team shares keeps the longest any of its services announced,
        so that one service's shorter setting never purges what another's user still
        expects to find (the PostgreSQL store)."""
        return own

    def optimize(self, vacuum: bool = False) -> list[str]:
        """Tidy indexes after a bulk load, and with `vacuum` give back the space deletions
        left; returns what was optimised."""
        raise NotImplementedError

    def scrub_indexes(self) -> list[str]:
        """After a purge that skipped `optimize`: rewrite the indexes that still hold words of
        what it removed, without holding a write for the whole rewrite; returns those
        rewritten. None here."""
        return []

    def bound_index_levels(self) -> list[str]:
        """Rebuild the indexes whose structure grew past what their engine reads back (FTS5's
        levels, sqlite.py `bound_fts_levels`); returns those rebuilt. None here."""
        return []

    def flush_journal(self) -> str | None:
        """After a purge: move what the store's own journal still holds from before it into
        the store and empty the journal, so the text purged is in no file beside it (SQLite's
        WAL). Returns why it could not, else None. A server's journal (PostgreSQL's WAL) is
        the server's: nothing here."""
        return None
