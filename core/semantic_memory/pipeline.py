"""The core pipeline: ingest -> filters -> dedup -> store + index; recall -> channels -> fuse ->
post-process -> injection block. Interfaces (CLI, MCP, REST) all go through `MemoryEngine`."""

from __future__ import annotations

import json
import logging
import re
import secrets
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from .channels import Channel
from .config import Settings
from .errors import InvalidMemory, Rejected
from .fusion import rrf
from .models import (
    EXPIRING_KIND,
    IngestResult,
    Memory,
    NewMemory,
    RecallFilters,
    RecallHit,
    now,
)
from .plugins import PluginManager, build_plugin_manager
from .store import MEMORY_COLUMNS, Store, content_hash, row_to_memory

log = logging.getLogger("semantic_memory")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_PROJECT_CHARS = 256
MAX_RECALL_K = 200
DAY = 86_400.0


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
    if memory.created_at is not None and (
        isinstance(memory.created_at, bool) or not isinstance(memory.created_at, (int, float))
    ):
        raise InvalidMemory("created_at: expected unix seconds")


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
        self.pm = plugin_manager or build_plugin_manager(self.settings, tuple(plugins))
        self.store = Store(self.settings.resolved_db_path)
        self.channels: list[Channel] = []
        self.pm.hook.register_channels(register=self.channels.append, settings=self.settings)
        self.channels.sort(key=lambda c: c.name)
        configured = self.settings.weights()
        self.weights = {c.name: configured.get(c.name, c.weight) for c in self.channels}
        with self.store.write() as conn:
            for channel in self.channels:
                channel.setup(conn)

    # --- write path ------------------------------------------------------------------------

    def ingest(self, items: list[NewMemory]) -> list[IngestResult]:
        """Store a batch in one transaction. Invalid input raises InvalidMemory before anything
        is written; a filter's refusal is reported per item as `rejected`."""
        for item in items:
            validate(item, self.settings.max_content_chars)
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
        with self.store.write() as conn:
            inserted: list[Memory] = []
            for position, item in accepted:
                result, memory = self._insert_or_refresh(conn, item)
                results[position] = result
                if memory is not None:
                    inserted.append(memory)
            if inserted:
                for channel in self.channels:
                    channel.index(conn, inserted)
        return results

    def store_one(self, item: NewMemory) -> IngestResult:
        return self.ingest([item])[0]

    def _insert_or_refresh(self, conn: Any, item: NewMemory) -> tuple[IngestResult, Memory | None]:
        digest = content_hash(item.content)
        ts = now()
        existing = conn.execute(
            "SELECT id, uid FROM memories WHERE content_hash = ? AND deleted = 0 LIMIT 1",
            (digest,),
        ).fetchone()
        if existing:
            conn.execute("UPDATE memories SET updated_at = ? WHERE id = ?", (ts, existing[0]))
            return IngestResult("duplicate", uid=existing[1]), None
        created = float(item.created_at) if item.created_at is not None else ts
        updated = created if item.created_at is not None else ts
        uid = secrets.token_hex(8)
        tags = sorted(set(item.tags))
        cursor = conn.execute(
            "INSERT INTO memories (uid, content, content_hash, kind, source, project, tags, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (uid, item.content, digest, item.kind, item.source, item.project,
             json.dumps(tags, ensure_ascii=False), created, updated),
        )
        memory = Memory(cursor.lastrowid, uid, item.content, item.kind, item.source,
                        item.project, tags, created, updated)
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
        self, query: str, k: int = 10, filters: RecallFilters | None = None
    ) -> list[RecallHit]:
        """Search every channel, fuse with weighted RRF, post-process, return the top k."""
        filters = filters or RecallFilters()
        k = max(1, min(int(k), MAX_RECALL_K))
        if not query or not query.strip():
            return []
        depth = max(k, self.settings.recall_depth)
        with self.store.snapshot() as conn:
            rankings: dict[str, list[int]] = {}
            for channel in self.channels:
                try:
                    rankings[channel.name] = [h.id for h in channel.search(conn, query, depth, filters)]
                except Exception:  # one broken channel must not take recall down
                    log.exception("channel %s failed; recall continues without it", channel.name)
            fused = rrf(rankings, self.weights, self.settings.rrf_k)[:depth]
            memories = self._load(conn, [f.id for f in fused])
            hits = [
                RecallHit(memories[f.id], f.score, f.ranks) for f in fused if f.id in memories
            ]
            self.pm.hook.modify_hits(query=query, hits=hits, settings=self.settings, conn=conn)
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits[:k]

    def injection_block(self, query: str, hits: list[RecallHit], budget_chars: int) -> str:
        """The ready-to-inject text for these hits (empty when nothing fits)."""
        return self.pm.hook.format_injection(query=query, hits=hits, budget_chars=budget_chars) or ""

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

    def export(self, include_deleted: bool = False) -> Iterator[dict[str, Any]]:
        """Every memory as the JSON-lines record `import` accepts, oldest first."""
        cursor = self.store.read().execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories"
            + ("" if include_deleted else " WHERE deleted = 0")
            + " ORDER BY id"
        )
        for row in cursor:
            memory = row_to_memory(row)
            record = memory.to_dict()
            yield {key: record[key] for key in
                   ("content", "kind", "source", "project", "tags", "created_at", "updated_at")}

    def stats(self) -> dict[str, Any]:
        conn = self.store.read()

        def grouped(column: str) -> dict[str, int]:
            return {
                str(name): count
                for name, count in conn.execute(
                    f"SELECT {column}, count(*) FROM memories WHERE deleted = 0 "
                    f"GROUP BY {column} ORDER BY count(*) DESC LIMIT 50"
                )
            }

        live, deleted = conn.execute(
            "SELECT coalesce(sum(deleted = 0), 0), coalesce(sum(deleted = 1), 0) FROM memories"
        ).fetchone()
        week_ago = now() - 7 * DAY
        injections, injections_7d, injected_chars = conn.execute(
            "SELECT count(*), coalesce(sum(ts >= ?), 0), coalesce(sum(chars), 0) FROM injections",
            (week_ago,),
        ).fetchone()
        return {
            "memories": live,
            "deleted": deleted,
            "by_kind": grouped("kind"),
            "by_source": grouped("source"),
            "by_project": grouped("coalesce(project, '')"),
            "channels": [
                {"name": c.name, "weight": self.weights[c.name]} for c in self.channels
            ],
            "injections": {"total": injections, "last_7_days": injections_7d,
                           "chars": injected_chars},
            "db_path": str(self.store.path),
            "db_bytes": self.store.size_bytes(),
            "schema_version": self.store.schema_version,
        }

    # --- telemetry -------------------------------------------------------------------------

    def record_injection(
        self, *, uids: list[str], harness: str | None = None, hook: str | None = None,
        project: str | None = None, query: str | None = None, chars: int = 0,
    ) -> int:
        """Append one injection report; returns its id."""
        with self.store.write() as conn:
            cursor = conn.execute(
                "INSERT INTO injections (ts, harness, hook, project, query, uids, chars) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (now(), harness, hook, project, query, json.dumps(uids), int(chars)),
            )
            conn.executemany(
                "INSERT INTO injection_items (injection_id, uid) VALUES (?, ?)",
                [(cursor.lastrowid, uid) for uid in dict.fromkeys(uids)],
            )
        return int(cursor.lastrowid)

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

    def close(self) -> None:
        self.store.close()
