"""The contract every retrieval channel implements: `Channel` and its optional capabilities
(a vector channel's shared base, `EmbeddingChannel`, is in `embedding_channel.py`).

A capability is a mixin a channel class inherits; the engine sorts channels by capability once,
when it opens (`isinstance`), and never probes members on a hot path. Every member is documented
in docs/plugins.md, and `tests/test_plugin_contract.py` checks that page against this module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from .fusion import range_problem
from .models import PLUGIN_NAME, ChannelHit, Memory, NewMemory, RecallFilters, RecallHit

if TYPE_CHECKING:
    from .embedders import Embedder
    from .stores import MemoryStore


class Channel(ABC):
    """A retrieval channel, registered through the `register_channels` hook.

    A channel owns its own tables inside the store and speaks the stores named in `stores`
    (`MemoryStore.name`; the engine leaves it out on any other): `conn` is that store's DB-API
    connection (sqlite3, psycopg). The engine searches channels at the same time, on pool
    threads with a read snapshot each: `search` uses only the connection it is given and keeps
    any shared state thread-safe.

    Hits: `search` returns at most `k` `ChannelHit(id, score)` for live memories matching the
    filters, **best first; a higher score is better, and list order must agree with score**
    (negate a distance). Under RRF fusion only the order counts; under score fusion (the
    default, MEMORY_FUSION=score) the scores are min-max normalised per channel, so they must be
    comparable within one result list.

    Failures are isolated: a channel whose `index` raises is left out of that write (the memory
    is stored and the other channels index it; `memory-mcp backfill` or the channel's own
    catch-up repairs it); one whose `search` raises or returns anything but a list of
    `ChannelHit` is left out of that recall. Both are logged in one line naming the channel.
    """

    #: Unique among installed channels ("porter", "trigram", "vector", …): it keys fusion
    #: weights (MEMORY_CHANNEL_WEIGHTS), `/api/search`'s per-channel ranks and its own settings.
    name: str = ""
    #: Default weight in RRF fusion; MEMORY_CHANNEL_WEIGHTS overrides it.
    weight: float = 1.0
    #: Default weight in score fusion; None means `weight`.
    score_weight: float | None = None
    #: The stores (`MemoryStore.name`) whose connections this channel speaks.
    stores: tuple[str, ...] = ("sqlite",)
    #: An expensive channel's share of the weight under score fusion when it answers; None:
    #: MEMORY_FUSION_VECTOR_SHARE's default (0.5). `EmbeddingChannel` takes the model's.
    fusion_share: float | None = None
    #: An expensive channel's neighbour gap when it answers; None: 1. The model's, likewise.
    neighbour_gap: float | None = None
    #: True only for a search bounded by the store's own work (the project's FTS5 channels: a
    #: query over their index in the db file, no model, network or lock of their own): the
    #: service may run it on the recall's own thread, a thread hop cheaper, where no deadline
    #: can stop it. Default False: in the service every search of the channel runs on a
    #: worker held to the recall's deadline, so one that hangs holds that thread, not recalls.
    search_on_caller_thread: ClassVar[bool] = False

    @property
    def active(self) -> bool:
        """False while the channel cannot answer (e.g. no model): the engine skips its
        `prepare`, `find_duplicate` and `search`. Default: always active."""
        return True

    @property
    def expensive(self) -> bool:
        """True when a search costs model time: the keyword fast path may skip it when a
        `Confident` channel is sure already (MEMORY_FAST_PATH_MIN). Default: False."""
        return False

    def bind(self, *, store: MemoryStore, embedder: Embedder | None) -> None:
        """Called once, before `setup`, with the open store and the engine's chosen embedder
        (None when none is installed or chosen). Default: nothing."""

    def setup(self, conn: Any) -> None:
        """Create or migrate the channel's tables; runs once per process in a write
        transaction. Must be idempotent. Default: nothing."""

    @abstractmethod
    def index(self, conn: Any, memories: list[Memory],
              prepared: Sequence[Any] | None = None) -> None:
        """Index new memories inside the write transaction that inserts them (a channel kept
        in step by SQL triggers may do nothing). `prepared` holds one `Prepares.prepare` value
        per memory when the channel prepares, else None."""

    @abstractmethod
    def search(self, conn: Any, query: str, k: int, filters: RecallFilters
               ) -> list[ChannelHit]:
        """The best `k` live memories for `query` under `filters`, best first (see above)."""

    def forget(self, conn: Any, ids: list[int]) -> None:
        """Drop what the channel derived from these memory ids, inside the write transaction:
        before an edited memory is indexed again, and when a purge hard-deletes memories (ids
        of purged memories may be reused by later inserts). Channels kept in step by SQL
        triggers need nothing. Default: nothing."""

    def purged(self) -> str | None:
        """After a purge committed (`memory-mcp purge`, `purge --matching`, the service's own
        maintenance): rewrite any copy the channel keeps outside the store's tables (an index
        file) without the memories that went, so that their text, or anything derived from
        it, is in no file. Returns one line for the person when that could not be done now,
        else None. Default: nothing kept outside the store."""
        return None

    def status(self) -> str | None:
        """One line on how the channel answers now, for `memory-mcp stats` (e.g. whether an
        index it builds in the background is in use yet). Default: None, nothing to say."""
        return None

    def relevant(self, conn: Any, query: str, hits: list[RecallHit]) -> set[int]:
        """The ids among `hits` this channel vouches for when a recall asks for relevant hits
        only (what hooks inject). A hit any channel vouches for goes in; a channel that
        vouches for none never brings a memory into a hook's injection. Each hit is judged on
        its own: the engine asks about the top k first, then about the rest together.
        Default: none."""
        return set()


class Prepares(ABC):
    """Capability: work before the write transaction (e.g. embedding), and near-duplicate
    detection with its result. The engine calls these only while the channel is `active`; an
    inactive one leaves ingest on the batch path."""

    @abstractmethod
    def prepare(self, memories: Sequence[NewMemory]) -> list[Any]:
        """One value per memory, computed outside the write lock; handed to `find_duplicate`
        and, as `prepared`, to `index`."""

    def find_duplicate(self, conn: Any, memory: NewMemory, prepared: Any) -> int | None:
        """Inside the write transaction, after the exact-text check: the id of a live memory
        this one duplicates (the existing one is refreshed instead). Default: None."""
        return None


class Deferrable(ABC):
    """Capability of a `Prepares` channel whose preparation may wait (embedding): where the
    service runs its embedding queue, ingest stores and keyword-indexes a memory at once and
    this channel's `prepare` + `index` run later, in the background (`Writer.catch_up`); the
    queue is what `pending_ids` answers, so it persists and resumes with the store."""

    @abstractmethod
    def pending_ids(self, conn: Any, limit: int) -> list[int]:
        """Up to `limit` ids of live memories this channel has not indexed yet, oldest first."""

    @abstractmethod
    def pending_count(self, conn: Any) -> int:
        """How many live memories this channel has not indexed yet (the queue's depth)."""


class Confident(ABC):
    """Capability: how sure a cheap channel is of its own ranking, for the keyword fast path
    (skip `expensive` channels when it reaches MEMORY_FAST_PATH_MIN)."""

    @abstractmethod
    def confidence(self, conn: Any, query: str, ids: list[int]) -> float | None:
        """0..1 for this channel's ranking `ids` of `query`, or None for no opinion."""


class Backfills(ABC):
    """Capability: derived data that can lag behind the memories (vectors), filled in by
    `memory-mcp backfill`, and shown by `stats`/`doctor`."""

    @abstractmethod
    def backfill(self, store: MemoryStore,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Fill in what live memories lack; returns at least {"embedded": count}. `progress`
        is called with (done, total)."""

    @abstractmethod
    def embedder_info(self) -> dict[str, Any] | None:
        """Model, dim, device, vectorized count (or None): `stats`, `doctor`, `/api/stats`."""


class TransfersVectors(ABC):
    """Capability: `memory-mcp migrate` copies vectors with their model tag instead of
    embedding again."""

    @abstractmethod
    def export_vectors(self, store: MemoryStore) -> Iterable[tuple[str, str, int, Any]]:
        """(uid, model id, dim, float32 vector) of every stored vector."""

    @abstractmethod
    def import_vectors(self, conn: Any, rows: list[tuple[str, str, int, Any]]) -> int:
        """Store exported (uid, model id, dim, vector) rows for the memories of those uids
        stored here, with their own model tags; returns how many were kept."""


def check_channel(obj: Any) -> str | None:
    """Why `obj` cannot be registered as a channel (None when it can)."""
    if not isinstance(obj, Channel):
        return f"{type(obj).__name__} is not a semantic_memory.channels.Channel"
    if not isinstance(obj.name, str) or not PLUGIN_NAME.match(obj.name):
        return (f"{type(obj).__name__} has no valid name (got {obj.name!r}; a name is 1 to 64 "
                "letters, digits, _ . : -, starting with a letter or digit)")
    if type(obj.search_on_caller_thread) is not bool:
        return (f"channel {obj.name!r}: search_on_caller_thread must be True or False, not "
                f"{obj.search_on_caller_thread!r}")
    for problem in (range_problem("weight", obj.weight),
                    range_problem("score_weight", obj.score_weight, optional=True),
                    range_problem("fusion_share", obj.fusion_share, 1.0, optional=True),
                    range_problem("neighbour_gap", obj.neighbour_gap, optional=True)):
        if problem:
            return f"channel {obj.name!r}: {problem}"
    return None


def skip_reason(channel: Channel, store: str) -> str | None:
    """Why `channel` cannot run on the store named `store`; None when it can."""
    if store in channel.stores:
        return None
    return f"works with the {', '.join(channel.stores)} store, not {store}"
