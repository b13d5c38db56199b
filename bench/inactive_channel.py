"""Ingest with the vector plugin installed but no model, against the default install, in one run.

    uv run --all-packages python bench/inactive_channel.py            # 20k memories, 3 rounds
    uv run --all-packages python bench/inactive_channel.py --memories 5000 --rounds 5

Each round imports the same synthetic LoCoMo-like memories (bench/scale.py's generator) into a
fresh SQLite file through `MemoryEngine.ingest` in the CLI's import batches, once with the
default plugins (BM25 porter + trigram) and once with the vector channel and the llama.cpp
embedder installed too but no model configured, alternately, so both see the same machine.
Issue #25's goal: an inactive channel costs nothing (the batch path, not row by row), so the
median ratio is ~1. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import synthetic  # noqa: E402
from semantic_memory.cli import IMPORT_BATCH  # noqa: E402
from semantic_memory.config import Settings  # noqa: E402
from semantic_memory.models import NewMemory  # noqa: E402
from semantic_memory.pipeline import MemoryEngine  # noqa: E402

DEFAULT = "bm25_porter,bm25_trigram"
WITH_VECTOR = "bm25_porter,bm25_trigram,vector,llama_cpp"


def import_rate(texts: list[str], plugins: str) -> float:
    """Memories per second importing `texts` into a fresh store with `plugins`."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = MemoryEngine(Settings(db_path=f"{tmp}/m.db", plugins=plugins, model_path="",
                                       device="cpu", supersede=False))
        try:
            assert plugins == DEFAULT or engine.recall_mode == "keyword"
            start = time.perf_counter()
            for at in range(0, len(texts), IMPORT_BATCH):
                engine.ingest([NewMemory(t, project=f"p{i % 20}")
                               for i, t in enumerate(texts[at:at + IMPORT_BATCH], at)],
                              batch_is_session=False)
            return len(texts) / (time.perf_counter() - start)
        finally:
            engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    texts = synthetic(args.memories)
    rates: dict[str, list[float]] = {"default": [], "vector_installed_no_model": []}
    import_rate(texts[:IMPORT_BATCH], WITH_VECTOR)  # warm-up: imports, page cache
    import_rate(texts[:IMPORT_BATCH], DEFAULT)
    for _ in range(args.rounds):
        rates["default"].append(import_rate(texts, DEFAULT))
        rates["vector_installed_no_model"].append(import_rate(texts, WITH_VECTOR))
    medians = {name: round(statistics.median(r)) for name, r in rates.items()}
    print(json.dumps({"memories": args.memories, "rounds": args.rounds,
                      "memories_per_s_median": medians,
                      "ratio_vector_installed_to_default": round(
                          medians["vector_installed_no_model"] / medians["default"], 3),
                      "goal": "ratio >= 0.9 (no slower than without the plugin)"}, indent=2))


if __name__ == "__main__":
    main()
