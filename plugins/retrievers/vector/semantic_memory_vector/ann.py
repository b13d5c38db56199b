"""An approximate nearest-neighbour index (usearch HNSW) beside the db, for large stores.

Layout: `<db>.vectors/` holds `index-<token>.usearch` (HNSW graph + i8 vectors) and
`stamp.json` (model, dim, count, the `vector_state` seq/deletes it reflects, its last memory id
and that row's seq). At start the index is memory-mapped (`Index.restore(view=True)`): nothing
is loaded into RAM and nothing is rebuilt when the stamp matches the db.

Search (`AnnView.top`): the index proposes `OVERSAMPLE`× candidates, whose float32 BLOBs are read
from SQLite to score them exactly (hits' scores stay true cosines; a deleted or re-embedded row
is dropped or rescored by that read), merged with an exact scan of the *delta*: the rows written
since the stamp, held in a small in-RAM `VectorMatrix`. So every ingest/forget/purge/edit shows
at once; the file catches up by a background merge (add/remove on a copy, then an atomic
swap) once the delta or the deletions pass `MERGE_MIN` rows or 5 % of the index.

A missing, corrupt or foreign index (checked against the stamp and the db) is rebuilt in a
background thread while `StreamExact` serves: an exact scan streamed from SQLite in chunks
(bounded RAM, slow on big stores, correct). `memory-mcp reindex` rebuilds in the foreground.

Settings (environment): MEMORY_VECTOR_ANN = auto | on | off; MEMORY_VECTOR_ANN_MIN_ROWS (auto
switches to the index at this many vectors); MEMORY_VECTOR_ANN_DTYPE (i8 | f16 | f32);
MEMORY_VECTOR_ANN_THREADS (background build threads).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from semantic_memory.filelock import exclusive
from semantic_memory.models import RecallFilters

from .matrix import VectorMatrix, decode_rows
from .schema import FRESH
from .settings import VectorSettings

log = logging.getLogger("semantic_memory.vector")

#: Candidates the graph proposes for n wanted hits (n + n/2, at least 40), rescored exactly
#: from SQLite. The graph's own breadth (EXPANSION_SEARCH) is what recall rests on: 40, 64 and
#: 100 candidates gave the same recall@10 (0.998 at 100k x 768, 0.992 at 1M x 384), and each
#: candidate is a BLOB read (docs/vector.md#ann-measured).
OVERSAMPLE = 1.5
MIN_CANDIDATES = 40
#: The search breadth, set on every opened index (usearch keeps neither expansion in the file:
#: a restored index searched at its default 64). 128 below LARGE_INDEX vectors, 768 from it:
#: at 1M real MiniLM-like vectors (connectivity 32) 128 gave recall@10 0.93, 512 0.977, 768
#: 0.984; at 100k 128 already gives 0.99+ (docs/vector.md).
EXPANSION_SEARCH = 128
EXPANSION_SEARCH_LARGE = 768
LARGE_INDEX = 500_000
#: usearch's default; the earlier 64 halved the build and cost recall at 1M.
EXPANSION_ADD = 128
#: Links per node. At 1M real MiniLM-like vectors 16 left recall@10 at 0.94 even at breadth 512
#: (the graph, not the breadth, was short); 32 gives 0.977 there for a 13% longer build and a
#: graph twice as big (docs/vector.md). An index built with 16 still serves; `reindex` rebuilds.
CONNECTIVITY = 32
#: A background merge starts once the delta (or the deletions) pass this many rows or 5 %.
MERGE_MIN = 2_000
MERGE_SHARE = 0.05
CHUNK = 20_000
EXACT_FILTER_MAX = 5_000
#: Rows newer than a seq. `+model`/`+dim` keep SQLite on the seq index: by the (model, dim)
#: index it would read every row (every BLOB page) to test seq, seconds at 100k.
DELTA_SQL = "SELECT memory_id, vec FROM memories_vec WHERE seq > ? AND +model = ? AND +dim = ?"
FORMAT = 2
#: Beside the index while its file may still hold purged vectors: usearch's `remove` only
#: marks a key removed, and `save` keeps the vector's bytes (a merge too). A purge writes it
#: (`mark_purged`); a full build, which writes live vectors only, takes it away.
PURGED_MARK = "purged"


@dataclass(frozen=True)
class Stamp:
    model: str
    dim: int
    dtype: str
    count: int
    seq: int
    deletes: int
    last_id: int
    last_seq: int
    file: str
    size: int
    crc: int = 0  # zlib.crc32 of the index file: a corrupt file is rebuilt, never searched
    removed: int = 0  # rows removed by merges since the last full build
    format: int = FORMAT


def folder_of(db_path: str) -> Path:
    return Path(f"{db_path}.vectors")


def _make_folder(folder: Path) -> None:
    """`<db>.vectors/` for its owner only (0700), as the data folder beside it, whatever the
    umask: its files are a quantized copy of every memory's embedding. One made by an
    earlier release keeps its mode. A file in its place (a stray copy, a `touch`) is an
    OSError saying so, which a build reports in one line."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except FileExistsError:
        raise NotADirectoryError(f"{folder} is a file, not the vector index folder: move it "
                                 "away (the index is rebuilt from the stored vectors)") from None


def _create_private(path: Path) -> None:
    """Make `path` an empty file 0600 (or empty the one there), so that what is written over
    it keeps that mode: usearch's `save` and `write_text` create their files with the
    umask's (0644)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))


def read_stamp(folder: Path) -> Stamp | None:
    try:
        data = json.loads((folder / "stamp.json").read_text())
        return Stamp(**data) if data.get("format") == FORMAT else None
    except (OSError, ValueError, TypeError):
        return None


def mark_purged(folder: Path) -> bool:
    """Say that the index file holds vectors a purge removed (a new token each time, so a
    build that started before this purge does not take the mark away); False when there is
    no index."""
    if read_stamp(folder) is None:
        return False
    mark = folder / PURGED_MARK
    _create_private(mark)
    mark.write_text(secrets.token_hex(8))
    return True


def purge_mark(folder: Path) -> str | None:
    """The token of the purge the index file has not been rebuilt since; None: none."""
    try:
        return (folder / PURGED_MARK).read_text()
    except OSError:
        return None


def rewrite_purged(db_path: str, threads: int, keep: bool) -> str | None:
    """Now, in this process: the index rebuilt in full (`keep`) or removed, so that no
    vector a purge removed stays in its file. One line for the person when another process
    is building it (that build's end starts a full one: `AnnManager`), else None."""
    folder = folder_of(db_path)
    stamp = read_stamp(folder)
    if stamp is None or purge_mark(folder) is None:
        return None
    with exclusive(folder / "build.lock") as held:
        if not held:
            return ("a running service is building the vector index: the purged vectors "
                    "leave its file when it rebuilds it next, at that build's end")
        if keep:
            build(db_path, stamp.model, stamp.dim, stamp.dtype, threads)
        else:  # not searched here: nothing to keep; the next process that wants it builds
            for path in [folder / "stamp.json", *folder.glob("index-*.usearch*"),
                         folder / PURGED_MARK]:
                path.unlink(missing_ok=True)
    return None


def _state(conn: sqlite3.Connection) -> tuple[int, int]:
    seq, deletes = conn.execute("SELECT seq, deletes FROM vector_state WHERE id = 1").fetchone()
    return int(seq), int(deletes)


def count_rows(conn: sqlite3.Connection, model: str, dim: int) -> int:
    return int(conn.execute("SELECT count(*) FROM memories_vec WHERE model = ? AND dim = ?",
                            (model, dim)).fetchone()[0])


def check(conn: sqlite3.Connection, folder: Path, model: str, dim: int,
          verify_bytes: int) -> tuple[Stamp, Any]:
    """The stamp and memory-mapped index if they describe this db; ValueError says why not.
    A file of at most `verify_bytes` is checksummed first; a larger one's checksum (a full
    read) is left to the caller."""
    from usearch.index import Index

    stamp = read_stamp(folder)
    if stamp is None:
        raise ValueError("no index stamp")
    if (stamp.model, stamp.dim) != (model, dim):
        raise ValueError(f"index of {stamp.model}/{stamp.dim}, configured {model}/{dim}")
    seq, deletes = _state(conn)
    if stamp.seq > seq or stamp.deletes > deletes:
        raise ValueError("index is ahead of the db (another db file?)")
    if stamp.last_id:
        row = conn.execute("SELECT seq FROM memories_vec WHERE memory_id = ?",
                           (stamp.last_id,)).fetchone()
        if row is None and deletes == stamp.deletes or row is not None and (
                row[0] != stamp.last_seq and row[0] <= stamp.seq):
            raise ValueError("index's last row does not match the db")
    path = folder / stamp.file
    try:
        if path.stat().st_size != stamp.size:
            raise ValueError("index file size differs from its stamp")
        if stamp.size <= verify_bytes and file_crc(path) != stamp.crc:
            raise ValueError("index file checksum differs from its stamp (corrupt)")
        _read_ahead(path)
        index = Index.restore(str(path), view=True)
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"index file unreadable: {exc}") from None
    if index is None or len(index) != stamp.count or index.ndim != dim:
        raise ValueError("index file does not match its stamp")
    index.expansion_search = search_breadth(len(index))
    return stamp, index


def search_breadth(count: int) -> int:
    """usearch's `expansion_search` for an index of `count` vectors."""
    return EXPANSION_SEARCH_LARGE if count >= LARGE_INDEX else EXPANSION_SEARCH


def _read_ahead(path: Path) -> None:
    """Ask the kernel to read the whole file in, in order, in the background: opening a view
    walks every node's header and the first searches touch pages all over the graph, which
    after a reboot were 8 s of random reads at 1M vectors (`ann-probe --profile`)."""
    if not hasattr(os, "posix_fadvise"):  # not on macOS or Windows
        return
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(fd)
    except OSError:
        pass


def file_crc(path: Path) -> int:
    import zlib

    crc = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc


def _rows(conn: sqlite3.Connection, model: str, dim: int, where: str = "",
          params: tuple[Any, ...] = ()) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(ids, vectors) of the model's rows in memory-id order, CHUNK at a time."""
    last = 0
    while True:
        got = conn.execute(
            f"SELECT memory_id, vec FROM memories_vec WHERE model = ? AND dim = ? "
            f"AND memory_id > ? {where} ORDER BY memory_id LIMIT {CHUNK}",
            (model, dim, last, *params)).fetchall()
        if not got:
            return
        ids, vecs = decode_rows([r[0] for r in got], [r[1] for r in got], dim)
        yield ids, vecs
        last = int(got[-1][0])


def _delta_rows(conn: sqlite3.Connection, model: str, dim: int, after: int
                ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(ids, vectors) of the model's rows written after seq `after`, by the seq index."""
    got = conn.execute(DELTA_SQL, (after, model, dim)).fetchall()
    for start in range(0, len(got), CHUNK):
        part = got[start : start + CHUNK]
        yield decode_rows([r[0] for r in part], [r[1] for r in part], dim)


def build(db_path: str, model: str, dim: int, dtype: str = "i8", threads: int = 1,
          base: Stamp | None = None,
          progress: Callable[[int, int], None] | None = None) -> Stamp:
    """Write a new index (a merge into `base` when given, else from scratch) reflecting one
    snapshot of the db, then swap the stamp atomically; returns the new stamp."""
    from usearch.index import Index

    folder = folder_of(db_path)
    _make_folder(folder)
    purged = purge_mark(folder) if base is None else None  # read before the snapshot
    conn = sqlite3.connect(db_path, check_same_thread=False)
    try:
        conn.execute("BEGIN")  # one snapshot for the whole build (WAL: writers go on)
        seq, deletes = _state(conn)
        removed = 0
        if base is not None and base.dtype == dtype:
            index = Index.restore(str(folder / base.file))  # a copy in RAM, to change
            index.expansion_add = EXPANSION_ADD
            keep = np.fromiter((r[0] for r in conn.execute(  # the (model, dim) index only
                "SELECT memory_id FROM memories_vec WHERE model = ? AND dim = ?",
                (model, dim))), dtype=np.uint64)
            have = np.asarray(index.keys, dtype=np.uint64)
            gone = np.setdiff1d(have, keep, assume_unique=True)
            if len(gone):
                index.remove(gone)
            removed = base.removed + len(gone)
            todo = list(_delta_rows(conn, model, dim, base.seq))
            total = sum(len(i) for i, _ in todo)
            done = 0
            for ids, vecs in todo:
                present = [i for i in ids.tolist() if i in index]
                if present:
                    index.remove(np.asarray(present, dtype=np.uint64))
                index.add(ids.astype(np.uint64), vecs, threads=threads)
                done += len(ids)
                if progress:
                    progress(done, total)
        else:
            total = count_rows(conn, model, dim)
            index = Index(ndim=dim, metric="cos", dtype=dtype, connectivity=CONNECTIVITY,
                          expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)
            done = 0
            for ids, vecs in _rows(conn, model, dim):
                index.add(ids.astype(np.uint64), vecs, threads=threads)
                done += len(ids)
                if progress:
                    progress(done, total)
        last = conn.execute("SELECT memory_id, seq FROM memories_vec WHERE model = ? AND dim = ? "
                            "ORDER BY memory_id DESC LIMIT 1", (model, dim)).fetchone()
        conn.execute("COMMIT")
    finally:
        conn.close()
    name = f"index-{secrets.token_hex(6)}.usearch"
    tmp = folder / f"{name}.tmp"
    _create_private(tmp)
    index.save(str(tmp))
    os.replace(tmp, folder / name)
    stamp = Stamp(model=model, dim=dim, dtype=dtype, count=len(index), seq=seq,
                  deletes=deletes, last_id=int(last[0]) if last else 0,
                  last_seq=int(last[1]) if last else 0, file=name,
                  size=(folder / name).stat().st_size, crc=file_crc(folder / name),
                  removed=removed)
    tmp_stamp = folder / f"stamp.json.{secrets.token_hex(4)}"
    _create_private(tmp_stamp)
    tmp_stamp.write_text(json.dumps(asdict(stamp)))
    os.replace(tmp_stamp, folder / "stamp.json")
    for old in folder.glob("index-*.usearch*"):  # mapped elsewhere? POSIX keeps the inode
        if old.name != name and not old.name.endswith(".tmp"):
            try:
                old.unlink()
            except OSError:
                pass
    if purged is not None and purge_mark(folder) == purged:  # no purge since the snapshot
        (folder / PURGED_MARK).unlink(missing_ok=True)
    return stamp


def _reader(db_path: str, local: threading.local) -> sqlite3.Connection:
    conn = getattr(local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(db_path, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")
        local.conn = conn
    return conn


def _exact_top(sims: np.ndarray, ids: np.ndarray, n: int) -> list[tuple[int, float]]:
    if len(sims) == 0 or n <= 0:
        return []
    n = min(n, len(sims))
    part = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
    order = part[np.argsort(-sims[part], kind="stable")]
    return [(int(ids[i]), float(sims[i])) for i in order]


class _BlobScorer:
    """Exact cosines of given memory ids, from their float32 BLOBs in SQLite."""

    def __init__(self, db_path: str, model: str, dim: int) -> None:
        self.db_path, self.model, self.dim = db_path, model, dim
        self._local = threading.local()

    def score(self, query: np.ndarray, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        conn = _reader(self.db_path, self._local)
        out_ids: list[int] = []
        blobs: list[bytes] = []
        for start in range(0, len(ids), 900):
            chunk = ids[start : start + 900]
            for memory_id, blob in conn.execute(
                f"SELECT memory_id, vec FROM memories_vec WHERE memory_id IN "
                f"({','.join('?' * len(chunk))}) AND +model = ? AND +dim = ?",
                [*chunk, self.model, self.dim]):
                out_ids.append(memory_id)
                blobs.append(blob)
        if not out_ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        kept, vecs = decode_rows(out_ids, blobs, self.dim)
        return kept, vecs @ query

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class AnnView(_BlobScorer):
    """A memory-mapped index plus the exact delta since its stamp: what search ranks over."""

    #: A filtered search whose filter allows at most this many memories scores them exactly
    #: (their BLOBs, ~10 ms for 5,000 × 768-d): small filtered sets lose nothing to the graph.
    exact_filter_max = EXACT_FILTER_MAX
    cheap = True

    def __init__(self, db_path: str, stamp: Stamp, index: Any) -> None:
        super().__init__(db_path, stamp.model, stamp.dim)
        self.stamp, self.index = stamp, index
        self.delta = VectorMatrix(stamp.dim)
        self.state = (-1, -1)  # (seq, deletes) the delta reflects
        self.lock = threading.RLock()
        self._search_lock = threading.Lock()

    def __len__(self) -> int:
        return self.stamp.count + len(self.delta)

    def sync(self, conn: sqlite3.Connection, seq: int, deletes: int) -> None:
        """Bring the delta to the committed state `conn` sees (rows newer than the stamp)."""
        with self.lock:
            if deletes != self.state[1]:
                self.delta.clear()
                after = self.stamp.seq
            elif seq != self.state[0]:
                after = self.state[0]
            else:
                return
            rows = conn.execute(DELTA_SQL, (after, self.model, self.dim)).fetchall()
            if rows:
                ids, vecs = decode_rows([r[0] for r in rows], [r[1] for r in rows], self.dim)
                self.delta.upsert(ids.tolist(), vecs)
            self.state = (seq, deletes)

    def _graph(self, query: np.ndarray, count: int) -> list[int]:
        """The graph's `count` nearest keys. One search at a time: usearch's per-thread search
        contexts are sized when the index is opened, not per calling Python thread."""
        if count <= 0:
            return []
        with self._search_lock:
            return self.index.search(query, count).keys.astype(np.int64).tolist()

    def pending(self, deletes: int) -> int:
        """Rows the file lags behind by: the delta plus the deletions since its stamp."""
        return len(self.delta) + max(0, deletes - self.stamp.deletes)

    def filtered(self, conn: sqlite3.Connection, query: np.ndarray, k: int,
                 filters: RecallFilters) -> list[tuple[int, float]]:
        """The k best memories passing `filters`, best first: a small
        filtered set scored exactly; else graph candidates read with the filter in the same
        query, widened until k pass, and past a quarter of the index the filter's whole set
        scored exactly: a filter never loses recall to the graph."""
        query = np.asarray(query, dtype=np.float32)
        where, params = filters.sql("m")
        if filters.narrows:
            allowed = [r[0] for r in conn.execute(
                f"SELECT m.id FROM memories m WHERE {where} LIMIT {self.exact_filter_max + 1}",
                params)]
            if len(allowed) <= self.exact_filter_max:
                got_ids, sims = self._score_filtered(conn, query, allowed, "m.id IS NOT NULL",
                                                     [])
                return _exact_top(sims, got_ids, k)
        want = max(int(k * OVERSAMPLE), MIN_CANDIDATES)
        while True:
            count = min(want, self.stamp.count)
            keys = self._graph(query, count)
            fresh = [i for i, _ in self.delta.top(query, want)]
            got_ids, sims = self._score_filtered(conn, query, keys + fresh, where, params)
            if len(got_ids) >= k or count >= self.stamp.count:
                return _exact_top(sims, got_ids, k)
            if want * 4 > self.stamp.count // 4:
                allowed = [r[0] for r in conn.execute(
                    f"SELECT m.id FROM memories m WHERE {where}", params)]
                got_ids, sims = self._score_filtered(conn, query, allowed, "m.id IS NOT NULL",
                                                     [])
                return _exact_top(sims, got_ids, k)
            want *= 4

    def _score_filtered(self, conn: sqlite3.Connection, query: np.ndarray, ids: list[int],
                        where: str, params: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Exact cosines of those of `ids` that pass `where` and whose vector is of their
        memory's current text (`FRESH`), one query per 900 ids (by primary keys: 4x faster
        than by the (model, dim) index)."""
        out_ids: list[int] = []
        blobs: list[bytes] = []
        ids = list(dict.fromkeys(ids))
        for start in range(0, len(ids), 900):
            chunk = ids[start : start + 900]
            rows = conn.execute(
                f"SELECT v.memory_id, v.vec FROM memories_vec v JOIN memories m ON m.id = "
                f"v.memory_id WHERE v.memory_id IN ({','.join('?' * len(chunk))}) AND "
                f"+v.model = ? AND +v.dim = ? AND {where} AND {FRESH}",
                [*chunk, self.model, self.dim, *params]).fetchall()
            out_ids.extend(r[0] for r in rows)
            blobs.extend(r[1] for r in rows)
        if not out_ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        kept, vecs = decode_rows(out_ids, blobs, self.dim)
        return kept, vecs @ query

    def top(self, query: np.ndarray, n: int, ids: np.ndarray | None = None
            ) -> list[tuple[int, float]]:
        """The n best (id, cosine), best first; exact over `ids` when given."""
        query = np.asarray(query, dtype=np.float32)
        if ids is not None:
            got_ids, sims = self.score(query, ids.tolist())
            return _exact_top(sims, got_ids, n)
        want = max(int(n * OVERSAMPLE), MIN_CANDIDATES)
        while True:
            count = min(want, self.stamp.count)
            keys = self._graph(query, count)
            got_ids, sims = self.score(query, keys)
            hits = dict(zip(got_ids.tolist(), sims.tolist()))
            hits.update(self.delta.top(query, n))
            # rows deleted since the stamp drop out at the BLOB read: widen if too many did
            if len(got_ids) >= min(n, count) or count >= self.stamp.count:
                break
            want *= 4
        ranked = sorted(hits.items(), key=lambda kv: -kv[1])[:n]
        return ranked


#: Index files up to this size are checksummed before their first search (~50 ms), larger
#: ones in the background while they serve.
SYNC_VERIFY_BYTES = 64 * 1024 * 1024


class StreamExact(_BlobScorer):
    """Exact search streamed from SQLite: what serves while the index is being built."""

    cheap = False  # a full scan: near-duplicate checks skip it

    def __init__(self, db_path: str, model: str, dim: int, rows: int) -> None:
        super().__init__(db_path, model, dim)
        self.rows = rows

    def __len__(self) -> int:
        return self.rows

    def top(self, query: np.ndarray, n: int, ids: np.ndarray | None = None
            ) -> list[tuple[int, float]]:
        query = np.asarray(query, dtype=np.float32)
        if ids is not None:
            got_ids, sims = self.score(query, ids.tolist())
            return _exact_top(sims, got_ids, n)
        best: list[tuple[int, float]] = []
        for chunk_ids, vecs in _rows(_reader(self.db_path, self._local), self.model, self.dim):
            best = sorted(best + _exact_top(vecs @ query, chunk_ids, n), key=lambda h: -h[1])[:n]
        return best


class AnnManager:
    """Per channel: which view serves, and the background builds that keep the file fresh."""

    def __init__(self, db_path: str, config: VectorSettings, build: bool = True) -> None:
        self.db_path, self.config = db_path, config
        # False in a one-off command (`Settings.serving`): it would leave a build or a merge
        # half done when it exits; exact search answers it, and a service (or `reindex`) builds.
        self.builds_in_background = build
        self.folder = folder_of(db_path)
        self.view: AnnView | None = None
        self._stamp_key: tuple[float, int] | None = None
        self._failed: tuple[tuple[float, int] | None, str] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.last_error: str | None = None
        self.builds = 0
        self.verified = threading.Event()  # set once the open file's checksum was checked
        self._verifier: threading.Thread | None = None

    def _key(self) -> tuple[float, int] | None:
        try:
            st = (self.folder / "stamp.json").stat()
            return st.st_mtime, st.st_size
        except OSError:
            return None

    @property
    def building(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def current(self, conn: sqlite3.Connection, model: str, dim: int) -> AnnView | None:
        """The valid view for (model, dim), re-opened when the stamp changed; None (and a
        background build started) when the index is missing, corrupt or stale."""
        key = self._key()
        with self._lock:
            view = self.view
            if view is not None and key == self._stamp_key and (view.model, view.dim) == (
                    model, dim):
                return view
            if self._failed is not None and self._failed[0] == key:
                return None  # already known bad; a build is running or ran
            try:
                # A small file is checksummed before it is searched (a corrupt graph can crash
                # the native search); a large one in the background (`_verify`).
                stamp, index = check(conn, self.folder, model, dim, SYNC_VERIFY_BYTES)
            except ValueError as exc:
                log.warning("vector: ANN index not usable (%s); exact search serves while it "
                            "is rebuilt", exc)
                self.last_error = str(exc)
                self._failed = (key, str(exc))
                self.view = None
                self._start(model, dim, base=None)
                self.verified.set()  # checked: bad
                return None
            if view is not None:
                view.close()
            self.view = AnnView(self.db_path, stamp, index)
            self._stamp_key, self._failed = key, None
            self.verified.clear()
            self._verifier = threading.Thread(target=self._verify, args=(key, stamp, model, dim),
                                              name="vector-ann-verify", daemon=True)
            self._verifier.start()
            return self.view

    def _verify(self, key: Any, stamp: Stamp, model: str, dim: int) -> None:
        """The checksum of the file just opened, read in the background (start does not wait
        for 0.5 GB at 1M vectors; it also warms the page cache): a corrupt file is dropped
        and rebuilt while exact search serves."""
        try:
            ok = file_crc(self.folder / stamp.file) == stamp.crc
        except OSError:
            ok = False
        if not ok:
            reason = "index file checksum differs from its stamp (corrupt)"
            log.warning("vector: %s; exact search serves while it is rebuilt", reason)
            with self._lock:
                if self._stamp_key == key:
                    self.view, self._stamp_key = None, None
                    self._failed, self.last_error = (key, reason), reason
            self._start(model, dim, base=None)
        self.verified.set()

    def maybe_merge(self, view: AnnView, deletes: int) -> None:
        """Fold the delta and deletions into the file in the background once they grow; a
        full build when the file still holds purged vectors (`mark_purged`)."""
        if purge_mark(self.folder) is not None:
            self._start(view.model, view.dim, base=None)
            return
        lag = view.pending(deletes)
        if lag and lag >= max(MERGE_MIN, view.stamp.count * MERGE_SHARE):
            full = view.stamp.removed + lag > view.stamp.count // 4
            self._start(view.model, view.dim, base=None if full else view.stamp)

    def start_build(self, model: str, dim: int) -> None:
        self._start(model, dim, base=None)

    def _start(self, model: str, dim: int, base: Stamp | None) -> None:
        if self.building or not self.builds_in_background:
            return

        def run() -> None:
            try:
                _make_folder(self.folder)
                with exclusive(self.folder / "build.lock") as held:
                    if not held:
                        return  # another process builds; its stamp will be picked up
                    merge = base if purge_mark(self.folder) is None else None
                    for _ in range(2):  # again, in full, for a purge made during the build
                        t = time.perf_counter()
                        build(self.db_path, model, dim, self.config.ann_dtype,
                              self.config.ann_threads, merge)
                        self.last_error = None
                        self.builds += 1
                        log.info("vector: ANN index %s in %.1f s",
                                 "merged" if merge else "built", time.perf_counter() - t)
                        if purge_mark(self.folder) is None:
                            break
                        merge = None
            except Exception as exc:  # noqa: BLE001 - exact search keeps serving
                self.last_error = f"build failed: {exc}"
                log.error("vector: ANN index build failed: %s", exc)

        self._thread = threading.Thread(target=run, name="vector-ann-build", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        """Until the running checksum and build (if any) are done."""
        for thread in (self._verifier, self._thread):
            if thread is not None:
                thread.join(timeout)
        if self._thread is not None:  # a build the verifier started
            self._thread.join(timeout)

    def close(self) -> None:
        if self.view is not None:
            self.view.close()


