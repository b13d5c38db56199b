"""The contract a retrieval channel implements."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .models import ChannelHit, Memory, RecallFilters, RecallHit


@runtime_checkable
class Channel(Protocol):
    """A retrieval channel. Registered through the `register_channels` hook.

    A channel owns its own tables inside the store, and speaks the stores it names in `stores`
    (`MemoryStore.name`; the engine skips it on any other): `conn` is that store's DB-API
    connection (sqlite3, psycopg). `setup` runs once per process with a write connection;
    `index` runs inside the same transaction as every insert (channels kept in step by SQL
    triggers may do nothing there); `search` returns the best `k` candidates. The
    engine searches cheap channels at once, on pool threads with a connection each: `search`
    uses only the connection it is given and keeps any shared state thread-safe.

    Optional members (the engine checks with getattr; BM25 channels need none of them):

    - `use_embedder(embedder | None)`: called once with the configured embedder
      (`register_embedders`, MEMORY_EMBEDDER).
    - `use_store(store)`: called once with the `MemoryStore` (e.g. to count outside a recall).
    - `prepare(new_memories) -> list`: runs before the write transaction (not under the write
      lock: embedding goes here), one value per item; that value is handed to
      `find_duplicate` and, as `index(conn, memories, prepared)`, to `index`.
    - `find_duplicate(conn, new_memory, prepared) -> int | None`: inside the write
      transaction, after the exact-hash check: the id of a live memory this one duplicates
      (e.g. a vector near-duplicate); the existing entry is refreshed instead of inserting.
    - `unindex(conn, ids)`: an edit (`MemoryEngine.update`) keeps the memory's id and
      rewrites its row; before `index` is called again with the new text, this drops what the
      channel derived from the old one that an upsert would not replace (e.g. a vector, when
      the new text could not be embedded). Channels kept in step by SQL triggers on
      `UPDATE OF content`, or whose `index` upserts, need none.
    - `expensive = True`: the keyword fast path may skip this channel when a cheap channel's
      `confidence(conn, query, ids) -> float | None` (0..1) reaches MEMORY_FAST_PATH_MIN.
    - `embedder_info()`, `backfill(store[, progress])`: stats and `memory-mcp backfill`.
    - `export_vectors(store)` -> (uid, model, dim, vector) rows and
      `import_vectors(conn, rows) -> count`: `memory-mcp migrate` copies a store's vectors
      with their model tags instead of embedding again.
    - `relevant(conn, query, hits) -> set of ids`: the hits this channel vouches for when a
      recall asks for relevant hits only (what hooks inject); a hit any channel vouches for
      goes in.
    """

    name: str
    #: Default weight in fusion; MEMORY_CHANNEL_WEIGHTS overrides it. A channel may name a
    #: different `score_weight` for score fusion, where its normalised scores rather than its
    #: ranks are mixed (the override sets both).
    weight: float
    #: The stores (`MemoryStore.name`) whose connections it speaks; ("sqlite",) when absent.
    stores: tuple[str, ...]

    def setup(self, conn: Any) -> None: ...

    def index(self, conn: Any, memories: list[Memory]) -> None: ...

    def search(
        self, conn: Any, query: str, k: int, filters: RecallFilters
    ) -> list[ChannelHit]: ...


class EmbeddingChannel:
    """What a vector channel takes from the engine's embedder (`use_embedder`): its default
    weight, score-fusion share and neighbour gap are the model's, and it is `active` (and
    `expensive`: the keyword fast path may skip it) only with a usable model."""

    embedder: Any = None

    def use_embedder(self, embedder: Any) -> None:
        """Called by the engine with the configured embedder (or None)."""
        self.embedder = embedder

    @property
    def expensive(self) -> bool:
        """Embedding the query costs model time; an inactive channel costs nothing."""
        return self.active

    @property
    def weight(self) -> float:
        """Default fusion weight: the embedder's (a model property, like its prompts)."""
        return float(getattr(self.embedder, "fusion_weight", 1.0) or 1.0)

    @property
    def fusion_share(self) -> float:
        """Its share of the weight under score fusion (MEMORY_FUSION=score): the embedder's."""
        return float(getattr(self.embedder, "fusion_share", 0.5))

    @property
    def neighbour_gap(self) -> float:
        """Where session neighbours go when this channel answers: the embedder's choice."""
        return float(getattr(self.embedder, "neighbour_gap", 1.0))

    @property
    def active(self) -> bool:
        return self.inactive_reason() is None and self.embedder.model_id is not None

    def describe_embedder(self) -> dict[str, Any]:
        """The model part of `embedder_info()`: channel, active, the embedder's own `info()`
        (model, dim, device…), and `mode` hybrid, or bm25-only with the `reason`."""
        info: dict[str, Any] = {"channel": getattr(self, "name", ""), "active": self.active}
        if self.embedder is not None:
            describe = getattr(self.embedder, "info", None)
            info.update(describe() if callable(describe) else {
                "model_id": getattr(self.embedder, "model_id", None),
                "dim": getattr(self.embedder, "dim", None)})
        reason = self.inactive_reason()
        if reason:
            info["reason"] = reason
        info["mode"] = "bm25-only" if reason else "hybrid"
        return info

    def inactive_reason(self) -> str | None:
        """Why the channel is off (no model, a model that failed to load), None when on."""
        if self.embedder is None:
            return "no embedder plugin installed"
        if not getattr(self.embedder, "available", True):
            return getattr(self.embedder, "error", None) or "embedder unavailable"
        return None


def apply_cosine_floor(hits: list[RecallHit], configured: float, channel: str, signal: str
                       ) -> None:
    """Drop the hits only `channel` (a vector channel) found whose cosine is below the floor:
    `configured` (MEMORY_RECALL_MIN_COSINE) when >= 0, else the model's own, which the channel
    carries in each hit's `signal` (removed here); 0 = off. Fusion gives the nearest of the
    irrelevant a score too; a keyword hit always passes."""
    kept = []
    for hit in hits:
        model_floor = hit.signals.pop(signal, 0.0)
        floor = configured if configured >= 0 else model_floor
        if floor > 0 and set(hit.ranks) == {channel} and hit.signals.get("cosine", 1.0) < floor:
            continue
        kept.append(hit)
    hits[:] = kept


def skip_reason(channel: Channel, store: str) -> str | None:
    """Why `channel` cannot run on the store named `store`; None when it can."""
    speaks = tuple(getattr(channel, "stores", ("sqlite",)))
    if store in speaks:
        return None
    return f"works with the {', '.join(speaks)} store, not {store}"
