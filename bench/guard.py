"""The fusion guard: does a fused default fall below its strongest single channel anywhere?

Units: each LoCoMo dev conversation (5) and the coding benchmark's dev half, filtered to the
project and unfiltered. For each unit and each k of 1/5/10/25/50 the fused engine's recall is
set against the best of the engine restricted to one channel (porter, trigram, and the vector
channel when a model is given), each with the engine's other defaults (neighbours included).
The margin is fused - best channel; the guard holds when no margin is negative. A cell below is
also tested question by question: the questions the fused engine found more of than that channel
and fewer of, and a two-sided sign test on the split (p < 0.05 counts as significantly below).

    uv run --all-packages python bench/guard.py                          # BM25-only defaults
    uv run --all-packages python bench/guard.py --model minilm           # MiniLM hybrid
    uv run --all-packages python bench/guard.py --model minilm --variant 'share=0.5:{"fusion_vector_share": 0.5}'
    uv run --all-packages python bench/guard.py --model minilm --loo 'share=0.2,0.35,0.5'

A variant is NAME:JSON of Settings values swapped into the fused engine in place (a key
`weights` / `score_weights` sets channel weights, e.g. {"score_weights": {"trigram": 0.5}});
settings the channels copy when they are built (the cosine floor, the coverage bar) are refused.
`--loo SETTING=V1,V2,…` (or `weights.CHANNEL=…`, `score_weights.CHANNEL=…`) tunes one knob by
leave-one-conversation-out: on four LoCoMo conversations and the coding dev half the value with
the best worst margin (the guard), then the best mean recall over every k, is chosen and scored
on the fifth.
Results are cached per (model, unit set, variant) in --cache so reruns only add what is new; a
cached result is dropped as soon as the recall code, the benchmark code or the data it was made
with changes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
import tempfile
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench import coding, locomo  # noqa: E402
from bench.bench_vector import CachedEmbedder, model_path  # noqa: E402
from bench.bench_vector import build_engine as locomo_engine  # noqa: E402
from semantic_memory.config import Settings  # noqa: E402
from semantic_memory.models import RecallFilters  # noqa: E402
from semantic_memory.pipeline import MemoryEngine  # noqa: E402

KS = locomo.KS
#: Per unit, each question's recall@k (0..1).
Rows = dict[str, list[dict[int, float]]]
CODING_UNITS = ("coding-dev/project", "coding-dev/none")
SETTINGS = {f.name for f in fields(Settings)}
#: Settings the channels copy when they are built (the cosine floor, the coverage bar, ...):
#: a variant swaps the engine's settings in place, so these would silently measure the defaults.
BUILT_IN = {"recall_min_cosine", "inject_min_cosine", "dedup_sim", "inject_min_coverage",
            "query_feedback"}


def code_fingerprint() -> str:
    """A hash of the recall code, the benchmark code and the data: a cache key no edit outlives."""
    digest = hashlib.sha256()
    code = [p for folder in ("core", "plugins/retrievers", "plugins/embedders", "bench")
            for p in (ROOT / folder).rglob("*.py")]
    for path in sorted(code) + sorted((ROOT / "bench" / "data" / "coding").iterdir()):
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    digest.update(locomo.DEFAULT_DATA.read_bytes())
    return digest.hexdigest()[:16]


def embedder(model: str | None, threads: int) -> Any:
    if not model:
        return None
    from semantic_memory_llama_cpp import LlamaCppEmbedder

    return CachedEmbedder(LlamaCppEmbedder(model_path(model), device="cpu", threads=threads))


class Bench:
    """The LoCoMo and coding-dev engines of one model, built once; variants swap settings."""

    def __init__(self, model: str | None, threads: int, coding_too: bool, tmp: str) -> None:
        self.emb = embedder(model, threads)
        self.locomo_data = locomo.load()
        self.locomo = locomo_engine(self.locomo_data, self.emb, f"{tmp}/locomo")
        self.coding_data = coding.load("dev") if coding_too else None
        self.coding: MemoryEngine | None = None
        if self.coding_data is not None:
            plugins = coding.BM25 + (",vector" if self.emb is not None else "")
            Path(f"{tmp}/coding").mkdir()
            self.coding = coding.build_engine(self.coding_data, f"{tmp}/coding", plugins,
                                              self.emb)
        if self.emb is not None:
            self.emb.save()

    def channels(self) -> list[str]:
        return [c.name for c in self.locomo.channels]

    def run(self, variant: dict[str, Any]) -> Rows:
        """Each question's recall@k per unit for one variant (`only`: the channels kept)."""
        out: Rows = {}
        for engine, unit_fn in ((self.locomo, self._locomo), (self.coding, self._coding)):
            if engine is None:
                continue
            saved = (engine.settings, engine.channels, dict(engine.weights),
                     dict(engine.score_weights))
            try:
                settings = {k: v for k, v in variant.items() if k in SETTINGS}
                engine.settings = replace(engine.settings, **settings)
                if "only" in variant:
                    engine.channels = [c for c in engine.channels if c.name in variant["only"]]
                engine.weights.update(variant.get("weights", {}))
                engine.score_weights.update(variant.get("score_weights", {}))
                out.update(unit_fn(engine))
            finally:
                engine.settings, engine.channels, engine.weights, engine.score_weights = saved
            if self.emb is not None:
                self.emb.save()
        return out

    def _locomo(self, engine: MemoryEngine) -> Rows:
        def recall(project: str, query: str, k: int) -> list[str]:
            hits = engine.recall(query, k=k, filters=RecallFilters(project=project))
            return [h.memory.content for h in hits]

        return locomo.question_recalls(recall, self.locomo_data)[0]

    def _coding(self, engine: MemoryEngine) -> Rows:
        assert self.coding_data is not None
        fn = coding.engine_recall(engine)
        out = {}
        for unit, filtered in zip(CODING_UNITS, (True, False), strict=True):
            rows, _ = coding.question_rows(fn, self.coding_data, filtered)
            out[unit] = [{k: row[k] for k in KS} for _, row in rows]
        return out


def means(rows: Rows) -> dict[str, dict[int, float]]:
    """Recall@k in % per unit, as bench/locomo.py and bench/coding.py round it."""
    return {u: {k: round(100 * sum(r[k] for r in qs) / len(qs), 1) for k in KS}
            for u, qs in rows.items()}


def sign_test(won: int, lost: int) -> float:
    """Two-sided exact sign test: how likely a split at least this uneven is by chance alone."""
    n = won + lost
    tail = sum(math.comb(n, i) for i in range(min(won, lost) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def summary(result: dict[str, dict[int, float]], sizes: dict[str, int]) -> dict[str, Any]:
    """LoCoMo pooled over questions, and the worst conversation per k."""
    conv = [u for u in result if not u.startswith("coding")]
    total = sum(sizes[u] for u in conv)
    return {
        "locomo": {k: round(sum(result[u][k] * sizes[u] for u in conv) / total, 1) for k in KS},
        "locomo_worst": {k: min(result[u][k] for u in conv) for k in KS},
        **{u: result[u] for u in CODING_UNITS if u in result},
    }


def guard(fused: dict[str, dict[int, float]], alone: dict[str, dict[str, dict[int, float]]],
          questions: tuple[Rows, dict[str, Rows]] | None = None) -> dict[str, Any]:
    """Per unit and k: fused - best channel alone; the worst margin and where it is. Given the
    per-question rows (fused, each channel's), every cell below is sign-tested as well."""
    margins: dict[str, dict[int, float]] = {}
    below: list[dict[str, Any]] = []
    worst = (float("inf"), "", 0, "")
    for unit, row in fused.items():
        margins[unit] = {}
        for k in KS:
            best_name = max(alone, key=lambda c: alone[c][unit][k])
            margin = round(row[k] - alone[best_name][unit][k], 1)
            margins[unit][k] = margin
            if margin < worst[0]:
                worst = (margin, unit, k, best_name)
            if margin < 0:
                cell = {"cell": f"{unit} R@{k} vs {best_name}", "margin": margin}
                if questions is not None:
                    pairs = list(zip(questions[0][unit], questions[1][best_name][unit],
                                     strict=True))
                    won = sum(1 for f, a in pairs if f[k] > a[k])
                    lost = sum(1 for f, a in pairs if f[k] < a[k])
                    cell |= {"won": won, "lost": lost, "p": round(sign_test(won, lost), 3)}
                below.append(cell)
    verdict = {"worst_margin": worst[0], "worst_at": f"{worst[1]} R@{worst[2]} vs {worst[3]}",
               "cells_below": len(below), "cells": sum(len(u) for u in margins.values())}
    if questions is not None:
        verdict["cells_significantly_below"] = sum(1 for c in below if c["p"] < 0.05)
    return {**verdict, "below": below, "margins": margins}


def leave_one_out(runs: dict[str, dict[str, dict[int, float]]],
                  alone: dict[str, dict[str, dict[int, float]]], sizes: dict[str, int]
                  ) -> dict[str, Any]:
    """For each LoCoMo conversation: on the other four and the coding dev units, the variant
    whose worst margin over its best channel is highest (the guard), then the best mean recall
    over every k; scored on the held-out conversation, pooled over questions."""
    conv = [u for u in sizes if not u.startswith("coding")]
    folds, pooled = {}, {k: 0.0 for k in KS}
    total = sum(sizes[u] for u in conv)
    for held in conv:
        train = [u for u in next(iter(runs.values())) if u != held]

        def objective(name: str) -> tuple[float, float]:
            run = runs[name]
            worst = min(run[u][k] - max(a[u][k] for a in alone.values())
                        for u in train for k in KS)
            return round(worst, 1), statistics.fmean(run[u][k] for u in train for k in KS)

        best = max(runs, key=objective)
        folds[held] = {"chosen": best, **{f"R@{k}": runs[best][held][k] for k in KS}}
        for k in KS:
            pooled[k] += runs[best][held][k] * sizes[held] / total
    return {"folds": folds, "held_out": {k: round(v, 1) for k, v in pooled.items()}}


def _swappable(variant: dict[str, Any]) -> None:
    """Refuse a setting the channels only read when they are built."""
    fixed = sorted(BUILT_IN & set(variant))
    if fixed:
        raise ValueError(f"{', '.join(fixed)}: read when the channels are built, so a variant "
                         "cannot change it")


def _variants(specs: list[str], loo: str | None
              ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The fused variants (NAME:JSON, and one per value of the --loo knob) and the knob's."""
    variants: dict[str, dict[str, Any]] = {"default": {}}
    for item in specs:
        name, _, spec = item.partition(":")
        try:
            variants[name] = json.loads(spec)
        except json.JSONDecodeError:
            raise ValueError(f"--variant {item!r}: expected NAME:JSON") from None
        if not isinstance(variants[name], dict):
            raise ValueError(f"--variant {name}: the JSON must be an object")
        _swappable(variants[name])
    knob_runs: list[str] = []
    if loo:
        knob, _, values = loo.partition("=")
        for value in values.split(","):
            name = f"{knob}={value}"
            if "." in knob:
                table, channel = knob.split(".", 1)
                if table not in ("weights", "score_weights"):
                    raise ValueError(f"--loo {knob}: use weights.CHANNEL or score_weights.CHANNEL")
                variants[name] = {table: {channel: float(value)}}
            else:
                if knob not in SETTINGS:
                    raise ValueError(f"--loo: no setting named {knob!r}")
                _swappable({knob: value})
                kind = type(getattr(Settings(), knob))
                variants[name] = {knob: (int(value) != 0 if kind is bool else kind(value))}
            knob_runs.append(name)
    return variants, knob_runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="minilm, gemma or a GGUF path")
    parser.add_argument("--threads", type=int, default=2, help="embedder threads")
    parser.add_argument("--no-coding", action="store_true", help="LoCoMo conversations only")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:JSON",
                        help='a fused variant, e.g. rrf:{"fusion": "rrf"}')
    parser.add_argument("--loo", default=None, metavar="KNOB=V1,V2,…",
                        help="tune one knob by leave-one-conversation-out")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "guard-cache.json"),
                        help="results per variant, reused by later runs")
    args = parser.parse_args(argv)
    try:
        variants, knob_runs = _variants(args.variant, args.loo)
    except (ValueError, AttributeError) as exc:
        print(f"guard.py: {exc}", file=sys.stderr)
        return 2
    cache_path = Path(args.cache)
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    code = code_fingerprint()
    cache = {tag: runs for tag, runs in cache.items() if tag.startswith(code)}
    tag = f"{code}|{args.model or 'bm25'}|{'locomo' if args.no_coding else 'locomo+coding'}"
    store = cache.setdefault(tag, {})
    with tempfile.TemporaryDirectory(prefix="guard-") as tmp:
        bench: Bench | None = None

        def get(name: str, variant: dict[str, Any]) -> Rows:
            nonlocal bench
            key = json.dumps(variant, sort_keys=True)
            if key not in store:
                if bench is None:
                    bench = Bench(args.model, args.threads, not args.no_coding, tmp)
                print(f"running {name}", file=sys.stderr, flush=True)
                store[key] = bench.run(variant)
                cache_path.write_text(json.dumps(cache))
            return {u: [{int(k): v for k, v in row.items()} for row in rows]
                    for u, rows in store[key].items()}

        names = ["porter", "trigram"] + (["vector"] if args.model else [])
        alone_rows = {c: get(f"{c} alone", {"only": [c]}) for c in names}
        fused_rows = {name: get(name, v) for name, v in variants.items()}
    alone = {c: means(r) for c, r in alone_rows.items()}
    fused = {name: means(r) for name, r in fused_rows.items()}
    sizes = {c.sample_id: len(c.questions) for c in locomo.load()}
    report: dict[str, Any] = {
        "model": args.model or "none (BM25-only)",
        "units": list(next(iter(fused.values()))),
        "alone": {c: summary(r, sizes) for c, r in alone.items()},
        "fused": {n: {**summary(r, sizes), "guard": guard(r, alone, (fused_rows[n], alone_rows))}
                  for n, r in fused.items()},
    }
    if knob_runs:
        report["leave_one_out"] = leave_one_out({n: fused[n] for n in knob_runs}, alone,
                                                 sizes)
    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
