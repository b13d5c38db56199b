"""Vector channel benchmarks (JSON on stdout).

    # LoCoMo dev R@1/5/10/25/50 per channel (porter, trigram, vector), BM25-only vs hybrid,
    # fast path on/off, in one run (embeddings cached on disk per model):
    uv run --all-packages python bench/bench_vector.py locomo --model minilm
    uv run --all-packages python bench/bench_vector.py locomo --model gemma   # builds it first
    # score fusion's knobs, the grid of trigram score weights and vector shares, then one
    # leave-one-conversation-out across both models (one trigram weight, a share per model):
    uv run --all-packages python bench/bench_vector.py locomo --model minilm \
        --trigram 0.15,0.5,0.75,1 --shares 0.3,0.35,0.4 > minilm.json   # likewise gemma.json
    uv run --all-packages python bench/bench_vector.py joint minilm.json gemma.json
    # embedding throughput (texts/s, single and batched) of a model:
    uv run --all-packages python bench/bench_vector.py throughput --model minilm
    # vector search p50 vs a per-query BLOB scan, synthetic unit vectors:
    uv run --all-packages python bench/bench_vector.py search --rows 10000,100000 --dims 384,1024
    # the ANN index vs numpy exact on N realistic (clustered, low-rank) vectors stored through
    # the vector channel: p50s, recall@10, build cost, a fresh process's start and peak RSS:
    uv run --all-packages python bench/bench_vector.py ann --rows 100000 --dim 768
    # the graph alone (usearch, i8, 40 candidates rescored): links per node x search breadth
    # on real MiniLM embeddings plus distractors, the choice of ann.py's CONNECTIVITY:
    uv run --all-packages python bench/bench_vector.py ann-links --rows 1000000 --links 16,32

Models: `minilm` (tests/models.py builds it), `qwen3-tiny` (structure only), `gemma`
(bench/build_embeddinggemma.sh builds it; never commit it) or a GGUF path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

if sys.argv[1:2] == ["ann-probe"]:  # the exact baseline single-threaded, as docs/vector.md
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):  # advises on a loaded machine
        os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.locomo import KS, Conversation, evaluate, load  # noqa: E402
from semantic_memory.config import Settings  # noqa: E402
from semantic_memory.embedders import Embedder  # noqa: E402
from semantic_memory.models import NewMemory, RecallFilters  # noqa: E402
from semantic_memory.pipeline import MemoryEngine  # noqa: E402
from semantic_memory.hookspecs import hookimpl  # noqa: E402

CACHE = Path(os.environ.get("SEMANTIC_MEMORY_BENCH_CACHE",
                            "~/.cache/semantic-memory-mcp/bench")).expanduser()
BM25 = "bm25_porter,bm25_trigram"


def model_path(name: str) -> str:
    if name == "minilm":
        import models

        return str(models.minilm())
    if name == "qwen3-tiny":
        import models

        return str(models.tiny_qwen3())
    if name == "gemma":
        out = subprocess.run(["bash", str(ROOT / "bench" / "build_embeddinggemma.sh")],
                             check=True, capture_output=True, text=True).stdout
        return out.strip().splitlines()[-1]
    return name


class CachedEmbedder(Embedder):
    """Wraps an embedder; vectors are cached on disk by (model id, prompt + text)."""

    name = "cached"
    # the model's own properties, read through (the base class's defaults would shadow them)
    model_id = property(lambda self: self.inner.model_id)  # type: ignore[assignment]
    dim = property(lambda self: self.inner.dim)  # type: ignore[assignment]
    cosine_floor = property(lambda self: self.inner.cosine_floor)  # type: ignore[assignment]
    inject_floor = property(lambda self: self.inner.inject_floor)  # type: ignore[assignment]
    fusion_weight = property(lambda self: self.inner.fusion_weight)  # type: ignore[assignment]
    fusion_share = property(lambda self: self.inner.fusion_share)  # type: ignore[assignment]
    neighbour_gap = property(lambda self: self.inner.neighbour_gap)  # type: ignore[assignment]
    available = property(lambda self: self.inner.available)  # type: ignore[assignment]
    error = property(lambda self: self.inner.error)  # type: ignore[assignment]

    def info(self) -> dict[str, Any]:
        return self.inner.info()

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.path = CACHE / f"emb-{inner.model_id}-{inner.dim}.npz".replace("#", "_")
        self.cache: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as data:
                self.cache = dict(zip(data["keys"].tolist(), data["vecs"]))
        self.dirty = False
        self.misses = 0

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)

    def _key(self, text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def _get(self, texts: list[str], embed: Any) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in self.cache]
        if todo:
            self.misses += len(todo)
            vecs = embed([texts[i] for i in todo])
            for i, v in zip(todo, vecs):
                self.cache[keys[i]] = np.asarray(v, dtype=np.float32)
            self.dirty = True
        return np.stack([self.cache[k] for k in keys])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._get([self.inner.prompts.document + t for t in texts],
                         lambda ts: self.inner._run(ts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._get([self.inner.prompts.query + text], lambda ts: self.inner._run(ts))[0]

    def save(self) -> None:
        if self.dirty:
            CACHE.mkdir(parents=True, exist_ok=True)
            keys = list(self.cache)
            np.savez(self.path, keys=np.array(keys), vecs=np.stack([self.cache[k] for k in keys]))
            self.dirty = False


class _Provide:
    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    @hookimpl
    def register_embedders(self, register, settings):  # type: ignore[no-untyped-def]
        register(self.embedder)


def build_engine(data: list[Conversation], embedder: Any | None, tmp: str,
                 **settings: Any) -> MemoryEngine:
    plugins = BM25 + (",vector" if embedder is not None else "")
    extra = [_Provide(embedder)] if embedder is not None else []
    engine = MemoryEngine(Settings(db_path=f"{tmp}/memory.db", device="cpu", plugins=plugins,
                                   dedup_sim=0.0, **settings), plugins=extra)
    for conv in data:
        engine.ingest([NewMemory(c, kind="note", source="chat", project=conv.sample_id)
                       for _, c in conv.turns])
        if hasattr(embedder, "save"):
            embedder.save()  # a slow model's embeddings survive an interrupted run
    return engine


def _recall_fn(engine: MemoryEngine, **overrides: Any):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    base = engine.settings

    def recall(project: str, query: str, k: int) -> list[str]:
        engine.settings = replace(base, **overrides)
        try:
            hits = engine.recall(query, k=k, filters=RecallFilters(project=project))
        finally:
            engine.settings = base
        return [h.memory.content for h in hits]

    return recall


def _ready(fn):  # type: ignore[no-untyped-def]
    """A locomo System whose data is already indexed."""
    return lambda data: fn


def _channel_fn(engine: MemoryEngine, name: str):  # type: ignore[no-untyped-def]
    channel = next(c for c in engine.channels if c.name == name)

    def recall(project: str, query: str, k: int) -> list[str]:
        with engine.store.snapshot() as conn:
            ids = [h.id for h in channel.search(conn, query, k, RecallFilters(project=project))]
            mem = engine.store.load(conn, ids)
        return [mem[i].content for i in ids if i in mem]

    return recall


def locomo(args: argparse.Namespace) -> dict[str, Any]:
    from semantic_memory_llama_cpp import LlamaCppEmbedder

    data = load(args.data) if args.data else load()
    path = model_path(args.model)
    inner = LlamaCppEmbedder(path, device="cpu", threads=args.threads)
    embedder = CachedEmbedder(inner)
    report: dict[str, Any] = {"model": args.model, "model_id": inner.model_id, "dim": inner.dim,
                              "prompts": inner.prompts.__dict__, "ks": list(KS), "results": {}}
    with tempfile.TemporaryDirectory(prefix="bench-vector-") as tmp:
        t0 = time.perf_counter()
        engine = build_engine(data, embedder, tmp)
        report["index_s"] = round(time.perf_counter() - t0, 1)
        vector = next(c for c in engine.channels if c.name == "vector")
        if vector._ann_config.ann == "on":  # MEMORY_VECTOR_ANN=on: search the index, built now
            report["ann"] = vector.reindex()
        report["embedded_fresh"] = embedder.misses
        embedder.save()
        results = report["results"]
        for name in ("porter", "trigram", "vector"):
            if not args.only or name in args.only.split(","):
                results[name] = evaluate(_ready(_channel_fn(engine, name)), data)
        embedder.save()
        if args.dump:
            _dump(engine, data, args.dump)
        configs: dict[str, dict[str, Any]] = {
            "bm25_only": {"_channels": ["porter", "trigram"]},
            "vector_only": {"_channels": ["vector"]},
            "hybrid_rrf_equal": {"fusion": "rrf", "fast_path": False, "recall_min_cosine": 0.0,
                                 "fusion_gate_power": 0.0, "channel_weights": "vector=1"},
            "hybrid_rrf_model_weight_only": {"fusion": "rrf", "fast_path": False,
                                             "fusion_gate_power": 0.0},
            "hybrid_rrf": {"fusion": "rrf"},
            "hybrid_no_neighbours": {"neighbours": 0},
            "hybrid_default_no_fast_path": {"fast_path": False},
            "hybrid_default": {},
        }
        extras = []
        if args.only:
            configs = {n: c for n, c in configs.items() if n in args.only.split(",")}
        for extra in args.config or []:
            name, _, spec = extra.partition(":")
            configs[name] = json.loads(spec)
            extras.append(name)
        for name, cfg in configs.items():
            only = cfg.pop("_channels", None)
            if only:  # the engine with only these channels (neighbours and all)
                saved = engine.channels
                engine.channels = [c for c in saved if c.name in only]
                try:
                    results[name] = evaluate(_ready(_recall_fn(engine)), data)
                finally:
                    engine.channels = saved
                continue
            weights = cfg.pop("channel_weights", None)
            saved_w = dict(engine.weights)
            if weights:
                engine.weights.update({k: float(v) for k, v in
                                       (p.split("=") for p in weights.split(","))})
            try:
                results[name] = evaluate(_ready(_recall_fn(engine, **cfg)), data)
            finally:
                engine.weights = saved_w
            embedder.save()
        if args.loo and extras:
            report["leave_one_out"] = leave_one_out({n: results[n] for n in extras}, data,
                                                    args.loo_k)
        if args.shares:
            trigram = [float(x) for x in args.trigram.split(",")] if args.trigram else None
            report["shares"] = share_sweep(
                engine, data, [float(x) for x in args.shares.split(",")], trigram)
            embedder.save()
        for r in results.values():
            r.pop("per_sample", None)
        engine.close()
    embedder.save()
    return report


def leave_one_out(runs: dict[Any, dict[str, Any]], data: list[Conversation], k: int = 10
                  ) -> dict[str, Any]:
    """Leave-one-conversation-out over `evaluate` reports: the run with the best mean R@k on
    four conversations, scored on the fifth; pooled over questions, at R@k and at every k."""
    folds = {}
    for held in (c.sample_id for c in data):
        best = max(runs, key=lambda name: statistics.fmean(
            v[k] for s, v in runs[name]["per_sample"].items() if s != held))
        folds[held] = {"chosen": best, f"R@{k}": runs[best]["per_sample"][held][k]}
    n = {c.sample_id: len(c.questions) for c in data}
    total = sum(n.values())
    every = {kk: round(sum(runs[f["chosen"]]["per_sample"][s][kk] * n[s]
                           for s, f in folds.items()) / total, 1) for kk in KS}
    return {"folds": folds, f"R@{k}": every[k], "held_out": every}


def share_sweep(engine: MemoryEngine, data: list[Conversation], shares: list[float],
                trigram: list[float] | None = None, k: int = 10) -> dict[str, Any]:
    """Score fusion at each vector share (MEMORY_FUSION_VECTOR_SHARE) and, with `trigram`, each
    trigram score weight (the grid of both), with leave-one-conversation-out on R@k: the pair
    chosen on four conversations, scored on the fifth. `runs` keeps the per-conversation
    figures for `joint`."""
    saved = dict(engine.score_weights)
    runs: dict[str, dict[str, Any]] = {}
    try:
        for tw in trigram or [saved["trigram"]]:
            engine.score_weights["trigram"] = tw
            for share in shares:
                runs[f"trigram={tw},share={share}"] = evaluate(_ready(_recall_fn(
                    engine, fusion="score", fusion_vector_share=share)), data)
    finally:
        engine.score_weights = saved
    return {"recall": {name: r["recall"] for name, r in runs.items()},
            "leave_one_out": leave_one_out(runs, data, k),
            "runs": {name: r["per_sample"] for name, r in runs.items()}}


def joint(args: argparse.Namespace) -> dict[str, Any]:
    """Leave-one-conversation-out across models over `locomo --shares … --trigram …` reports:
    one trigram score weight for every model (the channel's), each model its own share. On
    four conversations the weight whose best shares sum to the most R@k, and each model's best
    share at that weight; scored on the fifth."""
    reports = {Path(f).stem: json.loads(Path(f).read_text()) for f in args.reports}
    runs = {m: r["shares"]["runs"] for m, r in reports.items()}
    n = {c.sample_id: len(c.questions) for c in (load(args.data) if args.data else load())}
    key = str(args.k)

    def pair(name: str) -> tuple[float, float]:
        tw, share = (float(p.split("=")[1]) for p in name.split(","))
        return tw, share

    def best(model: str, tw: float, train: list[str]) -> str:
        return max((name for name in runs[model] if pair(name)[0] == tw),
                   key=lambda name: sum(runs[model][name][s][key] * n[s] for s in train))

    weights = sorted({pair(name)[0] for r in runs.values() for name in r})
    folds: dict[str, Any] = {}
    held: dict[str, dict[str, float]] = {m: {} for m in runs}
    for out in n:
        train = [s for s in n if s != out]
        tw = max(weights, key=lambda w: sum(runs[m][best(m, w, train)][s][key] * n[s]
                                            for m in runs for s in train))
        chosen = {m: best(m, tw, train) for m in runs}
        folds[out] = {"trigram": tw, **{m: pair(c)[1] for m, c in chosen.items()}}
        for m, c in chosen.items():
            for k, v in runs[m][c][out].items():
                held[m][k] = held[m].get(k, 0.0) + v * n[out] / sum(n.values())
    return {"folds": folds,
            "held_out": {m: {k: round(v, 1) for k, v in r.items()} for m, r in held.items()}}


def _dump(engine: MemoryEngine, data: list[Conversation], path: str) -> None:
    """Per question: each channel's top 100 (content, score) and the keyword confidence, for
    exploring fusion offline."""
    out = []
    chans = {c.name: c for c in engine.channels}
    porter = chans["porter"]
    for conv in data:
        for q in conv.questions:
            item: dict[str, Any] = {"project": conv.sample_id, "q": q.text,
                                    "evidence": sorted(q.evidence)}
            with engine.store.snapshot() as conn:
                for name, ch in chans.items():
                    found = ch.search(conn, q.text, 100, RecallFilters(project=conv.sample_id))
                    mem = engine.store.load(conn, [h.id for h in found])
                    item[name] = [[mem[h.id].content, round(h.score, 5)] for h in found]
                    if name == "porter":
                        item["confidence"] = porter.confidence(conn, q.text, [h.id for h in found])
            out.append(item)
    Path(path).write_text(json.dumps(out))


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    from semantic_memory_llama_cpp import LlamaCppEmbedder

    data = load()
    texts = [c for conv in data for _, c in conv.turns][: args.texts]
    emb = LlamaCppEmbedder(model_path(args.model), device="cpu", threads=args.threads)
    t = time.perf_counter()
    emb.load()
    load_s = time.perf_counter() - t
    out: dict[str, Any] = {"model": args.model, "model_id": emb.model_id, "texts": len(texts),
                           "load_s": round(load_s, 3)}
    t = time.perf_counter()
    emb.embed_documents(texts)
    out["documents_per_s"] = round(len(texts) / (time.perf_counter() - t), 1)
    lat = []
    for q in texts[:50]:
        t = time.perf_counter()
        emb.embed_query(q)
        lat.append(time.perf_counter() - t)
    out["query_ms_p50"] = round(statistics.median(lat) * 1000, 2)
    return out


def search(args: argparse.Namespace) -> dict[str, Any]:
    """p50 of VectorMatrix.top (what the channel does per query) vs reading every BLOB from
    SQLite and scoring it (the spec's per-query approach), on synthetic unit vectors."""
    from semantic_memory_vector.matrix import VectorMatrix

    rng = np.random.default_rng(0)
    rows_list = [int(r) for r in args.rows.split(",")]
    dims = [int(d) for d in args.dims.split(",")]
    out: dict[str, Any] = {"k": 50, "results": []}
    for dim in dims:
        for rows in rows_list:
            matrix = VectorMatrix(dim)
            chunk = 50_000
            with tempfile.TemporaryDirectory(prefix="bench-search-", dir=args.tmp) as tmp:
                conn = sqlite3.connect(f"{tmp}/v.db")
                conn.execute("CREATE TABLE memories_vec (memory_id INTEGER PRIMARY KEY, vec BLOB)")
                for start in range(0, rows, chunk):
                    n = min(chunk, rows - start)
                    v = rng.standard_normal((n, dim), dtype=np.float32)
                    v /= np.linalg.norm(v, axis=1, keepdims=True)
                    ids = list(range(start + 1, start + n + 1))
                    matrix.upsert(ids, v)
                    if rows * dim <= args.blob_limit:
                        conn.executemany("INSERT INTO memories_vec VALUES (?, ?)",
                                         zip(ids, (r.tobytes() for r in v)))
                conn.commit()
                queries = rng.standard_normal((args.queries, dim), dtype=np.float32)
                queries /= np.linalg.norm(queries, axis=1, keepdims=True)
                lat = []
                for q in queries:
                    t = time.perf_counter()
                    matrix.top(q, 50)
                    lat.append(time.perf_counter() - t)
                entry: dict[str, Any] = {"rows": rows, "dim": dim,
                                         "matrix_p50_ms": round(statistics.median(lat) * 1000, 2)}
                if rows * dim <= args.blob_limit:
                    blat = []
                    for q in queries[: max(3, args.queries // 10)]:
                        t = time.perf_counter()
                        got = conn.execute("SELECT memory_id, vec FROM memories_vec").fetchall()
                        m = np.frombuffer(b"".join(r[1] for r in got), dtype=np.float32)
                        sims = m.reshape(len(got), dim) @ q
                        np.argpartition(-sims, 49)[:50]
                        blat.append(time.perf_counter() - t)
                    entry["blob_scan_p50_ms"] = round(statistics.median(blat) * 1000, 2)
                    entry["speedup"] = round(entry["blob_scan_p50_ms"] / entry["matrix_p50_ms"], 1)
                conn.close()
                out["results"].append(entry)
                print(json.dumps(entry), file=sys.stderr)
            del matrix
    return out


# --- ann: the ANN index vs exact ---------------------------------------------------------------

def realistic_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Unit vectors shaped like sentence embeddings, not uniform noise: a skewed mixture of
    anisotropic clusters (sqrt(n) of them, Dirichlet weights) in a low-rank subspace (dim/6,
    decaying variance), a shared mean direction (embeddings share one) and a little
    isotropic noise. Queries drawn from the same mixture have near neighbours, as real ones do."""
    rng = np.random.default_rng(seed)
    clusters = max(16, int(n ** 0.5))
    rank = max(32, dim // 6)
    basis = np.linalg.qr(rng.standard_normal((dim, rank)))[0].T.astype(np.float32)
    mean = rng.standard_normal(dim).astype(np.float32)
    mean /= np.linalg.norm(mean)
    scales = (1.0 / np.arange(1, rank + 1) ** 0.5).astype(np.float32)
    centers = rng.standard_normal((clusters, rank)).astype(np.float32) * scales
    spread = rng.uniform(0.3, 0.9, clusters).astype(np.float32)
    weights = rng.dirichlet(np.full(clusters, 0.5))
    out = np.empty((n, dim), dtype=np.float32)
    for s in range(0, n, 50_000):
        m = min(50_000, n - s)
        c = rng.choice(clusters, m, p=weights)
        low = centers[c] + rng.standard_normal((m, rank)).astype(np.float32) * (
            scales * spread[c, None])
        v = low @ basis + 0.6 * mean + rng.standard_normal((m, dim)).astype(np.float32) * (
            0.35 / dim ** 0.5)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        out[s : s + m] = v
    return out


def real_vectors(rows: int, queries: int, seed: int = 0
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """Real MiniLM embeddings from this bench's cache (LoCoMo dev turns and the coding set's
    memories, embedded by earlier `locomo`/`guard.py --model minilm` runs), the LoCoMo dev
    questions as queries, and up to `rows` documents: the real ones plus distractors on their
    manifold (a random blend of three real documents, plus a little noise), so that a query's
    neighbourhood is crowded as among a million real memories. Not near-copies of one document:
    a store merges those (MEMORY_DEDUP_SIM), and 180 near-copies of each of 5,486 documents
    left recall@10 at 0.82 whatever the search breadth (docs/vector.md)."""
    from bench.locomo import load as load_locomo

    found = sorted(CACHE.glob("emb-all-MiniLM-L6-v2*-384.npz"))
    if not found:
        raise SystemExit("no MiniLM cache: run `bench_vector.py locomo --model minilm` first")
    with np.load(found[0]) as data:
        cache = dict(zip(data["keys"].tolist(), data["vecs"]))
    # MiniLM has no prompts: a question's key is the hash of its text
    keys = [hashlib.sha1(q.text.encode()).hexdigest()
            for c in load_locomo() for q in c.questions]
    keys = [k for k in dict.fromkeys(keys) if k in cache][:queries]
    asked = set(keys)
    real = np.stack([v for k, v in cache.items() if k not in asked]).astype(np.float32)
    qs = np.stack([cache[k] for k in keys]).astype(np.float32)
    rng = np.random.default_rng(seed)
    extra = max(0, rows - len(real))
    fake = np.empty((extra, real.shape[1]), dtype=np.float32)
    for s in range(0, extra, 100_000):  # a blend of three real documents, plus a little noise
        m = min(100_000, extra - s)
        w = rng.dirichlet(np.ones(3), m).astype(np.float32)
        picks = rng.integers(0, len(real), (m, 3))
        v = np.einsum("mk,mkd->md", w, real[picks]) + rng.standard_normal(
            (m, real.shape[1])).astype(np.float32) * 0.02
        fake[s : s + m] = v / np.linalg.norm(v, axis=1, keepdims=True)
    docs = np.concatenate([real, fake])[:rows]
    return docs[rng.permutation(len(docs))], qs, min(rows, len(real))


class ArrayEmbedder(Embedder):
    """Bench-only embedder: 'v<i>' is row i of the documents, 'q<i>' row i of the queries
    (memory-mapped .npy files), so a store of N vectors needs no model."""

    name = "bench-array"
    model_id = "bench-array"
    cosine_floor = 0.0

    def __init__(self, docs: str, queries: str) -> None:
        self.docs = np.load(docs, mmap_mode="r")
        self.queries = np.load(queries, mmap_mode="r")
        self.dim = int(self.docs.shape[1])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.docs[[int(t.split()[0][1:]) for t in texts]])

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self.queries[int(text[1:])])


def _ann_engine(tmp: str, embedder: Any) -> MemoryEngine:
    return MemoryEngine(Settings(db_path=f"{tmp}/memory.db", device="cpu", plugins="vector",
                                 dedup_sim=0.0, recall_min_cosine=0.0),
                        plugins=[_Provide(embedder)])


def _rss_mb() -> float:
    """This process's peak RSS. Linux: VmHWM, since ru_maxrss keeps the parent's peak across
    fork+exec (a probe spawned by a bench holding the whole matrix would report that)."""
    import resource

    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def exact_top10(docs: np.ndarray, queries: np.ndarray, chunk: int = 50) -> list[np.ndarray]:
    """Row indexes of each query's 10 nearest documents by numpy exact: the truth recall@10 is
    scored against (`chunk` queries per matrix product)."""
    out: list[np.ndarray] = []
    for s in range(0, len(queries), chunk):
        out += list(np.argpartition(-(docs @ queries[s : s + chunk].T), 9, axis=0)[:10].T)
    return out


def ann_probe(args: argparse.Namespace) -> dict[str, Any]:
    """Runs in a fresh process: open the store, time the first vector recall (start), search
    every query through the channel (top 10 ids) and take this process's peak RSS; then load
    the whole matrix (after the RSS reading) and time numpy exact and the channel query by
    query, interleaved, so that both p50s see the same load (the first `--timed` queries)."""
    from semantic_memory_vector import ann as ann_mod

    if args.min_candidates is not None:  # search-time knobs
        ann_mod.MIN_CANDIDATES = args.min_candidates
    if args.oversample is not None:
        ann_mod.OVERSAMPLE = args.oversample
    if args.expansion_search is not None:  # one breadth whatever the index's size
        ann_mod.EXPANSION_SEARCH = ann_mod.EXPANSION_SEARCH_LARGE = args.expansion_search
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0 = time.perf_counter()
    embedder = ArrayEmbedder(f"{args.tmp}/docs.npy", f"{args.tmp}/queries.npy")
    engine = _ann_engine(args.tmp, embedder)
    open_s = time.perf_counter() - t0
    engine.recall("q0", k=10)
    start_s = time.perf_counter() - t0
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    channel = next(c for c in engine.channels if c.name == "vector")
    kind = type(channel._matrix).__name__
    found = []
    with engine.store.snapshot() as conn:
        for i in range(args.queries):
            found.append([h.id for h in channel.search(conn, f"q{i}", 10, RecallFilters())])
        peak = _rss_mb()
        docs = np.load(f"{args.tmp}/docs.npy")
        lat, exact = [], []
        for i in range(min(args.queries, args.timed)):
            q = embedder.embed_query(f"q{i}")
            t = time.perf_counter()
            sims = docs @ q
            part = np.argpartition(-sims, 9)[:10]
            part[np.argsort(-sims[part])]
            exact.append(time.perf_counter() - t)
            t = time.perf_counter()
            channel.search(conn, f"q{i}", 10, RecallFilters())
            lat.append(time.perf_counter() - t)
    engine.close()
    out: dict[str, Any] = {}
    if Path(f"{args.tmp}/ids.npy").exists():  # a kept store: its own truth, numpy exact
        ids = np.load(f"{args.tmp}/ids.npy")
        queries = np.load(f"{args.tmp}/queries.npy")[: args.queries]
        hits = sum(len(set(ids[t].tolist()) & set(f)) / 10
                   for t, f in zip(exact_top10(docs, queries), found))
        out["recall_at_10"] = round(hits / len(queries), 4)
    out["graph"] = {"expansion_search": ann_mod.search_breadth(len(docs)),
                    "candidates": f"max({ann_mod.OVERSAMPLE}n, {ann_mod.MIN_CANDIDATES})"}
    return {**out, "open_s": round(open_s, 3), "start_s": round(start_s, 3), "searcher": kind,
            "timed_queries": min(args.queries, args.timed),
            "index_p50_ms": round(statistics.median(lat) * 1000, 3),
            "exact_p50_ms": round(statistics.median(exact) * 1000, 3),
            "peak_rss_mb": peak, "found": found}


def ann(args: argparse.Namespace) -> dict[str, Any]:
    """Store N realistic vectors through the vector channel (engine.ingest, an array embedder),
    build the index (`reindex`, timed), then a fresh process opens the store and answers."""
    rows, dim, nq = args.rows, args.dim, args.queries
    out: dict[str, Any] = {"rows": rows, "dim": dim, "queries": nq, "data": "clustered low-rank"}
    with tempfile.TemporaryDirectory(prefix="bench-ann-", dir=args.tmp) as tmp:
        if args.keep:  # the store stays for `ann-probe --tmp KEEP`
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            tmp = args.keep
        if args.data == "minilm":  # real embeddings and distractors on their manifold
            docs, queries, real = real_vectors(rows, nq, seed=args.seed)
            rows, dim, nq = len(docs), docs.shape[1], len(queries)
            out.update(rows=rows, dim=dim, queries=nq, data=f"MiniLM: {real} real (LoCoMo dev "
                       "turns, coding memories), the rest distractors on their manifold; "
                       "LoCoMo dev questions")
            allv = docs
        else:
            allv = realistic_vectors(rows + nq, dim, seed=args.seed)
            docs, queries = allv[:rows], allv[rows:]
        np.save(f"{tmp}/docs.npy", docs)
        np.save(f"{tmp}/queries.npy", queries)
        env_before = os.environ.get("MEMORY_VECTOR_ANN")
        os.environ["MEMORY_VECTOR_ANN"] = "off"  # the loader does not build; reindex does
        t = time.perf_counter()
        engine = _ann_engine(tmp, ArrayEmbedder(f"{tmp}/docs.npy", f"{tmp}/queries.npy"))
        channel = next(c for c in engine.channels if c.name == "vector")
        ids = np.zeros(rows, dtype=np.int64)
        for s in range(0, rows, args.batch):
            e = min(rows, s + args.batch)
            # the bulk path: memories in one batch, then their vectors through the channel's
            # own write (what backfill and migrate use), one transaction per batch
            got = engine.ingest([NewMemory(f"v{i} bench memory", kind="note", source="bench")
                                 for i in range(s, e)], batch_is_session=False, prepare=False)
            with engine.store.write() as conn:
                marks = ",".join("?" * len(got))
                by_uid = dict(conn.execute(f"SELECT uid, id FROM memories WHERE uid IN ({marks})",
                                           [r.uid for r in got]).fetchall())
                ids[s:e] = [by_uid[r.uid] for r in got]
                channel.write_vectors(conn, ids[s:e].tolist(), docs[s:e], channel.tag())
        np.save(f"{tmp}/ids.npy", ids)  # memory id of each row: `ann-probe` scores a kept store
        out["ingest_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        built = channel.reindex(threads=args.threads)
        out["build_s"] = round(time.perf_counter() - t, 1)
        out["build_s_per_100k"] = round(out["build_s"] * 100_000 / rows, 1)
        out["index_mb"] = round(Path(built["file"]).stat().st_size / 1e6, 1)
        out["dtype"] = built["dtype"]
        engine.close()
        if env_before is None:
            del os.environ["MEMORY_VECTOR_ANN"]
        else:
            os.environ["MEMORY_VECTOR_ANN"] = env_before
        truth = [set(ids[t].tolist()) for t in exact_top10(docs, queries)]
        del allv, docs
        env = dict(os.environ, MEMORY_VECTOR_ANN_MIN_ROWS=str(args.min_rows))
        proc = subprocess.run([sys.executable, __file__, "ann-probe", "--tmp", tmp,
                               "--queries", str(nq)], env=env, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        probe = json.loads(proc.stdout)
        found = probe.pop("found")
        probe.pop("recall_at_10", None)  # scored below, against the same truth
        out.update(probe)
        from semantic_memory_vector import ann as ann_mod

        out["graph"] = {"connectivity": ann_mod.CONNECTIVITY, "expansion_add":
                        ann_mod.EXPANSION_ADD, "expansion_search": ann_mod.search_breadth(rows),
                        "candidates": f"max({ann_mod.OVERSAMPLE}n, {ann_mod.MIN_CANDIDATES})"}
        out["recall_at_10"] = round(statistics.fmean(
            len(set(f) & t) / 10 for f, t in zip(found, truth)), 4)
        out["ratio"] = round(out["index_p50_ms"] / out["exact_p50_ms"], 4)
    return out


def ann_links(args: argparse.Namespace) -> dict[str, Any]:
    """usearch alone on `real_vectors` (no store): per links-per-node value, the build time
    and, per search breadth, recall@10 of 40 i8 candidates rescored exactly (as the channel
    does) against numpy exact, with both p50s. Isolates the graph from the channel's I/O."""
    from usearch.index import Index

    docs, queries, real = real_vectors(args.rows, args.queries, seed=args.seed)
    truth = [set(t.tolist()) for t in exact_top10(docs, queries)]
    exact = []
    for q in queries[:100]:
        t = time.perf_counter()
        np.argpartition(-(docs @ q), 9)[:10]
        exact.append(time.perf_counter() - t)
    exact_ms = statistics.median(exact) * 1000
    out: dict[str, Any] = {"rows": len(docs), "real": real, "queries": len(queries),
                           "exact_p50_ms": round(exact_ms, 2), "graphs": []}
    for links in (int(x) for x in args.links.split(",")):
        index = Index(ndim=docs.shape[1], metric="cos", dtype="i8", connectivity=links,
                      expansion_add=128)
        t = time.perf_counter()
        for s in range(0, len(docs), 20_000):
            index.add(np.arange(s, min(len(docs), s + 20_000), dtype=np.uint64),
                      docs[s : s + 20_000], threads=args.threads)
        graph: dict[str, Any] = {"links": links, "build_s": round(time.perf_counter() - t, 1),
                                 "breadths": []}
        for breadth in (int(x) for x in args.breadths.split(",")):
            index.expansion_search = breadth
            hits, lat = 0.0, []
            for q, want in zip(queries, truth):
                t = time.perf_counter()
                found = index.search(q, 40).keys.astype(np.int64)
                top = found[np.argsort(-(docs[found] @ q))[:10]]
                lat.append(time.perf_counter() - t)
                hits += len(set(top.tolist()) & want) / 10
            p50 = statistics.median(lat) * 1000
            graph["breadths"].append({"breadth": breadth,
                                      "recall_at_10": round(hits / len(queries), 4),
                                      "p50_ms": round(p50, 3), "ratio": round(p50 / exact_ms, 4)})
        out["graphs"].append(graph)
        del index
    return out


def ann_libs(args: argparse.Namespace) -> dict[str, Any]:
    """The candidate libraries on the same realistic vectors (M=16, ef_construction=128, both
    cores): build time, index file size, p50 and recall@10 vs exact at ef 64/128/256, usearch
    also with `4k` candidates rescored exactly (what the channel does). faiss-cpu and hnswlib
    are not dependencies: `uv run --with faiss-cpu --with hnswlib …`."""
    rows, dim, nq = args.rows, args.dim, args.queries
    allv = realistic_vectors(rows + nq, dim, seed=1)
    docs, queries = allv[:rows], allv[rows:]
    truth = [set(t.tolist()) for t in exact_top10(docs, queries)]

    def measure(search: Any) -> dict[str, float]:
        lat, rec = [], []
        for q, t in zip(queries, truth):
            t0 = time.perf_counter()
            keys = search(q)
            lat.append(time.perf_counter() - t0)
            rec.append(len(set(np.asarray(keys[:10]).tolist()) & t) / 10)
        return {"p50_ms": round(statistics.median(lat) * 1000, 3),
                "recall_at_10": round(statistics.fmean(rec), 4)}

    out: dict[str, Any] = {"rows": rows, "dim": dim, "queries": nq, "libraries": {}}
    libs = out["libraries"]
    with tempfile.TemporaryDirectory(prefix="bench-ann-libs-", dir=args.tmp) as tmp:
        from usearch.index import Index

        for dtype in ("f16", "i8"):
            index = Index(ndim=dim, metric="cos", dtype=dtype, connectivity=16,
                          expansion_add=128)
            t = time.perf_counter()
            index.add(np.arange(rows), docs, threads=2)
            entry: dict[str, Any] = {"build_s": round(time.perf_counter() - t, 1)}
            index.save(f"{tmp}/i.usearch")
            entry["file_mb"] = round(os.path.getsize(f"{tmp}/i.usearch") / 1e6, 1)
            for ef in (64, 128, 256):
                index.expansion_search = ef
                entry[f"ef{ef}"] = measure(lambda q: index.search(q, 10).keys)

                def rescored(q: np.ndarray) -> np.ndarray:
                    keys = index.search(q, 40).keys
                    return keys[np.argsort(-(docs[keys] @ q))]

                entry[f"ef{ef}_rescore40"] = measure(rescored)
            t = time.perf_counter()
            Index.restore(f"{tmp}/i.usearch", view=True)
            entry["view_s"] = round(time.perf_counter() - t, 3)
            libs[f"usearch-{dtype}"] = entry
        try:
            import faiss

            faiss.omp_set_num_threads(2)
            findex = faiss.IndexHNSWFlat(dim, 16, faiss.METRIC_INNER_PRODUCT)
            findex.hnsw.efConstruction = 128
            t = time.perf_counter()
            findex.add(docs)
            entry = {"build_s": round(time.perf_counter() - t, 1)}
            for ef in (64, 128, 256):
                findex.hnsw.efSearch = ef
                entry[f"ef{ef}"] = measure(lambda q: findex.search(q[None], 10)[1][0])
            libs["faiss-hnsw-flat"] = entry
        except ImportError:
            libs["faiss-hnsw-flat"] = "not installed"
        try:
            import hnswlib

            hindex = hnswlib.Index(space="ip", dim=dim)
            hindex.init_index(max_elements=rows, ef_construction=128, M=16)
            hindex.set_num_threads(2)
            t = time.perf_counter()
            hindex.add_items(docs, np.arange(rows))
            entry = {"build_s": round(time.perf_counter() - t, 1)}
            hindex.set_num_threads(1)
            for ef in (64, 128, 256):
                hindex.set_ef(ef)
                entry[f"ef{ef}"] = measure(lambda q: hindex.knn_query(q, 10)[0][0])
            libs["hnswlib"] = entry
        except ImportError:
            libs["hnswlib"] = "not installed"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("locomo")
    p.add_argument("--model", default="minilm")
    p.add_argument("--data", default=None)
    p.add_argument("--dump", default=None, help="write per-question channel rankings here")
    p.add_argument("--loo", action="store_true",
                   help="leave-one-conversation-out over the --config runs (by R@10)")
    p.add_argument("--loo-k", type=int, default=10, help="the R@k --loo chooses by")
    p.add_argument("--shares", default=None, metavar="S1,S2,…",
                   help="also sweep the score-fusion vector share, with leave-one-out")
    p.add_argument("--trigram", default=None, metavar="W1,W2,…",
                   help="with --shares: the grid of trigram score weights and shares")
    p.add_argument("--threads", type=int, default=1,
                   help="llama.cpp threads (1 is fastest on a shared 2-core machine)")
    p.add_argument("--only", default=None, metavar="NAME,…",
                   help="only these channels/configs (e.g. vector,hybrid_default)")
    p.add_argument("--config", action="append",
                   help='extra hybrid config NAME:{"settings": ...} (Settings overrides)')
    p = sub.add_parser("joint", help="leave-one-out across models' --shares/--trigram grids")
    p.add_argument("reports", nargs="+", help="locomo reports (JSON), one per model")
    p.add_argument("--data", default=None)
    p.add_argument("--k", type=int, default=10)
    p = sub.add_parser("throughput")
    p.add_argument("--model", default="minilm")
    p.add_argument("--texts", type=int, default=300)
    p.add_argument("--threads", type=int, default=1)
    p = sub.add_parser("search")
    p.add_argument("--rows", default="10000,100000,1000000")
    p.add_argument("--dims", default="384,1024")
    p.add_argument("--queries", type=int, default=30)
    p.add_argument("--blob-limit", type=int, default=200_000_000,
                   help="skip the BLOB baseline above rows*dim (disk/time)")
    p.add_argument("--tmp", default=None)
    p = sub.add_parser("ann", help="the ANN index vs numpy exact on realistic vectors")
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--batch", type=int, default=5000, help="memories per ingest call")
    p.add_argument("--threads", type=int, default=2, help="index build threads")
    p.add_argument("--min-rows", type=int, default=0,
                   help="MEMORY_VECTOR_ANN_MIN_ROWS for the probe (0: the index always)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tmp", default=None)
    p.add_argument("--keep", default=None, metavar="DIR", help="build the store in DIR, keep it")
    p.add_argument("--data", choices=("synthetic", "minilm"), default="synthetic",
                   help="clustered low-rank vectors, or real MiniLM embeddings (cached) with "
                        "distractors on their manifold")
    p = sub.add_parser("ann-libs", help="usearch vs faiss-cpu vs hnswlib on the same vectors")
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--tmp", default=None)
    p = sub.add_parser("ann-links", help="usearch links per node x search breadth, real data")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=786)
    p.add_argument("--links", default="16,32")
    p.add_argument("--breadths", default="128,256,512,768,1024")
    p.add_argument("--threads", type=int, default=2, help="build threads")
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("ann-probe", help=argparse.SUPPRESS)
    p.add_argument("--tmp", required=True)
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--timed", type=int, default=200,
                   help="queries timed (exact and index interleaved) after the recall pass")
    p.add_argument("--expansion-search", type=int, default=None, help="override ann.py's")
    p.add_argument("--min-candidates", type=int, default=None, help="override ann.py's")
    p.add_argument("--oversample", type=float, default=None, help="override ann.py's")
    p.add_argument("--profile", action="store_true", help="cProfile the start, to stderr")
    args = parser.parse_args(argv)
    report = {"locomo": locomo, "joint": joint, "throughput": throughput,
              "search": search, "ann": ann, "ann-probe": ann_probe,
              "ann-links": ann_links, "ann-libs": ann_libs}[args.cmd](args)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
