"""The read path's stages, between the engine's `recall` and its post-processing: search
(every active channel; cheap ones side by side on their own snapshots, expensive ones after,
skipped by the keyword fast path) gathers one `Evidence`; `fuse` turns it into ranked ids.
The engine then loads the memories, drops what only weak verdicts found, runs `modify_hits`,
keeps what a channel vouches for (`Searcher.vouched`) and brings neighbours along."""

from __future__ import annotations

import logging
import math
import numbers
import os
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from . import neardup
from .channels import Channel, Confident
from .config import Settings
from .errors import one_line
from .fusion import (
    Fused,
    finite_number,
    keyword_gated_weights,
    keyword_leads,
    rrf,
    score_fusion,
    with_share,
)
from .models import ChannelHit, Memory, RecallFilters, RecallHit
from .stores import MemoryStore, StoreError
from .supersede import untrusted
from .workers import DaemonPool, Task

log = logging.getLogger("semantic_memory")


#: Memory ids are 64-bit signed integers in both stores (SQLite INTEGER, PostgreSQL bigint).
ID_LIMIT = 2**63
#: How far a hit's score may exceed the one listed before it, as a share of that score (of 1
#: for a score under 1): float noise, as a channel ranking by a rounded score (ties newer
#: first) has.
ORDER_SLACK = 1e-6
#: A search that answered within its deadline but took this share of it is logged (a channel
#: that is one slow day from being left out), at most once a SLOW_LOG_EVERY_S per channel.
SLOW_SHARE = 0.75
SLOW_LOG_EVERY_S = 60.0
#: How much deeper than asked a search may go when untrusted reruns took its places.
RERUN_DEPTH_FACTOR = 8

@dataclass(frozen=True)
class RecallWindow:
    """A recall the service answers (REST or MCP), as `service_recall` sets it for this
    thread: when its request arrived (`started`), when its channel searches must end at the
    latest (the caller's wait less the time for what follows them; None:
    MEMORY_CHANNEL_TIMEOUT_S alone) and when its caller must have the answer (`answer_by`;
    None: the caller said no wait). `time.monotonic()` values. A store that can hold a
    statement to a time (PostgreSQL's `BoundedConnection`) holds the recall's statements
    after the searches to it: a statement waiting on a table lock held the answer 5 s past
    a hook's 1.5 s wait."""

    started: float
    searches_by: float | None = None
    answer_by: float | None = None


_window: ContextVar[RecallWindow | None] = ContextVar("semantic_memory_recall_window",
                                                      default=None)


@contextmanager
def service_recall(started: float, searches_by: float | None = None,
                   answer_by: float | None = None) -> Iterator[None]:
    """Within: this thread's recalls are a service's (`RecallWindow`), their channel searches
    ending by `searches_by` or MEMORY_CHANNEL_TIMEOUT_S, whichever comes first (a hook's
    remaining budget, X-Memory-Wait-Ms: a slow channel is left out in time for the others'
    answer to arrive), their answer due by `answer_by`."""
    token = _window.set(RecallWindow(started, searches_by, answer_by))
    try:
        yield
    finally:
        _window.reset(token)


def current_window() -> RecallWindow | None:
    """The service recall this thread runs (`service_recall`), else None (a command, a
    script's engine, a worker thread)."""
    return _window.get()


@dataclass(frozen=True)
class Deadline:
    """When a recall's channel searches must have answered (`at`, a `time.monotonic()` value;
    inf: never), and what set it, for log lines (`2 s (MEMORY_CHANNEL_TIMEOUT_S)`)."""

    at: float
    seconds: float
    why: str

    def __str__(self) -> str:
        return f"{round(self.seconds, 2):g} s ({self.why})"


NO_DEADLINE = Deadline(math.inf, math.inf, "no limit")


def hook_deadline(settings: Settings) -> Deadline:
    """The deadline of a plugin hook's call after the searches (`modify_hits`,
    `format_injection`; `held.call_held`), from now: MEMORY_CHANNEL_TIMEOUT_S in the service, or
    what the caller can still wait for the answer (`service_recall`'s `answer_by`,
    X-Memory-Wait-Ms) where that comes first; none in a one-off command."""
    window = _window.get()
    return deadline_from(settings.channel_timeout_s if settings.serving else 0.0,
                         None if window is None else window.answer_by)


def deadline_from(timeout: float, until: float | None) -> Deadline:
    """From now: `timeout` seconds (MEMORY_CHANNEL_TIMEOUT_S; 0: none), or `until` (what the
    caller can still wait, a `time.monotonic()` value) where that comes first."""
    now = time.monotonic()
    if until is not None and (timeout <= 0 or until < now + timeout):
        return Deadline(until, max(0.0, until - now),
                        "what its caller could still wait, X-Memory-Wait-Ms")
    if timeout > 0:
        return Deadline(now + timeout, timeout, "MEMORY_CHANNEL_TIMEOUT_S")
    return NO_DEADLINE


class BrokenAnswer(Exception):
    """A channel's search answered against the contract (what `_bad_hits` says)."""


class Failures:
    """The channels whose search failed in one recall, and why (what it raised, or a
    BrokenAnswer), in the order they failed. Each is said in the log ("recall goes on without
    it") only once the recall knows it goes on (`settle`): a recall that fails as a whole
    says so in its one error instead, where each channel's line came first and contradicted
    it. A search that fails after that (one that ran past the deadline) is said as it fails.
    Safe across the recall's threads."""

    def __init__(self) -> None:
        self._why: dict[str, Exception] = {}
        self._lock = threading.Lock()
        self._settled = False
        self._recall_failed = False

    def add(self, channel: str, why: Exception) -> None:
        with self._lock:
            self._why[channel] = why
            settled, recall_failed = self._settled, self._recall_failed
        if recall_failed:  # "goes on without it" would contradict the recall's error
            log.warning("channel %s: search failed (%s), after its recall's deadline",
                        channel, one_line(why))
        elif settled:
            _say_failed(channel, why)

    def settle(self) -> list[tuple[str, Exception]]:
        """The failures so far; any after this is said in the log as it comes."""
        with self._lock:
            self._settled = True
            return list(self._why.items())

    def recall_failed(self) -> None:
        """The recall ended with an error: a failure after this is said as coming after it."""
        with self._lock:
            self._recall_failed = True


def _say_failed(channel: str, why: Exception) -> None:
    if isinstance(why, BrokenAnswer):
        log.warning("channel %s: search %s; recall goes on without it", channel, why)
    else:
        log.warning("channel %s: search failed (%s); recall goes on without it", channel,
                    one_line(why))


def _bad_hits(found: Any) -> str | None:
    """Why a channel's search did not answer as the contract says (None when it did): a list
    of ChannelHit, each with an int id a store can hold, a finite numeric score and signals
    mapping names to finite numbers, best first (no score above the one before it)."""
    if not isinstance(found, list):
        return f"answered {type(found).__name__}, not a list of ChannelHit"
    before = 0.0
    for rank, hit in enumerate(found):
        if not isinstance(hit, ChannelHit):
            return f"answered a {type(hit).__name__} in its list, not a ChannelHit"
        if type(hit.id) is not int:  # a bool or numpy's int: not bindable
            return f"answered a hit with id {hit.id!r}, not an int"
        if not -ID_LIMIT <= hit.id < ID_LIMIT:  # binding it would raise OverflowError
            return f"answered a hit with id {hit.id}, outside the stores' 64-bit integers"
        if not finite_number(hit.score):
            return f"answered a hit with score {hit.score!r}, not a finite number"
        if rank and hit.score > before + ORDER_SLACK * max(1.0, abs(before)):
            # Refused, not sorted: which of the order and the scores is the channel's
            # ranking cannot be told (RRF fuses the order, score fusion the scores).
            return (f"answered hit {rank + 1} with score {hit.score!r} above hit {rank}'s "
                    f"{before!r}: best first, list order must agree with score")
        before = hit.score
        signals = hit.signals
        if signals and (not isinstance(signals, dict) or not all(
                isinstance(k, str) and finite_number(v) for k, v in signals.items())):
            return f"answered a hit with signals {signals!r}, not names to finite numbers"
    return None


def _vouched_ids(answer: Any) -> set[int] | str:
    """The memory ids a `Channel.relevant` answer vouches for: any iterable of ints (a set, a
    list, a generator; numpy's ints too); else what it answered instead, said by type alone (a
    hit's repr would put memory content in the log). Uid strings vouched for nothing,
    silently, and a list failed in the core's own `|=`."""
    if isinstance(answer, (str, bytes, dict)):
        return f"a {type(answer).__name__}"
    try:
        ids = list(answer)
    except TypeError:
        return f"a {type(answer).__name__}"
    for id_ in ids:
        if isinstance(id_, bool) or not isinstance(id_, numbers.Integral):
            return f"a {type(answer).__name__} holding a {type(id_).__name__}"
    return {int(id_) for id_ in ids}


@dataclass
class Evidence:
    """What the channels found for one query, handed from search to fusion and on: each
    channel's ranking and scores, the signals and weak verdicts per memory id, the cheap
    channels' confidence and the expensive channels that answered."""

    keyword: list[str] = field(default_factory=list)
    rankings: dict[str, list[int]] = field(default_factory=dict)
    scored: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    signals: dict[int, dict[str, float]] = field(default_factory=dict)
    #: id -> the channels that found it too weak to stand alone
    weak: dict[int, set[str]] = field(default_factory=dict)
    confidence: float | None = None
    answered: list[Channel] = field(default_factory=list)
    #: the channels whose search failed, and why
    failed: Failures = field(default_factory=Failures)
    #: when the searches had to answer
    deadline: Deadline = field(default_factory=lambda: NO_DEADLINE)
    #: channel -> why it gave no answer by the deadline (still searching, not asked)
    cut: dict[str, str] = field(default_factory=dict)
    #: places searched past the asked depth, as untrusted reruns took some (`Searcher.search`)
    extra: int = 0
    #: the memories of the channels' answers, where the search loaded them to find reruns
    #: (`Searcher._collapsed`): the recall takes its hits from these, not a second load
    memories: dict[int, Memory] = field(default_factory=dict)

    def add(self, channel: Channel, found: list[ChannelHit] | None) -> None:
        if found is None:
            return
        self.rankings[channel.name] = [h.id for h in found]
        self.scored[channel.name] = [(h.id, h.score) for h in found]
        for h in found:
            if h.signals:
                self.signals.setdefault(h.id, {}).update(h.signals)
            if h.weak:
                self.weak.setdefault(h.id, set()).add(channel.name)

    def drop(self, ids: set[int]) -> None:
        """Forget `ids` (ones no memory holds): they take no channel's rank place."""
        for channel, ranking in self.rankings.items():
            self.rankings[channel] = [i for i in ranking if i not in ids]
            self.scored[channel] = [(i, s) for i, s in self.scored[channel] if i not in ids]
        for id_ in ids:
            self.signals.pop(id_, None)
            self.weak.pop(id_, None)

    def trim(self, depth: int, collapsed: dict[str, set[int]]) -> int:
        """Cut each channel's answer to its first `depth` ids that are not in `collapsed` (its
        reruns of a hit ranked before them), those reruns among them kept: what a search
        `depth` deep would have answered, had the reruns taken no place. The most places one
        answer keeps past `depth`."""
        extra = 0
        for channel, ranking in self.rankings.items():
            skip, seen, end = collapsed.get(channel, set()), 0, len(ranking)
            for at, id_ in enumerate(ranking):
                seen += id_ not in skip
                if seen == depth:
                    end = at + 1
                    break
            self.rankings[channel] = ranking[:end]
            self.scored[channel] = self.scored[channel][:end]
            extra = max(extra, end - depth)
        return extra

    def only_weak(self, fused: Fused) -> bool:
        """Whether every channel that found this hit judged it weak (a vector hit below the
        cosine floor that no keyword channel found)."""
        return fused.id in self.weak and self.weak[fused.id] >= set(fused.ranks)


class Searcher:
    """The search stage: one per engine. It keeps a smoothed search time per channel (to plan
    which runs on the caller's thread) and the threads the others run on, and in the service
    holds every search to the recall's deadline (MEMORY_CHANNEL_TIMEOUT_S, or less when the
    caller can wait less: `service_recall`): a channel that has not answered by then is left
    out of the recall, and out of the recalls after it until that search ends. A recall that
    no channel answered in time is an error, not an empty answer (`_settle`)."""

    def __init__(self, store: MemoryStore, settings: Settings, channels: list[Channel],
                 weights: dict[str, float], score_weights: dict[str, float]) -> None:
        self.store, self.settings, self.channels = store, settings, channels
        self.weights, self.score_weights = weights, score_weights
        self._workers: DaemonPool | None = None  # made on first use
        self._pool_lock = threading.Lock()
        self._cost: dict[str, float] = {}  # channel -> smoothed seconds per search
        # Who may search on the caller's thread, where nothing can stop waiting for it: a
        # channel that declares its search bounded (`Channel.search_on_caller_thread`), has
        # answered within the deadline and never overran it.
        self._proven: set[str] = set()
        self._overran: set[str] = set()
        self._late: set[str] = set()  # a search past its deadline is still running
        # channel -> {search number: start} of its searches running on a caller's thread
        self._here: dict[str, dict[int, float]] = {}
        self._here_lock = threading.Lock()
        self._numbers = count()
        self._slow_logged: dict[str, float] = {}  # channel -> when its last "slow" line went

    def search(self, conn: Any, query: str, depth: int, filters: RecallFilters) -> Evidence:
        """Every active channel's best `depth` for `query` (`_gather`), deeper where untrusted
        reruns (`neardup.rerun`) took places in a channel's full answer: they take one slot
        in relevant-only recall and the block, so each collapsed rerun is a candidate the
        recall did not see. Sixty captures of one template otherwise filled the 50 places and
        the user's decision ranked 61st was never a candidate. Up to RERUN_DEPTH_FACTOR x
        `depth`; each channel's answer is then cut back to `depth` places besides its
        collapsed reruns (a channel without any answers as before), and the places past
        `depth` are `Evidence.extra` for `fuse`."""
        deadline = self._deadline()
        evidence = self._gather(conn, query, depth, filters, deadline)
        deeper, cap = depth, depth * RERUN_DEPTH_FACTOR
        if not any(len(r) >= depth for r in evidence.rankings.values()):
            return evidence  # every answer short: nothing was left unseen
        collapsed = self._collapsed(conn, evidence)
        while deeper < cap and (lost := max((len(collapsed[name]) for name, r
                                             in evidence.rankings.items() if len(r) >= deeper),
                                            default=0)) \
                and depth + lost > deeper and time.monotonic() < deadline.at:
            deeper = min(cap, max(depth + lost, 2 * deeper))
            evidence = self._gather(conn, query, deeper, filters, deadline)
            collapsed = self._collapsed(conn, evidence)
        if deeper > depth:
            evidence.extra = evidence.trim(depth, collapsed)
        return evidence

    def _collapsed(self, conn: Any, evidence: Evidence) -> dict[str, set[int]]:
        """channel -> the ids in its answer that are `neardup.rerun`s of an untrusted hit it
        ranked before them."""
        memories = evidence.memories = self.store.load(
            conn, list({i for r in evidence.rankings.values() for i in r}))
        out: dict[str, set[int]] = {}
        for name, ranking in evidence.rankings.items():
            kept: list[Memory] = []
            out[name] = set()
            for id_ in ranking:
                memory = memories.get(id_)
                if memory is None or not untrusted(memory.source):
                    continue
                if any(neardup.rerun(memory, other) for other in kept):
                    out[name].add(id_)
                else:
                    kept.append(memory)
        return out

    def _gather(self, conn: Any, query: str, depth: int, filters: RecallFilters,
                deadline: Deadline) -> Evidence:
        """Every active channel's best `depth` for `query`: the cheap ones at once, then the
        expensive ones unless the keyword fast path says the cheap ones are sure enough."""
        live = [c for c in self.channels if c.active]
        cheap = [c for c in live if not c.expensive]
        expensive = [c for c in live if c.expensive]
        evidence = Evidence(keyword=[c.name for c in cheap], deadline=deadline)
        found = self._search_at_once(cheap, conn, query, depth, filters, evidence)
        for channel in cheap:  # a fixed order: ties fuse the same way every time
            evidence.add(channel, found[channel.name])
        if expensive:
            evidence.confidence = self._keyword_confidence(conn, query, evidence.rankings)
        names = [c.name for c in expensive]
        for channel in expensive:
            if (self.settings.fast_path and evidence.confidence is not None
                    and evidence.confidence >= self.settings.fast_path_min
                    and keyword_leads(self.weights, evidence.keyword, names)):
                continue
            evidence.add(channel, self._search_at_once(
                [channel], conn, query, depth, filters, evidence)[channel.name])
        evidence.answered = [c for c in expensive if c.name in evidence.rankings]
        self._settle(evidence)
        return evidence

    def _settle(self, evidence: Evidence) -> None:
        """What the failed and cut-off searches make of the recall: the store's own error
        when the channels found nothing and one failed on the store's state (its StoreError,
        or what `MemoryStore.damage` words: a damaged file, a server down, past its deadline
        or refusing the role), the first such failure, as a later one on the same connection
        only follows from it (a connection the deadline closed, a transaction aborted); "no
        channel answered within" the deadline when none answered and one was cut off;
        "every channel's search failed" when none answered; else each failure in the log, as
        the recall goes on without it."""
        failed = evidence.failed.settle()
        try:
            self._fail_whole(evidence, failed)
        except StoreError:
            evidence.failed.recall_failed()
            raise
        for name, why in failed:
            _say_failed(name, why)

    def _fail_whole(self, evidence: Evidence, failed: list[tuple[str, Exception]]) -> None:
        """`_settle`'s errors: raises StoreError when the recall cannot answer."""
        if failed and not any(evidence.rankings.values()):
            # A damaged store is not one broken channel: "nothing matched" would hide it
            # behind an empty answer (a CJK-only channel answers every other query empty).
            for _, exc in failed:
                words = str(exc) if isinstance(exc, StoreError) else self.store.damage(exc)
                if words is not None:
                    raise StoreError(words) from exc
        if evidence.cut and not evidence.rankings:
            # Not "nothing matched": nothing answered in time (a table locked under every
            # channel, a server that stopped answering, channels stuck), and the searches of
            # the recalls after it are skipped while the late ones run.
            why = [f"{name}: {reason}" for name, reason in evidence.cut.items()]
            why += [f"{name}: {one_line(exc)}" for name, exc in failed]
            raise StoreError(f"recall failed: no channel answered within the recall's "
                             f"{evidence.deadline} ({'; '.join(why)}); the store may be "
                             "locked or not answering, or the channels stuck")
        if failed and not evidence.rankings:
            # Not "nothing matched": nothing could be searched (e.g. the store refused every
            # channel's query). One broken channel is left out; all of them is the store's
            # error, said as such.
            raise StoreError("recall failed: every channel's search failed ("
                             + "; ".join(f"{n}: {one_line(why)}" for n, why in failed)
                             + ")") from failed[0][1]

    def fuse(self, evidence: Evidence, depth: int) -> tuple[list[Fused], bool]:
        """The fused ranking (best `depth`) and whether it fused by score. Score fusion mixes
        normalised scores (an answering embedder holding its share), which also say how sure
        a hit is for the neighbour decay; RRF mixes ranks, its keyword weights gated by the
        cheap channels' confidence when an embedder leads (docs/retrieval.md, "Fusion")."""
        answered = [c.name for c in evidence.answered]
        if self.settings.fusion == "score":
            share = self.settings.fusion_vector_share
            if share < 0 and evidence.answered:  # the embedder's own
                own = evidence.answered[0].fusion_share
                share = 0.5 if own is None else own
            weights = with_share(self.score_weights, answered, share)
            return score_fusion(evidence.scored, weights, limit=depth + evidence.extra,
                                lead=self.settings.fusion_lead), True
        weights = keyword_gated_weights(self.weights, evidence.keyword, answered,
                                        evidence.confidence, self.settings.fusion_gate_power)
        return rrf(evidence.rankings, weights, self.settings.rrf_k,
                   limit=depth + evidence.extra), False

    def neighbour_gap(self, evidence: Evidence) -> float:
        """How many ranks behind its hit a session neighbour goes: MEMORY_NEIGHBOUR_GAP, else
        1, or the answering embedder's own."""
        gap = self.settings.neighbour_gap
        if gap >= 0:
            return gap
        return (evidence.answered[0].neighbour_gap or 1.0) if evidence.answered else 1.0

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None

    def vouched(self, conn: Any, query: str, hits: list[RecallHit], k: int) -> list[RecallHit]:
        """The best k hits that some channel vouches for, in rank order. Channels opt in with
        `relevant(conn, query, hits) -> set of ids` (BM25: IDF coverage of the query at least
        MEMORY_INJECT_MIN_COVERAGE; vector: cosine at least its floor). A verdict is the hit's
        own, whatever else is judged with it: the top k are judged first, so a strong top k
        costs one call per channel, and the rest together (a page at a time cost a call per
        channel and page: 4.3 pages on average for the global memories of a hook's recall).
        An untrusted hit that differs from one kept only in digit-holding words
        (`neardup.rerun`: a test run or a build captured again) takes no slot of its own: the
        block shows one of them anyway, and captured variants took all five slots from the
        user's decision ranked below them. (Near-duplicates in words stay: the block's
        `neardup.distinct` picks the compact one of them.)"""
        judges = [c for c in self.channels if c.active]
        kept: list[RecallHit] = []
        for page in (hits[:k], hits[k:]):
            if not page:
                break
            vouched: set[int] = set()
            for channel in judges:
                try:
                    with self._kept_usable(conn, shared=True):
                        answer = channel.relevant(conn, query, page)
                        ids = _vouched_ids(answer)  # a generator's error is the channel's
                except Exception as exc:  # noqa: BLE001 - no verdict from this channel
                    log.warning("channel %s: relevant failed (%s)", channel.name, one_line(exc))
                    continue
                if isinstance(ids, str):
                    log.warning("channel %s: relevant answered %s, not memory ids (ints); no "
                                "verdict from it", channel.name, ids)
                else:
                    vouched |= ids
            for hit in page:
                if hit.memory.id in vouched and not any(
                        neardup.rerun(hit.memory, other.memory) for other in kept):
                    kept.append(hit)
            if len(kept) >= k:
                break
        return kept[:k]

    def _search(
        self, channel: Channel, conn: Any, query: str, depth: int, filters: RecallFilters,
        failed: Failures, deadline: Deadline, here: bool = False, shared: bool = True,
    ) -> list[ChannelHit] | None:
        """One channel's hits; None when it fails, said in `failed` (one broken channel must
        not take recall down; on `shared`, the recall's own connection, nor the statements
        after it: `_kept_usable`). Keeps a smoothed search time per channel (`recall` plans with
        it), and whether the channel keeps within MEMORY_CHANNEL_TIMEOUT_S (only then may it
        search on the caller's thread: `here`); a search that took most of its deadline is
        logged, as is one on the caller's thread that overran it."""
        start = time.perf_counter()
        allowed = deadline.at - time.monotonic()
        try:
            with self._kept_usable(conn, shared):
                found = channel.search(conn, query, depth, filters)
        except Exception as exc:  # noqa: BLE001
            failed.add(channel.name, exc)
            return None
        else:
            problem = _bad_hits(found)
            if problem is None:
                return found
            failed.add(channel.name, BrokenAnswer(problem[:300]))
            return None
        finally:
            took = time.perf_counter() - start
            self._cost[channel.name] = 0.8 * self._cost.get(channel.name, took) + 0.2 * took
            self._judge(channel.name, took, allowed, deadline, here)
            if self.settings.trace_hooks:  # MEMORY_TRACE_HOOKS covers channel calls too
                sys.stderr.write(f"channel {channel.name}.search(k={depth}) "
                                 f"{took * 1000:.1f} ms\n")

    def _judge(self, name: str, took: float, allowed: float, deadline: Deadline,
               here: bool) -> None:
        """What a search's time says: whether the channel may search on the caller's thread
        (it kept within MEMORY_CHANNEL_TIMEOUT_S, and always has), and the log line for one
        that took most of its deadline (at most one a SLOW_LOG_EVERY_S), or overran it on the
        caller's thread (a worker's overrun is `_await`'s line)."""
        timeout = self._timeout()
        if timeout > 0 and took > timeout:
            if here and name not in self._overran:
                log.warning("channel %s: search on the recall's own thread took %.2g s, past "
                            "%g s (MEMORY_CHANNEL_TIMEOUT_S); it searches on a worker thread "
                            "held to the deadline from now on", name, took, timeout)
            self._overran.add(name)
            self._proven.discard(name)
        elif name not in self._overran:
            self._proven.add(name)
        if deadline.at == math.inf or not SLOW_SHARE * allowed <= took <= allowed:
            return
        now = time.monotonic()
        if now - self._slow_logged.get(name, -math.inf) >= SLOW_LOG_EVERY_S:
            self._slow_logged[name] = now
            log.warning("channel %s: search took %.2g s of the %.2g s it had (%s): slow; "
                        "past it the recall goes on without it", name, took, allowed,
                        deadline.why)

    def _timeout(self) -> float:
        """MEMORY_CHANNEL_TIMEOUT_S where an agent waits on the answer (the service, HTTP or
        stdio); 0, no limit, in a one-off command: its user can interrupt it, and its first
        search may load a model (seconds for a large one) that a limit would leave out."""
        return self.settings.channel_timeout_s if self.settings.serving else 0.0

    def _deadline(self) -> Deadline:
        """This search's deadline: MEMORY_CHANNEL_TIMEOUT_S from now (in the service), or what
        the caller can still wait (`service_recall`) where that comes first."""
        window = _window.get()
        return deadline_from(self._timeout(), None if window is None else window.searches_by)

    def _search_at_once(
        self, channels: list[Channel], conn: Any, query: str, depth: int,
        filters: RecallFilters, evidence: Evidence,
    ) -> dict[str, list[ChannelHit] | None]:
        """Every channel's hits (None: no answer), searched at the same time, each on its own
        read snapshot (SQLite releases the GIL while it searches; PostgreSQL searches in its
        own process). This thread takes the slowest channel it may search itself
        (`_bounded`) and the workers the others, held to the deadline: measured ~0.7 ms
        better at 100k memories than the other way round, as each thread's page cache keeps
        serving the same index, and ~0.6 ms better than every channel on a worker (2 to 7 ms
        on a busy 2-core machine). A channel the store has no spare snapshot for (a busy
        connection pool) searches here afterwards, on the caller's connection. A channel
        still running a search that overran is not asked again until that search ends; none
        is asked once the channels searched before (the cheap ones, for an expensive one)
        took the deadline, and the log line says so, but for those it may search itself
        (milliseconds, one after another here: a project's recall still brings its global
        memories). Each channel that gives no answer by the deadline is noted in
        `evidence.cut` (with why), as is one left out while a search of it runs late."""
        deadline, failed, cut = evidence.deadline, evidence.failed, evidence.cut
        found: dict[str, list[ChannelHit] | None] = {c.name: None for c in channels}
        late = set(self._late)  # other threads change it as late searches end
        runnable = [c for c in channels if c.name not in late]
        for channel in channels:
            if channel.name in late:
                cut[channel.name] = "a search of it from an earlier recall still runs"
        bounded = self._bounded(runnable)
        if runnable and time.monotonic() >= deadline.at:  # channels searched before took it
            for channel in runnable:
                if channel in bounded:  # milliseconds: a project's recall keeps its globals
                    found[channel.name] = self._search_here(channel, conn, query, depth,
                                                            filters, failed, deadline)
                else:
                    cut[channel.name] = "not searched, the channels before it took the time"
                    log.warning("channel %s: not searched: the channels searched before it "
                                "took the recall's %s; recall goes on without it",
                                channel.name, deadline)
            return found
        here = max(bounded, key=lambda c: self._cost.get(c.name, 0.0), default=None)
        tasks = [(c, self._pool().submit(self._search_beside, c, query, depth, filters,
                                         failed, deadline))
                 for c in runnable if c is not here]
        if here is not None:
            found[here.name] = self._search_here(here, conn, query, depth, filters, failed,
                                                 deadline)
        for channel, task in tasks:
            answer = self._await(channel, task, deadline, cut)
            if answer is not None:
                spared, hits = answer
                found[channel.name] = hits if spared else self._search(
                    channel, conn, query, depth, filters, failed, deadline)
        return found

    def _bounded(self, runnable: list[Channel]) -> list[Channel]:
        """The channels this thread may search itself: those that declare their search
        bounded (`Channel.search_on_caller_thread`; never a third party's by default), have
        answered within MEMORY_CHANNEL_TIMEOUT_S and never overran it, and have no search on
        another recall's thread running past it (one stuck there: this recall asks a worker,
        held to the deadline). The slowest of them searches here, the others on workers."""
        timeout, now = self._timeout(), time.monotonic()
        with self._here_lock:
            stuck = {name for name, starts in self._here.items()
                     if timeout > 0 and starts and now - min(starts.values()) > timeout}
        return [c for c in runnable if c.search_on_caller_thread and c.name in self._proven
                and c.name not in stuck]

    def _search_here(
        self, channel: Channel, conn: Any, query: str, depth: int, filters: RecallFilters,
        failed: Failures, deadline: Deadline,
    ) -> list[ChannelHit] | None:
        """`_search` on the caller's thread, seen by concurrent recalls while it runs."""
        number = next(self._numbers)
        with self._here_lock:
            self._here.setdefault(channel.name, {})[number] = time.monotonic()
        try:
            return self._search(channel, conn, query, depth, filters, failed, deadline,
                                here=True)
        finally:
            with self._here_lock:
                self._here[channel.name].pop(number, None)

    def _await(self, channel: Channel, task: Task, deadline: Deadline, cut: dict[str, str]
               ) -> tuple[bool, list[ChannelHit] | None] | None:
        """A worker's answer for `channel` by the deadline, else None (one log line, and why
        in `cut`)."""
        timeout = None if deadline.at == math.inf else max(0.0, deadline.at - time.monotonic())
        try:
            return task.future.result(timeout=timeout)
        except FutureTimeout:
            pass
        if task.future.cancel():  # never started: every worker was busy
            cut[channel.name] = "no thread was free to search"
            log.warning("channel %s: no thread was free to search within the recall's %s; "
                        "recall goes on without it", channel.name, deadline)
            return None
        if not self._pool().write_off(task):  # it ended just now
            return task.future.result()
        cut[channel.name] = "still searching"
        self._late.add(channel.name)
        task.future.add_done_callback(lambda _: self._late.discard(channel.name))
        log.warning("channel %s: search took longer than %s; recall goes on without it until "
                    "that search ends", channel.name, deadline)
        return None

    def _search_beside(
        self, channel: Channel, query: str, depth: int, filters: RecallFilters,
        failed: Failures, deadline: Deadline,
    ) -> tuple[bool, list[ChannelHit] | None]:
        """(whether the store spared a snapshot, the channel's hits in it)."""
        with self.store.spare_snapshot() as conn:
            if conn is None:
                return False, None
            return True, self._search(channel, conn, query, depth, filters, failed, deadline,
                                      shared=False)

    def _kept_usable(self, conn: Any, shared: bool) -> AbstractContextManager[None]:
        """Around a channel's call on the recall's own connection: a savepoint, so that a
        statement of the channel's that fails leaves the connection usable for the channels
        and stages after it (PostgreSQL aborts the whole transaction at a failed statement:
        one third party's SQL error failed every channel after it). Two statements a call,
        microseconds on SQLite, two round trips on PostgreSQL. A spare snapshot serves one
        channel and is given back: nothing after it to keep."""
        return self.store.savepoint(conn, "channel_call") if shared else nullcontext()

    def _pool(self) -> DaemonPool:
        """Threads for channel searches beyond the caller's own (one per CPU, made once)."""
        with self._pool_lock:
            if self._workers is None:
                self._workers = DaemonPool(os.cpu_count() or 2, "recall")
            return self._workers

    def _keyword_confidence(
        self, conn: Any, query: str, rankings: dict[str, list[int]]
    ) -> float | None:
        """How sure the cheap channels already are (0..1): the highest `confidence` any of
        them reports for its own ranking (channels opt in with
        `confidence(conn, query, ids) -> float | None`, e.g. BM25's IDF coverage)."""
        best: float | None = None
        for channel in self.channels:
            if not isinstance(channel, Confident):
                continue
            name = channel.name  # type: ignore[attr-defined]
            if name not in rankings:
                continue
            try:
                with self._kept_usable(conn, shared=True):
                    value = channel.confidence(conn, query, rankings[name])
            except Exception as exc:  # noqa: BLE001 - no verdict, no fast path
                log.warning("channel %s: confidence failed (%s)", name, one_line(exc))
                continue
            if value is not None and (best is None or value > best):
                best = float(value)
        return best
