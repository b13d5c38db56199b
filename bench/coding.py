"""Coding-session retrieval benchmark (bench/data/coding/README.md).

Every memory of every repository goes into one store, project = the repository, session = the
transcript's session, in arrival order; each question of the chosen split is one recall, filtered
to its repository's project (`filtered`) and over the whole store (`unfiltered`: the other
repositories are distractors). recall@k of a question = the share of its answer groups with at
least one memory in the top k (a group is one fact; any memory holding it counts); MRR is over
the first hit of any group in the top 50.

    uv run --all-packages python bench/coding.py                         # dev split, BM25 configs
    uv run --all-packages python bench/coding.py --split test --configs baseline,bm25,minilm
    uv run --all-packages python bench/coding.py --configs bm25 --set neighbours=0 --per-repo

Configs: `baseline` (plain FTS5 porter table, OR of the non-stopword terms), `bm25` (the
engine's defaults: porter + trigram), `porter`, `trigram` (one channel alone), `minilm` and
`gemma` (hybrid: porter + trigram + vector with that embedder), `minilm_vector`,
`gemma_vector` (the vector channel alone, on the hybrid's store). EmbeddingGemma is used only
when bench/build_embeddinggemma.sh has built it; otherwise its configs report a note.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from semantic_memory.keywords import STOPWORDS, words  # noqa: E402
from semantic_memory.config import Settings  # noqa: E402
from semantic_memory.models import NewMemory, RecallFilters  # noqa: E402
from semantic_memory.pipeline import MemoryEngine  # noqa: E402

DATA = ROOT / "bench" / "data" / "coding"
KS = (1, 5, 10, 25, 50)
BM25 = "bm25_porter,bm25_trigram"
#: A question is "paraphrased" when fewer than this share of its content words occur in its
#: answer memories (the `overlap` field of questions.jsonl).
PARAPHRASE_OVERLAP = 0.34
GEMMA = Path("~/.cache/semantic-memory-mcp/models/embeddinggemma-300m-q8_0.gguf").expanduser()

#: recall(project or None, query, k) -> [(project, content), ...], best first
RecallFn = Callable[[str | None, str, int], list[tuple[str, str]]]


@dataclass(frozen=True)
class Memory:
    id: str
    project: str
    session: str
    kind: str
    source: str
    content: str


@dataclass(frozen=True)
class Question:
    id: str
    project: str
    type: str
    text: str
    groups: tuple[frozenset[str], ...]
    overlap: float
    lang: str


@dataclass
class Dataset:
    memories: list[Memory]
    questions: list[Question]
    manifest: dict[str, Any]


class DataError(Exception):
    """The dataset is missing or malformed (reported in one line)."""


def load(split: str = "dev", data: Path = DATA) -> Dataset:
    """Every memory, and the questions of `split` (dev, test or all)."""
    try:
        manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
        memories = [Memory(**{k: row[k] for k in Memory.__dataclass_fields__})
                    for row in _jsonl(data / "memories.jsonl")]
        rows = list(_jsonl(data / "questions.jsonl"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"cannot read the coding dataset in {data}: {exc}") from None
    if split not in ("dev", "test", "all"):
        raise DataError(f"--split must be dev, test or all, not {split!r}")
    repos = {r["repo"] for r in manifest["repositories"]
             if split == "all" or r["split"] == split}
    questions = [Question(q["id"], q["project"], q["type"], q["question"],
                          tuple(frozenset(g) for g in q["answers"]), q["overlap"], q["lang"])
                 for q in rows if q["project"] in repos]
    return Dataset(memories, questions, manifest)


def _jsonl(path: Path) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


# --- systems: each indexes every memory and returns a RecallFn ------------------------------

def ingest(engine: MemoryEngine, data: Dataset) -> None:
    """The memories in arrival order, one batch per session (a session keeps its order)."""
    batch: list[NewMemory] = []
    session = None
    for m in data.memories:
        if m.session != session and batch:
            engine.ingest(batch)
            batch = []
        session = m.session
        batch.append(NewMemory(m.content, kind=m.kind, source=m.source, project=m.project,
                               session=f"{m.project}:{m.session}"))
    if batch:
        engine.ingest(batch)


def engine_recall(engine: MemoryEngine, **overrides: Any) -> RecallFn:
    base = engine.settings

    def recall(project: str | None, query: str, k: int) -> list[tuple[str, str]]:
        engine.settings = replace(base, **overrides) if overrides else base
        try:
            hits = engine.recall(query, k=k, filters=RecallFilters(project=project))
        finally:
            engine.settings = base
        return [(h.memory.project or "", h.memory.content) for h in hits]

    return recall


def build_engine(data: Dataset, tmp: str, plugins: str, embedder: Any = None,
                 **settings: Any) -> MemoryEngine:
    extra = []
    if embedder is not None:
        from bench_vector import _Provide  # the same plugin shim as the vector bench

        extra = [_Provide(embedder)]
    engine = MemoryEngine(Settings(db_path=f"{tmp}/memory.db", device="cpu", plugins=plugins,
                                   **settings), plugins=extra)  # type: ignore[arg-type]
    ingest(engine, data)
    return engine


def baseline(data: Dataset) -> RecallFn:
    """A plain FTS5 table (porter) of every memory, OR of the query's non-stopword terms."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(content, project UNINDEXED, "
                 "tokenize='porter')")
    conn.executemany("INSERT INTO t VALUES (?, ?)",
                     [(m.content, m.project) for m in data.memories])

    def recall(project: str | None, query: str, k: int) -> list[tuple[str, str]]:
        terms = [w for w in words(query) if w not in STOPWORDS] or words(query)
        if not terms:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in terms)
        where, args = ("AND project = ?", [project]) if project else ("", [])
        rows = conn.execute(f"SELECT project, content FROM t WHERE t MATCH ? {where} "
                            "ORDER BY rank LIMIT ?", [match, *args, k])
        return [(p, c) for p, c in rows]

    return recall


# --- scoring --------------------------------------------------------------------------------

def score(recall: RecallFn, data: Dataset, filtered: bool, ks: Iterable[int] = KS,
          per_k: bool = True) -> dict[str, Any]:
    """recall@k overall, per type and per repository, MRR, p50 latency."""
    rows, latencies = question_rows(recall, data, filtered, ks, per_k)
    splits = {r["repo"]: r["split"] for r in data.manifest.get("repositories", [])}
    return summarise(rows, latencies, sorted(ks), splits)


def question_rows(recall: RecallFn, data: Dataset, filtered: bool, ks: Iterable[int] = KS,
                  per_k: bool = True
                  ) -> tuple[list[tuple[Question, dict[str, Any]]], list[float]]:
    """Each question's recall@k (0..1, each k from its own recall unless per_k is off: the
    engine's fusion depth grows with k, so a top 10 is not the head of a top 50) and reciprocal
    rank; plus the latency (s) of each question's largest recall."""
    ks = sorted(ks)
    ids: dict[tuple[str, str], set[str]] = {}
    for m in data.memories:
        ids.setdefault((m.project, m.content), set()).add(m.id)
    rows, latencies = [], []
    for q in data.questions:
        project = q.project if filtered else None
        row: dict[str, Any] = {}
        for k in reversed(ks):
            if k == ks[-1] or per_k:
                t = time.perf_counter()
                found = recall(project, q.text, k)
                if k == ks[-1]:
                    latencies.append(time.perf_counter() - t)
                    ranked = found
            hits = [ids.get(h, set()) for h in found[:k]]
            got = set().union(*hits) if hits else set()
            row[k] = sum(1 for g in q.groups if g & got) / len(q.groups)
        answers = set().union(*q.groups)
        rank = next((i for i, h in enumerate(ranked, 1) if ids.get(h, set()) & answers), 0)
        row["rr"] = 1 / rank if rank else 0.0
        rows.append((q, row))
    return rows, latencies


def _mean(values: list[float]) -> float:
    return round(100 * sum(values) / len(values), 1) if values else 0.0


def _block(rows: list[tuple[Question, dict[str, Any]]], ks: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {f"R@{k}": _mean([r[k] for _, r in rows]) for k in ks}
    out["MRR"] = round(sum(r["rr"] for _, r in rows) / len(rows), 3) if rows else 0.0
    out["n"] = len(rows)
    return out


def summarise(rows: list[tuple[Question, dict[str, Any]]], latencies: list[float],
              ks: list[int], splits: dict[str, str] | None = None) -> dict[str, Any]:
    by_type: dict[str, list] = {}
    by_repo: dict[str, list] = {}
    for q, r in rows:
        by_type.setdefault(q.type, []).append((q, r))
        by_repo.setdefault(q.project, []).append((q, r))
    return {
        **_block(rows, ks),
        "p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else 0.0,
        "by_type": {t: _block(v, ks) for t, v in sorted(by_type.items())},
        "paraphrased": _block([x for x in rows if x[0].overlap < PARAPHRASE_OVERLAP], ks),
        "non_english": _block([x for x in rows if x[0].lang != "en"], ks),
        "by_repo": {p: _block(v, ks) for p, v in sorted(by_repo.items())},
        **({"by_split": {s: _block([x for x in rows if splits.get(x[0].project) == s], ks)
                         for s in sorted(set(splits.values()))}} if splits else {}),
    }


# --- configs --------------------------------------------------------------------------------

def _embedder(name: str, threads: int) -> Any:
    """A disk-cached llama.cpp embedder (bench_vector's), or None when the model is absent."""
    from bench_vector import CachedEmbedder, model_path
    from semantic_memory_llama_cpp import LlamaCppEmbedder

    if name == "gemma" and not GEMMA.exists():
        return None
    path = str(GEMMA) if name == "gemma" else model_path("minilm")
    return CachedEmbedder(LlamaCppEmbedder(path, device="cpu", threads=threads))


ENGINE_CONFIGS = {"bm25": BM25, "porter": "bm25_porter", "trigram": "bm25_trigram"}
MODEL_CONFIGS = {"minilm": ("minilm", False), "minilm_vector": ("minilm", True),
                 "gemma": ("gemma", False), "gemma_vector": ("gemma", True)}
CONFIGS = ("baseline", *ENGINE_CONFIGS, *MODEL_CONFIGS)


def run(data: Dataset, configs: list[str], overrides: dict[str, Any], per_k: bool,
        threads: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="coding-bench-") as tmp:
        for name in configs:
            if name == "baseline":
                fn = baseline(data)
                results[name] = {"config": "plain FTS5 porter, OR of non-stopword terms",
                                 **both(fn, data, per_k)}
            elif name in ENGINE_CONFIGS:
                engine = build_engine(data, f"{tmp}/{name}", ENGINE_CONFIGS[name], **overrides)
                results[name] = {"config": f"MemoryEngine, plugins={ENGINE_CONFIGS[name]}",
                                 **both(engine_recall(engine), data, per_k)}
                engine.close()
        models = {MODEL_CONFIGS[n][0] for n in configs if n in MODEL_CONFIGS}
        for model in sorted(models):
            embedder = _embedder(model, threads)
            wanted = [n for n in configs if n in MODEL_CONFIGS and MODEL_CONFIGS[n][0] == model]
            if embedder is None:
                for n in wanted:
                    results[n] = {"skipped": f"{GEMMA} is not built: run "
                                             "bench/build_embeddinggemma.sh first"}
                continue
            t0 = time.perf_counter()
            engine = build_engine(data, f"{tmp}/{model}", f"{BM25},vector", embedder,
                                  **overrides)
            embedder.save()
            if not any(c.name == "vector" and c.active for c in engine.channels):
                raise SystemExit(f"coding.py: the {model} vector channel is off (the log says "
                                 "why); its figures would be BM25-only's")
            index_s = round(time.perf_counter() - t0, 1)
            for n in wanted:
                saved = engine.channels
                if MODEL_CONFIGS[n][1]:
                    engine.channels = [c for c in saved if c.name == "vector"]
                try:
                    results[n] = {"config": f"MemoryEngine, {BM25},vector ({model})"
                                            + (", vector channel alone" if MODEL_CONFIGS[n][1]
                                               else ""),
                                  "index_s": index_s, **both(engine_recall(engine), data, per_k)}
                finally:
                    engine.channels = saved
            embedder.save()
            engine.close()
    return results


def both(fn: RecallFn, data: Dataset, per_k: bool) -> dict[str, Any]:
    return {"filtered": score(fn, data, True, per_k=per_k),
            "unfiltered": score(fn, data, False, per_k=per_k)}


def _setting(item: str) -> tuple[str, Any]:
    name, _, value = item.partition("=")
    name = name.strip()
    if not hasattr(Settings(), name):
        raise DataError(f"--set: no setting named {name!r}")
    kind = type(getattr(Settings(), name))
    try:
        return name, (int(value) != 0 if kind is bool else kind(value))
    except ValueError:
        raise DataError(f"--set {name}: {value!r} is not a {kind.__name__}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="dev", help="dev, test or all (default dev)")
    parser.add_argument("--configs", default="baseline,bm25,porter,trigram",
                        help=f"comma-separated, from: {', '.join(CONFIGS)}")
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                        help="a Settings value for the engine configs, e.g. neighbours=0")
    parser.add_argument("--per-repo", action="store_true", help="keep per-repository blocks")
    parser.add_argument("--one-recall", action="store_true",
                        help="score every k from one recall at k=50 (faster, approximate)")
    parser.add_argument("--threads", type=int, default=0,
                        help="embedder threads (0: llama.cpp's default)")
    parser.add_argument("--data", default=str(DATA), help="dataset directory")
    args = parser.parse_args(argv)
    try:
        data = load(args.split, Path(args.data))
        configs = [c for c in args.configs.split(",") if c]
        unknown = [c for c in configs if c not in CONFIGS]
        if unknown:
            raise DataError(f"unknown config {unknown[0]!r}; choose from {', '.join(CONFIGS)}")
        overrides = dict(_setting(s) for s in args.set)
    except DataError as exc:
        print(f"coding.py: {exc}", file=sys.stderr)
        return 2
    results = run(data, configs, overrides, not args.one_recall, args.threads)
    if not args.per_repo:
        for r in results.values():
            for side in ("filtered", "unfiltered"):
                r.get(side, {}).pop("by_repo", None)
    report = {
        "split": args.split, "settings": {k: str(v) for k, v in overrides.items()},
        "repositories": len({q.project for q in data.questions}),
        "memories_in_store": len(data.memories), "questions": len(data.questions),
        "metric": "recall@k in %: share of a question's answer groups with a memory in the "
                  "top k, mean over questions; MRR of the first answer memory in the top 50",
        "paraphrased_means": f"overlap < {PARAPHRASE_OVERLAP}",
        "results": results,
    }
    json.dump(report, sys.stdout, indent=1, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
