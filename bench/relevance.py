"""The relevance bars of hook injections, on LoCoMo dev and the coding set.

A hook injects only what a channel vouches for (`MemoryEngine.recall(relevant_only=True)`):
for BM25, a memory containing at least the bar's share of the query, IDF-weighted
(MEMORY_INJECT_MIN_COVERAGE, `--knob coverage`); for the vector channel, a memory at least
the injection floor's cosine from it (MEMORY_INJECT_MIN_COSINE, `--knob cosine`, with
`--model`). Too low a bar injects noise into every prompt; too high a bar withholds what was
asked about. Each question and bar is injected with k = 5 (the hooks' MEMORY_PLUGIN_LIMIT):

- on topic: a LoCoMo question in its own conversation; `r5` = share of its evidence turns
  injected, `injects` = share of questions that inject anything;
- off topic: the same question in the next conversation (other people, other events), where
  nothing is relevant; `off_injects` = share of questions that inject anything anyway;
- code (`code`): the coding set's dev questions in their repository (`r5` = share of answer
  groups injected, `injects`), and the off-topic coding prompts of `data/off_topic_code.json`
  (other stacks, other tasks) in each dev repository (`off_injects` = share of prompt and
  repository pairs that inject anything).

The bar is chosen on LoCoMo by `r5 - off_injects` (a relevant turn recalled is worth as much
as an off-topic injection avoided), with leave-one-conversation-out; the code figures are
reported beside it. Prints JSON.

    uv run --all-packages python bench/relevance.py
    uv run --all-packages python bench/relevance.py --bars 0,0.3,0.5 --plugins bm25_porter
    uv run --all-packages python bench/relevance.py --model minilm --knob cosine \\
        --bars 0.25,0.3,0.35,0.4,0.45,0.5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))  # models.py: the MiniLM GGUF

import coding  # noqa: E402
from locomo import BM25, Conversation, load  # noqa: E402
from semantic_memory.config import Settings  # noqa: E402
from semantic_memory.embedding_channel import EmbeddingChannel  # noqa: E402
from semantic_memory.models import NewMemory, RecallFilters  # noqa: E402
from semantic_memory.pipeline import MemoryEngine  # noqa: E402

K = 5
BARS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
OFF_TOPIC_CODE = BENCH / "data" / "off_topic_code.json"
GENERIC_PROMPTS = BENCH / "data" / "generic_prompts.json"
METRICS = ("r5", "injects", "off_injects")


def set_bar(engine: MemoryEngine, knob: str, bar: float) -> None:
    """Swap the bar into the built channels (they copy their settings when built)."""
    for channel in engine.channels:
        if knob == "cosine" and isinstance(channel, EmbeddingChannel):
            channel.configured_inject_floor = bar
        elif knob == "coverage" and hasattr(channel, "min_coverage"):
            channel.min_coverage = bar


def injected(engine: MemoryEngine, query: str, project: str) -> list[Any]:
    return engine.recall(query, K, RecallFilters(project=project), relevant_only=True)


def measure(engine: MemoryEngine, data: list[Conversation]) -> dict[str, dict[str, float]]:
    """Per conversation: r5, injects, off_injects at the bar set."""
    out = {}
    for i, conv in enumerate(data):
        other = data[(i + 1) % len(data)].sample_id
        by_content: dict[str, set[str]] = {}
        for dia_id, content in conv.turns:
            by_content.setdefault(content, set()).add(dia_id)
        r5, injects, off = [], [], []
        for q in conv.questions:
            hits = injected(engine, q.text, conv.sample_id)
            found = set().union(*(by_content.get(h.memory.content, set()) for h in hits))
            r5.append(len(found & q.evidence) / len(q.evidence))
            injects.append(bool(hits))
            off.append(bool(injected(engine, q.text, other)))
        out[conv.sample_id] = {"r5": 100 * statistics.fmean(r5),
                               "injects": 100 * statistics.fmean(injects),
                               "off_injects": 100 * statistics.fmean(off), "n": len(r5)}
    return out


def measure_code(engine: MemoryEngine, data: coding.Dataset, prompts: list[str],
                 generic: list[str]) -> dict[str, float]:
    """The coding set's dev questions on topic, the off-topic and the generic prompts in
    every dev repo."""
    ids: dict[tuple[str, str], set[str]] = {}
    for m in data.memories:
        ids.setdefault((m.project, m.content), set()).add(m.id)
    r5, injects = [], []
    for q in data.questions:
        hits = injected(engine, q.text, q.project)
        got = set().union(*(ids.get((h.memory.project, h.memory.content), set())
                            for h in hits))
        r5.append(sum(1 for g in q.groups if g & got) / len(q.groups))
        injects.append(bool(hits))
    repos = sorted({q.project for q in data.questions})
    off = [bool(injected(engine, p, repo)) for p in prompts for repo in repos]
    chat = [bool(injected(engine, p, repo)) for p in generic for repo in repos]
    return {"r5": round(100 * statistics.fmean(r5), 1),
            "injects": round(100 * statistics.fmean(injects), 1),
            "off_injects": round(100 * statistics.fmean(off), 1),
            "generic_injects": round(100 * statistics.fmean(chat), 1),
            "questions": len(r5), "off_topic_pairs": len(off), "generic_pairs": len(chat)}


def pooled(per: dict[str, dict[str, float]], keep: set[str]) -> dict[str, float]:
    rows = [v for k, v in per.items() if k in keep]
    n = sum(r["n"] for r in rows)
    return {m: round(sum(r[m] * r["n"] for r in rows) / n, 1) for m in METRICS}


def score(metrics: dict[str, float]) -> float:
    return metrics["r5"] - metrics["off_injects"]


def engines(plugins: str, model: str, threads: int, tmp: str,
            locomo: list[Conversation], code: coding.Dataset) -> tuple[MemoryEngine, MemoryEngine]:
    """The LoCoMo store and the coding store, BM25 (`plugins`) plus the vector channel with
    `model` (its embeddings cached on disk by bench_vector's CachedEmbedder) when one is given."""
    from bench_vector import CachedEmbedder, _Provide, model_path

    embedder, extra = None, []
    if model:
        from semantic_memory_llama_cpp import LlamaCppEmbedder

        embedder = CachedEmbedder(LlamaCppEmbedder(model_path(model), device="cpu",
                                                   threads=threads))
        plugins, extra = f"{plugins},vector", [_Provide(embedder)]
    # dedup off: a LoCoMo turn merged into a near-identical one would lose its evidence id
    chat = MemoryEngine(Settings(db_path=f"{tmp}/locomo.db", device="cpu", plugins=plugins,
                                 dedup_sim=0.0), plugins=extra)
    for conv in locomo:
        chat.ingest([NewMemory(content, kind="note", project=conv.sample_id)
                     for _, content in conv.turns])
    repo = coding.build_engine(code, f"{tmp}/coding", plugins, embedder)
    if embedder is not None:
        embedder.save()
        if not any(c.active for c in chat.channels if isinstance(c, EmbeddingChannel)):
            raise SystemExit(f"relevance.py: the {model} vector channel is off (the log says why)")
    return chat, repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bars", default=",".join(map(str, BARS)))
    parser.add_argument("--knob", choices=("coverage", "cosine"), default="coverage",
                        help="the bar swept: BM25's coverage, or the vector injection floor")
    parser.add_argument("--plugins", default=BM25)
    parser.add_argument("--model", default="", help="minilm, gemma or a GGUF path: the hybrid")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.knob == "cosine" and not args.model:
        parser.error("--knob cosine needs --model")
    bars = [float(b) for b in args.bars.split(",")]
    data = load()
    code = coding.load("dev")
    prompts = json.loads(OFF_TOPIC_CODE.read_text(encoding="utf-8"))["prompts"]
    generic = json.loads(GENERIC_PROMPTS.read_text(encoding="utf-8"))["prompts"]
    with tempfile.TemporaryDirectory(prefix="relevance-bench-") as tmp:
        Path(tmp, "coding").mkdir()
        chat, repo = engines(args.plugins, args.model, args.threads, tmp, data, code)
        per_bar, code_bar = {}, {}
        for bar in bars:
            set_bar(chat, args.knob, bar)
            set_bar(repo, args.knob, bar)
            per_bar[bar] = measure(chat, data)
            code_bar[bar] = measure_code(repo, code, prompts, generic)
            print(f"bar {bar}: {pooled(per_bar[bar], {c.sample_id for c in data})} "
                  f"code {code_bar[bar]}", file=sys.stderr, flush=True)
    everyone = {c.sample_id for c in data}
    folds = []
    for held in sorted(everyone):
        train = everyone - {held}
        best = max(bars, key=lambda b: score(pooled(per_bar[b], train)))
        folds.append({"held_out": held, "bar": best, **pooled(per_bar[best], {held})})
    n = {c.sample_id: len(c.questions) for c in data}
    loo = {m: round(sum(f[m] * n[f["held_out"]] for f in folds) / sum(n.values()), 1)
           for m in METRICS}
    print(json.dumps({
        "k": K, "plugins": args.plugins, "model": args.model or None, "knob": args.knob,
        "bars": {str(b): {**pooled(per_bar[b], everyone), "code": code_bar[b]} for b in bars},
        "best_in_sample": max(bars, key=lambda b: score(pooled(per_bar[b], everyone))),
        "leave_one_out": {"folds": folds, "pooled": loo},
    }, indent=2))


if __name__ == "__main__":
    main()
