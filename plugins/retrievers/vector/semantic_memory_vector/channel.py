"""The vector channel: brute-force cosine over an in-memory float32 matrix.

Storage: `memories_vec(memory_id, model, dim, vec, seq)` in the one db file; each row is tagged
with the embedder's model id and dimension, and only rows of the configured (model, dim) are
ever loaded, so vectors of two models are never compared (old ones wait for `backfill`).
`vector_state(seq, deletes, token)` lets every process notice writes: a search reads only the
rows written since its last look (its own writes come from memory, not from SQLite), and
reloads after deletions (purge).

What every vector channel shares (embedding before the write lock, dedup, the cosine floor, the
embedding queue, backfill, migrate) is `EmbeddingChannel`'s; this module holds the SQLite
primitives: writing BLOBs, the nearest rows (matrix or ANN index), near-duplicates.
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

from semantic_memory.embedding_channel import EmbeddingChannel
from semantic_memory.models import RecallFilters

from .schema import FRESH, create
from .settings import VectorSettings

if TYPE_CHECKING:  # numpy (also under .matrix) is imported where vectors are handled: an
    import numpy as np  # inactive channel (no model) costs a service start nothing

    from .matrix import VectorMatrix

def to_blob(vec: np.ndarray) -> bytes:
    import numpy as np

    return np.asarray(vec, dtype="<f4").tobytes()


def from_blob(blob: bytes, dim: int) -> np.ndarray:
    import numpy as np

    return np.frombuffer(blob, dtype="<f4", count=dim)


class VectorChannel(EmbeddingChannel):
    """Registered by this plugin; inactive (no hits, no vectors) without a usable embedder."""

    name = "vector"
    stores = ("sqlite",)  # vectors in the db file, a matrix in this process
    table = "memories_vec"
    # missing: a BLOB of another size (stored by an older version from a broken embedder;
    # SQLite reads its length from the row header, not its content), and the vector of a text
    # since edited while this channel was not loaded
    usable_row = f"length(v.vec) = 4 * v.dim AND {FRESH}"

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        self._db_path: str | None = None
        self._state = (-1, -1)  # (seq, deletes) the matrix reflects
        self._staged: dict[tuple[int, str], tuple[list[int], np.ndarray]] = {}
        self._matrix: VectorMatrix | None = None
        self._sync_lock = threading.Lock()
        self._ann: Any = None  # AnnManager, made on first use (numpy/usearch stay unimported)
        self._ann_config = settings.section(VectorSettings)
        self._serving: bool = settings.serving

    def setup(self, conn: sqlite3.Connection) -> None:
        create(conn)
        row = conn.execute("PRAGMA database_list").fetchone()
        self._db_path = row[2] if row and row[2] else None

    # --- the matrix, kept in step with the table --------------------------------------------

    def sync(self, conn: sqlite3.Connection) -> VectorMatrix:
        """Bring the matrix up to the committed state `conn` sees; cheap when nothing changed."""
        model, dim = self.tag()
        seq, deletes, token = conn.execute(
            "SELECT seq, deletes, token FROM vector_state WHERE id = 1").fetchone()
        with self._sync_lock:
            ann = self._ann_sync(conn, model, dim, seq, deletes)
            if ann is not None:  # a large store: the ANN index (or a streamed exact scan)
                self._matrix, self._state = ann, (seq, deletes)
                self._staged.clear()
                return ann
            matrix = self._matrix
            if matrix is None or matrix.dim != dim or deletes != self._state[1] or not hasattr(
                    matrix, "upsert"):
                from .matrix import VectorMatrix

                matrix = VectorMatrix(dim)
                self._load(conn, matrix, model, dim, after=None)
                self._matrix = matrix
            elif seq != self._state[0]:
                staged = self._staged.get((seq, token))
                if staged is not None and seq == self._state[0] + 1:
                    matrix.upsert(*staged)  # our own write: no BLOB read
                else:
                    self._load(conn, matrix, model, dim, after=self._state[0])
            self._state = (seq, deletes)
            for key in [k for k in self._staged if k[0] <= seq]:
                del self._staged[key]
        return matrix

    def _ann_manager(self) -> Any:
        if self._ann is None and self._db_path and self._ann_config.ann != "off":
            from .ann import AnnManager

            self._ann = AnnManager(self._db_path, self._ann_config, build=self._serving)
        return self._ann

    def _ann_sync(self, conn: sqlite3.Connection, model: str, dim: int, seq: int,
                  deletes: int) -> Any:
        """The ANN view (or, while it is built, a streamed exact scan) when the store is large
        enough (MEMORY_VECTOR_ANN_MIN_ROWS); None: the in-RAM exact matrix serves."""
        mgr = self._ann_manager()
        if mgr is None:
            return None
        from .ann import AnnView, StreamExact, count_rows, read_stamp

        current = self._matrix
        in_ann = isinstance(current, (AnnView, StreamExact)) and current.dim == dim
        if not in_ann:
            reload = current is None or current.dim != dim or deletes != self._state[1]
            if reload:
                # An index of this model already says how big the store is: counting 1M rows
                # of a cold db took 9.9 s of a 11.8 s start (bench_vector.py ann-probe --profile)
                stamp = read_stamp(mgr.folder)
                rows = (stamp.count if stamp is not None and (stamp.model, stamp.dim) == (
                    model, dim) else count_rows(conn, model, dim))
            elif len(current) >= self._ann_config.ann_min_rows or self._ann_config.ann == "on":
                rows = len(current)
            else:
                return None
            if not self._ann_config.wants(rows):
                return None
        view = mgr.current(conn, model, dim)  # starts a background build when unusable
        if view is None:
            if isinstance(current, StreamExact) and current.dim == dim:
                return current
            if not in_ann and not reload:
                return None  # the in-RAM matrix already loaded keeps serving meanwhile
            return StreamExact(self._db_path, model, dim, count_rows(conn, model, dim))
        view.sync(conn, seq, deletes)
        mgr.maybe_merge(view, deletes)
        return view

    def reindex(self, progress: Callable[[int, int], None] | None = None,
                threads: int | None = None) -> dict[str, Any]:
        """Rebuild the ANN index from scratch (foreground); a running service picks it up."""
        import os
        import time

        from .ann import build

        if not self.active:
            return {"built": False, "reason": self.inactive_reason()}
        if not self._db_path:
            return {"built": False, "reason": "no db file (in-memory store)"}
        model, dim = self.tag()
        t = time.perf_counter()
        stamp = build(self._db_path, model, dim, self._ann_config.ann_dtype,
                      threads or os.cpu_count() or 1, progress=progress)
        return {"built": True, "count": stamp.count, "model": model, "dim": dim,
                "dtype": stamp.dtype, "seconds": round(time.perf_counter() - t, 1),
                "file": str(self._ann_folder() / stamp.file)}

    def purged(self) -> str | None:
        """A purge removed vectors, and the index file keeps a removed vector's bytes: it is
        rebuilt without them, in the background in a service (exact search answers for the
        rows the file still names meanwhile), before a one-off command (`purge`) returns. An
        index this process does not search (MEMORY_VECTOR_ANN=off) is removed instead."""
        import os

        from .ann import mark_purged, rewrite_purged

        if not self._db_path or not mark_purged(self._ann_folder()):
            return None
        manager = self._ann_manager()
        if manager is not None and manager.builds_in_background and self.active:
            manager.start_build(*self.tag())
            return None
        return rewrite_purged(self._db_path, os.cpu_count() or 1, keep=manager is not None)

    def _ann_folder(self) -> Any:
        from .ann import folder_of

        return folder_of(self._db_path or "")

    @staticmethod
    def _load(conn: sqlite3.Connection, matrix: VectorMatrix, model: str, dim: int,
              after: int | None) -> None:
        from .matrix import decode_rows

        sql = "SELECT memory_id, model, dim, vec FROM memories_vec"
        params: list[Any] = []
        if after is not None:
            sql += " WHERE seq > ?"
            params.append(after)
        ids: list[int] = []
        blobs: list[bytes] = []
        stale: list[int] = []
        for memory_id, row_model, row_dim, blob in conn.execute(sql, params):
            if row_model == model and row_dim == dim:
                ids.append(memory_id)
                blobs.append(blob)
            else:
                stale.append(memory_id)
        kept, vecs = decode_rows(ids, blobs, dim)
        if len(kept) < len(ids):  # unusable rows: an older vector of theirs is stale too
            stale += sorted(set(ids) - set(kept.tolist()))
        if stale:
            matrix.remove(stale)
        if len(kept):
            matrix.upsert(kept.tolist(), vecs)

    # --- the per-store primitives ------------------------------------------------------------

    def duplicate_of(self, conn: sqlite3.Connection, vec: Any, project: str | None,
                     threshold: float) -> int | None:
        """From the matrix (when it is cheap to ask) and the rows it has not seen yet (this
        transaction's, other processes'): the best live memory of `project` within reach."""
        import numpy as np

        vec = np.asarray(vec, dtype=np.float32)
        model, dim = self.tag()
        matrix = self._matrix if self._matrix is not None and self._matrix.dim == dim else None
        candidates: list[tuple[int, float]] = []
        if matrix is not None:
            if matrix.cheap:  # not a full scan streamed from SQLite
                candidates = [(i, s) for i, s in matrix.top(vec, 16) if s >= threshold]
            last = self._state[0]
        else:
            last = -1
        for memory_id, blob in conn.execute(
            # +model/+dim: by the seq index (the (model, dim) one reads every row)
            "SELECT memory_id, vec FROM memories_vec WHERE seq > ? AND +model = ? AND +dim = ?",
            (last, model, dim),
        ):
            if len(blob) != 4 * dim:  # unusable (decode_rows): never a duplicate
                continue
            sim = float(from_blob(blob, dim) @ vec)
            if sim >= threshold:
                candidates.append((memory_id, sim))
        if not candidates:
            return None
        candidates.sort(key=lambda c: -c[1])
        ids = [c[0] for c in candidates]
        marks = ",".join("?" * len(ids))
        live = {r[0] for r in conn.execute(
            f"SELECT m.id FROM memories m JOIN memories_vec v ON v.memory_id = m.id WHERE "
            f"m.id IN ({marks}) AND m.deleted = 0 AND m.project IS ? AND {FRESH}",
            [*ids, project])}
        return next((i for i in ids if i in live), None)

    def decode_vector(self, raw: bytes, dim: int) -> list[float]:
        import numpy as np

        # every float the BLOB holds: `import_vectors` refuses a row that is not `dim` of them
        return np.frombuffer(raw, dtype="<f4", count=len(raw) // 4).tolist()

    def write_vectors(self, conn: sqlite3.Connection, ids: list[int], vecs: Sequence[Any],
                      tag: tuple[str, int]) -> None:
        """Upsert BLOBs tagged `tag`; only vectors of the configured model go into this
        process's matrix (staged until the transaction's sequence number is seen)."""
        import numpy as np

        vecs = np.asarray(vecs, dtype=np.float32)
        model, dim = tag
        if vecs.shape != (len(ids), dim) or not np.isfinite(vecs).all():
            # the last guard (`EmbeddingChannel.checked` keeps them out): one such row failed
            # or poisoned every later search of the model
            raise ValueError(f"refusing to store vectors of shape {vecs.shape} (NaN or "
                             f"infinity?) as {len(ids)} rows of {dim} floats")
        token = secrets.token_hex(8)
        conn.execute("UPDATE vector_state SET seq = seq + 1, token = ? WHERE id = 1", (token,))
        seq = conn.execute("SELECT seq FROM vector_state WHERE id = 1").fetchone()[0]
        # with the hash of its memory's text as this transaction has it: the text the
        # caller embedded (`backfill` and the queue skip a memory edited meanwhile)
        conn.executemany(
            "INSERT INTO memories_vec (memory_id, model, dim, vec, seq, content_hash) VALUES "
            "(?, ?, ?, ?, ?, (SELECT content_hash FROM memories WHERE id = ?)) "
            "ON CONFLICT(memory_id) DO UPDATE SET model = excluded.model, dim = excluded.dim, "
            "vec = excluded.vec, seq = excluded.seq, content_hash = excluded.content_hash",
            [(i, model, dim, to_blob(v), seq, i) for i, v in zip(ids, vecs)],
        )
        if self.active and (model, dim) == self.tag():
            with self._sync_lock:
                self._staged[(seq, token)] = (list(ids), np.asarray(vecs, dtype=np.float32))

    # --- read path -------------------------------------------------------------------------

    def nearest(self, conn: sqlite3.Connection, qvec: Any, k: int, filters: RecallFilters
                ) -> list[tuple[int, float]]:
        import numpy as np

        return self.filtered_top(conn, self.sync(conn), np.asarray(qvec, dtype=np.float32), k,
                                 filters)

    @staticmethod
    def filtered_top(conn: sqlite3.Connection, matrix: VectorMatrix, qvec: np.ndarray, k: int,
                     filters: RecallFilters) -> list[tuple[int, float]]:
        """The k best live rows passing `filters` whose vector is of their memory's current
        text (`FRESH`): widen a window over the ranking, checking it with SQL; fall back to
        the filter's id set when the filter is very selective."""
        import numpy as np

        size = len(matrix)
        if size == 0:
            return []
        if hasattr(matrix, "filtered"):  # the ANN index applies the filter in its BLOB read
            return matrix.filtered(conn, qvec, k, filters)
        where, params = filters.sql("m")
        window = min(size, max(4 * k, 64))
        while True:
            ranked = matrix.top(qvec, window)
            ids = [i for i, _ in ranked]
            ok: set[int] = set()
            for start in range(0, len(ids), 900):
                chunk = ids[start : start + 900]
                marks = ",".join("?" * len(chunk))
                ok.update(r[0] for r in conn.execute(
                    f"SELECT m.id FROM memories m JOIN memories_vec v ON v.memory_id = m.id "
                    f"WHERE m.id IN ({marks}) AND {where} AND {FRESH}", [*chunk, *params]))
            hits = [(i, s) for i, s in ranked if i in ok]
            if len(hits) >= k or window >= size:
                return hits[:k]
            if window * 8 > size // 4:  # selective filter: score only the rows it allows
                allowed = np.fromiter((r[0] for r in conn.execute(
                    f"SELECT m.id FROM memories m JOIN memories_vec v ON v.memory_id = m.id "
                    f"WHERE {where} AND {FRESH}", params)), dtype=np.int64)
                return matrix.top(qvec, k, ids=allowed)
            window *= 8

    # --- maintenance and reporting ---------------------------------------------------------

    def embedder_info(self, conn: Any = None) -> dict[str, Any]:
        """`EmbeddingChannel`'s report, plus which search serves."""
        info = super().embedder_info(conn)
        if info["mode"] == "hybrid":
            info["search"] = self.search_mode()
        return info

    def search_mode(self) -> dict[str, Any]:
        """Which search serves: `exact` (in-RAM matrix), `ann` (the index, with its rows and
        pending delta) or `exact-stream` (while the index is built); for stats and doctor."""
        from_matrix = type(self._matrix).__name__
        mode = {"AnnView": "ann", "StreamExact": "exact-stream"}.get(from_matrix, "exact")
        out: dict[str, Any] = {"mode": mode, "ann": self._ann_config.ann,
                               "ann_min_rows": self._ann_config.ann_min_rows}
        view = getattr(self._matrix, "stamp", None)
        if view is not None:
            out.update(index_rows=view.count, delta_rows=len(self._matrix.delta),
                       dtype=view.dtype)
        if self._ann is not None:
            out["building"] = self._ann.building
            if self._ann.last_error:
                out["index_problem"] = self._ann.last_error
        return out

    def close(self) -> None:
        if self._ann is not None:
            self._ann.close()

