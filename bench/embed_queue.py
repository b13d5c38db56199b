"""Writes never wait for an embedding: storing real coding memories with a model, with and
without the embedding queue, against BM25-only, in one run; and the embedder's throughput.

    uv run --all-packages python bench/embed_queue.py                 # MiniLM, 300 coding memories
    uv run --all-packages python bench/embed_queue.py --limit 500 --model PATH.gguf

The memories are bench/data/coding's (real agent sessions, ~1 KB each), stored the way a
compaction flush stores them: `MemoryEngine.ingest` in batches of 50, one session per batch.
Three stores, fresh each: BM25-only (no vector plugin: the floor), hybrid with every write
embedded before it returns (MEMORY_EMBED_BACKGROUND=0, the CLI's way), and hybrid with the
queue (what the service does): the write time, then how long the queue takes to drain
(`Writer.catch_up`, as service/embed_queue.py calls it). Throughput: texts per second embedding
texts of ~100, ~500 and ~1,500 characters at batch sizes 1, 8 and 32 (`--threads`, default 1).
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from semantic_memory import testing  # noqa: E402
from semantic_memory.models import NewMemory  # noqa: E402

BATCH = 50
HYBRID = "bm25_porter,bm25_trigram,vector,llama_cpp"


def memories(limit: int) -> list[NewMemory]:
    rows = [json.loads(line) for line in
            (REPO / "bench/data/coding/memories.jsonl").read_text().splitlines()][:limit]
    return [NewMemory(r["content"], kind=r["kind"], source=r["source"], project=r["project"])
            for r in rows]


def store_all(items: list[NewMemory], **settings: Any) -> dict[str, float]:
    """Seconds to store `items` in batches; with `defer`, also the seconds to drain the queue."""
    defer = settings.pop("defer", False)
    with tempfile.TemporaryDirectory() as tmp:
        engine = testing.engine_with(Path(tmp), supersede=False, **settings)
        try:
            engine.writer.defer = defer
            start = time.perf_counter()
            for at in range(0, len(items), BATCH):
                engine.ingest([NewMemory(m.content, kind=m.kind, source=m.source,
                                         project=m.project) for m in items[at:at + BATCH]])
            out = {"write_s": round(time.perf_counter() - start, 2)}
            if defer:
                start = time.perf_counter()
                while engine.writer.catch_up(32):
                    pass
                out["queue_drain_s"] = round(time.perf_counter() - start, 2)
                out["left_in_queue"] = engine.writer.pending()
            out["per_s"] = round(len(items) / out["write_s"], 1)
            return out
        finally:
            engine.close()


def throughput(model: str, threads: int) -> dict[str, dict[str, float]]:
    """Texts per second by text length and batch size (median of 3), on `threads` CPU
    threads (1 is steady on a shared machine, where OpenMP threads spin against other jobs)."""
    from semantic_memory_llama_cpp import LlamaCppEmbedder

    embedder = LlamaCppEmbedder(model, device="cpu", threads=threads)
    base = ("The deploy script retries the upload three times, then fails the build with the "
            "last error; see scripts/deploy.sh and the CI log for the exit code. ")
    out: dict[str, dict[str, float]] = {}
    embedder.embed_documents(["warm up"])
    for chars in (100, 500, 1500):
        text = (base * (chars // len(base) + 1))[:chars]
        for batch in (1, 8, 32):
            texts = [f"{i} {text}" for i in range(32)]
            rates = []
            for _ in range(3):
                start = time.perf_counter()
                for at in range(0, len(texts), batch):
                    embedder.embed_documents(texts[at:at + batch])
                rates.append(len(texts) / (time.perf_counter() - start))
            out.setdefault(f"{chars}_chars", {})[f"batch_{batch}"] = round(
                statistics.median(rates), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=300, help="memories to store")
    parser.add_argument("--model", default="", help="GGUF model (default: the test MiniLM)")
    parser.add_argument("--threads", type=int, default=1,
                        help="llama.cpp threads of the throughput table (MEMORY_EMBED_THREADS)")
    args = parser.parse_args()
    model = args.model
    if not model:
        import models

        model = str(models.minilm())
    items = memories(args.limit)
    store_all(items[:BATCH], plugins=HYBRID, model_path=model, device="cpu")  # warm-up
    result = {
        "memories": len(items),
        "mean_chars": round(statistics.mean(len(m.content) for m in items)),
        "model": Path(model).name,
        "bm25_only": store_all(items, plugins="bm25_porter,bm25_trigram"),
        "hybrid_write_waits_for_embedding": store_all(items, plugins=HYBRID, model_path=model,
                                                      device="cpu"),
        "hybrid_with_queue": store_all(items, plugins=HYBRID, model_path=model, device="cpu",
                                       defer=True),
        "threads": args.threads,
        "texts_per_s": throughput(model, args.threads),
    }
    floor = result["bm25_only"]["write_s"]
    result["write_vs_bm25_only"] = {
        "waits": round(result["hybrid_write_waits_for_embedding"]["write_s"] / floor, 2),
        "queue": round(result["hybrid_with_queue"]["write_s"] / floor, 2)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
