"""LoCoMo retrieval benchmark (DESIGN.md, "Data").

Each conversation turn is one memory (``"Speaker: text"``, project = sample_id); each question of
categories 1-4 is a recall filtered to its conversation's project; recall@k is the share of the
question's evidence turns found in the top k, averaged over questions.

    uv run --all-packages python bench/locomo.py                 # every config, JSON on stdout
    uv run --all-packages python bench/locomo.py --configs fused --weights trigram=0.5
    uv run --all-packages python bench/locomo.py --sweep trigram=1,0.5,0.25,0.15,0.1,0.05

Reuse (another channel's bench adds a config in three lines):

    from locomo import load, evaluate, engine_system      # with bench/ on sys.path
    data = load()
    report = evaluate(engine_system("bm25_porter,bm25_trigram,vector"), data)

A *system* is a callable ``system(data) -> recall_fn`` that indexes the dataset and returns
``recall_fn(project, query, k) -> [content, ...]`` (best first). `evaluate` maps contents back to
turn ids (identical turns of one conversation are indistinguishable, so a hit counts for each).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from semantic_memory.keywords import STOPWORDS, words
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo-dev.json"
KS = (1, 5, 10, 25, 50)
CATEGORIES = (1, 2, 3, 4)
BM25 = "bm25_porter,bm25_trigram"

RecallFn = Callable[[str, str, int], list[str]]


@dataclass
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass
class Conversation:
    sample_id: str
    turns: list[tuple[str, str]]  # (dia_id, "Speaker: text"), in order
    questions: list[Question] = field(default_factory=list)


System = Callable[[list[Conversation]], RecallFn]
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


def load(path: str | Path = DEFAULT_DATA) -> list[Conversation]:
    """Conversations with their turns and their category 1-4 questions.

    Evidence ids are normalised ("D8:6; D9:17" is two ids, "D:11:26" is D11:26); ids that name no
    turn are dropped, and a question left without evidence is skipped (2 of 788 on the dev file).
    """
    out = []
    for sample in json.loads(Path(path).read_text(encoding="utf-8")):
        conv = sample["conversation"]
        sessions = sorted((int(k.split("_")[1]), v) for k, v in conv.items()
                          if re.fullmatch(r"session_\d+", k) and isinstance(v, list))
        turns = [(t["dia_id"], f"{t['speaker']}: {t['text']}") for _, s in sessions for t in s]
        ids = {dia_id for dia_id, _ in turns}
        item = Conversation(sample["sample_id"], turns)
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            evidence = frozenset(
                f"D{a}:{b}" for e in qa.get("evidence", []) for a, b in _EVIDENCE.findall(e)
            ) & ids
            if evidence:
                item.questions.append(Question(qa["question"], evidence, qa["category"]))
        out.append(item)
    return out


def question_recalls(recall: RecallFn, data: list[Conversation], ks: Iterable[int] = KS
                     ) -> tuple[dict[str, list[dict[int, float]]], list[float]]:
    """Per conversation, each question's recall@k (0..1), each k from its own recall(k) (the
    engine's fusion depth grows with k, so a top 10 is not the head of a top 50); plus the
    latency (s) of each question's largest recall."""
    ks = sorted(ks)
    out: dict[str, list[dict[int, float]]] = {}
    latencies = []
    for conv in data:
        by_content: dict[str, set[str]] = {}
        for dia_id, content in conv.turns:
            by_content.setdefault(content, set()).add(dia_id)
        rows = out[conv.sample_id] = []
        for q in conv.questions:
            row = {}
            for k in reversed(ks):
                t = time.perf_counter()
                contents = recall(conv.sample_id, q.text, k)
                if k == ks[-1]:
                    latencies.append(time.perf_counter() - t)
                found = set().union(*(by_content.get(c, set()) for c in contents[:k]))
                row[k] = len(found & q.evidence) / len(q.evidence)
            rows.append(dict(sorted(row.items())))
    return out, latencies


def mean_recall(per_sample: dict[str, list[dict[int, float]]], k: int,
                samples: Iterable[str] | None = None) -> float:
    """Mean recall@k in %, over the questions of `samples` (default: all)."""
    values = [row[k] for s in (samples or per_sample) for row in per_sample[s]]
    return round(100 * sum(values) / len(values), 1) if values else 0.0


def evaluate(system: System, data: list[Conversation], ks: Iterable[int] = KS) -> dict:
    """Index `data` with `system`, ask every question; recall@k overall and per conversation."""
    ks = sorted(ks)
    t0 = time.perf_counter()
    recall = system(data)
    index_s = time.perf_counter() - t0
    per_sample, latencies = question_recalls(recall, data, ks)
    return {
        "recall": {k: mean_recall(per_sample, k) for k in ks},
        "per_sample": {s: {k: mean_recall(per_sample, k, [s]) for k in ks} for s in per_sample},
        "questions": sum(len(v) for v in per_sample.values()),
        "index_s": round(index_s, 2),
        "recall_ms_p50": round(statistics.median(latencies) * 1000, 2),
    }


# --- systems --------------------------------------------------------------------------------

def engine_system(plugins: str = BM25, **settings: object) -> System:
    """The real MemoryEngine restricted to `plugins` (MEMORY_PLUGINS), db in a temp dir.

    Extra Settings fields pass through, e.g. channel_weights="trigram=0.5", rrf_k=60. The
    returned recall function carries the engine as `.engine` (and keeps the temp dir alive).
    """

    def build(data: list[Conversation]) -> RecallFn:
        tmp = tempfile.TemporaryDirectory(prefix="locomo-bench-")
        engine = MemoryEngine(Settings(db_path=f"{tmp.name}/memory.db", device="cpu",
                                       plugins=plugins, **settings))  # type: ignore[arg-type]
        for conv in data:
            engine.ingest([NewMemory(content, kind="note", project=conv.sample_id)
                           for _, content in conv.turns])

        def recall(project: str, query: str, k: int) -> list[str]:
            hits = engine.recall(query, k=k, filters=RecallFilters(project=project))
            return [h.memory.content for h in hits]

        recall.engine, recall.tmp = engine, tmp  # type: ignore[attr-defined]
        return recall

    return build


def baseline_system(shared: bool = False) -> System:
    """DESIGN.md's reference: a plain FTS5 table (porter), OR of the non-stopword terms.

    One table per conversation (shared=False) reproduces DESIGN.md's R@10 60.2; one table for
    all five, filtered by project like the engine's store, gives IDF over every conversation.
    """

    def build(data: list[Conversation]) -> RecallFn:
        conn = sqlite3.connect(":memory:")
        table: dict[str, str] = {}  # project -> its table
        for n, conv in enumerate(data):
            name = table[conv.sample_id] = "t0" if shared else f"t{n}"
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5("
                         "content, project UNINDEXED, tokenize='porter')")
            conn.executemany(f"INSERT INTO {name} VALUES (?, ?)",
                             [(content, conv.sample_id) for _, content in conv.turns])

        def recall(project: str, query: str, k: int) -> list[str]:
            terms = [w for w in words(query) if w not in STOPWORDS] or words(query)
            match = " OR ".join('"' + w.replace('"', '""') + '"' for w in terms)
            return [r[0] for r in conn.execute(
                f"SELECT content FROM {table[project]} WHERE {table[project]} MATCH ? "
                "AND project = ? ORDER BY rank LIMIT ?", (match, project, k))] if match else []

        return recall

    return build


#: name -> (description, system factory taking Settings overrides)
CONFIGS: dict[str, tuple[str, Callable[..., System]]] = {
    "baseline": ("plain FTS5 porter, OR of non-stopword terms, one table per conversation",
                 lambda **kw: baseline_system(shared=False)),
    "baseline_shared": ("the same, one table for all conversations (project filter)",
                        lambda **kw: baseline_system(shared=True)),
    "porter": ("MemoryEngine, bm25_porter only", lambda **kw: engine_system("bm25_porter", **kw)),
    "trigram": ("MemoryEngine, bm25_trigram only",
                lambda **kw: engine_system("bm25_trigram", **kw)),
    "fused_equal": ("MemoryEngine, porter + trigram, equal-weight RRF (k=60)",
                    lambda **kw: engine_system(BM25, **{"channel_weights": "trigram=1", **kw})),
    "fused": ("MemoryEngine, porter + trigram, default weights (RRF k=60)",
              lambda **kw: engine_system(BM25, **kw)),
}


def sweep(data: list[Conversation], channel: str, weights: list[float], k: int = 10) -> dict:
    """Fused recall@k for each weight of `channel`, per conversation, and leave-one-
    conversation-out: the weight chosen on four conversations, scored on the fifth."""
    recall = engine_system(BM25)(data)
    engine = recall.engine  # type: ignore[attr-defined]
    runs = {}
    for w in weights:
        engine.weights[channel] = w
        runs[w] = question_recalls(recall, data, (k,))[0]
    samples = [c.sample_id for c in data]
    folds = {}
    for held in samples:
        train = [s for s in samples if s != held]
        best = max(weights, key=lambda w: mean_recall(runs[w], k, train))
        folds[held] = {"chosen": best, f"R@{k}": mean_recall(runs[best], k, [held])}
    pooled = {s: runs[folds[s]["chosen"]][s] for s in samples}
    engine.close()
    return {
        "channel": channel,
        f"R@{k}": {str(w): mean_recall(r, k) for w, r in runs.items()},
        "per_sample": {str(w): {s: mean_recall(r, k, [s]) for s in samples}
                       for w, r in runs.items()},
        "leave_one_out": {"folds": folds, f"R@{k}": mean_recall(pooled, k)},
    }


def grid(data: list[Conversation], system: System, space: dict[str, list[float]],
         k: int = 10) -> dict:
    """recall@k (every k of KS) for each combination of the Settings values in `space`, on one
    engine whose settings are swapped in place, plus leave-one-conversation-out on R@`k`: the
    combination chosen on four conversations, scored on the fifth."""
    recall = system(data)
    engine = recall.engine  # type: ignore[attr-defined]
    names = list(space)
    runs = {}
    for values in itertools.product(*(space[n] for n in names)):
        engine.settings = replace(engine.settings, **dict(zip(names, values, strict=True)))
        runs[values] = question_recalls(recall, data)[0]
    samples = [c.sample_id for c in data]
    folds, pooled = {}, {}
    for held in samples:
        train = [s for s in samples if s != held]
        best = max(runs, key=lambda v: mean_recall(runs[v], k, train))
        folds[held] = {"chosen": dict(zip(names, best, strict=True)),
                       f"R@{k}": mean_recall(runs[best], k, [held])}
        pooled[held] = runs[best][held]
    engine.close()
    label = ", ".join
    return {
        "grid": {label(f"{n}={v}" for n, v in zip(names, values, strict=True)):
                 {kk: mean_recall(r, kk) for kk in KS} for values, r in runs.items()},
        "leave_one_out": {"folds": folds,
                          "recall": {kk: mean_recall(pooled, kk) for kk in KS}},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="LoCoMo json file")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated, from: {', '.join(CONFIGS)}")
    parser.add_argument("--weights", default=None,
                        help="MEMORY_CHANNEL_WEIGHTS for the engine configs, e.g. trigram=0.5")
    parser.add_argument("--rrf-k", type=int, default=None, help="MEMORY_RRF_K for engine configs")
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                        help="a Settings value for the engine configs, e.g. neighbours=0")
    parser.add_argument("--per-sample", action="store_true", help="add per-conversation recall")
    parser.add_argument("--sweep", default=None, metavar="CHANNEL=W1,W2,...",
                        help="instead: sweep one channel's fusion weight, with leave-one-out")
    parser.add_argument("--grid", default=None, metavar="SETTING=V1,V2;SETTING=…",
                        help="instead: every combination of these Settings values on the "
                             "fused engine (--plugins), with leave-one-out, e.g. "
                             "'neighbours=0,1,2;neighbour_gap=1,2'")
    parser.add_argument("--plugins", default=BM25, help="the engine of --grid (MEMORY_PLUGINS)")
    args = parser.parse_args(argv)
    data = load(args.data)
    report: dict[str, object] = {
        "data": str(args.data),
        "conversations": len(data),
        "memories": sum(len(c.turns) for c in data),
        "questions": sum(len(c.questions) for c in data),
        "metric": "recall@k in %: share of evidence turns in the top k, mean over questions",
    }
    if args.grid:
        space = {}
        for part in args.grid.split(";"):
            name, _, values = part.partition("=")
            kind = type(getattr(Settings(), name.strip()))
            space[name.strip()] = [kind(v) for v in values.split(",")]
        overrides = {"channel_weights": args.weights} if args.weights is not None else {}
        report["grid"] = grid(data, engine_system(args.plugins, **overrides), space)
    elif args.sweep:
        channel, _, values = args.sweep.partition("=")
        report["sweep"] = sweep(data, channel, [float(v) for v in values.split(",")])
    else:
        overrides: dict[str, object] = {}
        if args.weights is not None:
            overrides["channel_weights"] = args.weights
        if args.rrf_k is not None:
            overrides["rrf_k"] = args.rrf_k
        for item in args.set:
            name, _, value = item.partition("=")
            kind = type(getattr(Settings(), name.strip()))
            overrides[name.strip()] = int(value) != 0 if kind is bool else kind(value)
        results = {}
        for name in filter(None, args.configs.split(",")):
            description, factory = CONFIGS[name]
            result = {"config": description, **evaluate(factory(**overrides), data)}
            if not args.per_sample:
                result.pop("per_sample")
            results[name] = result
        report["results"] = results
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
