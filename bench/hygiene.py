"""The secret-redaction step's cost per KB and the import rate, against a baseline in the same run.

    uv run --all-packages python bench/hygiene.py                      # baseline: 5176311
    uv run --all-packages python bench/hygiene.py --baseline-rev HEAD~3 --memories 20000

Baseline: `redaction.py` of `--baseline-rev` (the hand-written rule table before the
maintained ruleset), loaded from git into this process, so both run on the same machine at the
same moment; rounds alternate between the two, and medians are quoted.

Memory sets (seeded):
- chat: LoCoMo-like memories (`scale.synthetic`, ~90 characters);
- notes: developer notes of 300-1,500 characters, sentences drawn from LoCoMo turns, the benign
  corpus (hashes, UUIDs, placeholders, commands, config lines) and code-like lines;
- notes+secrets: the same, one in ten carrying a format from tests/corpora/secrets.jsonl.

Figures: `redact` per KB (the ingest path runs it on content, project and each tag; the hook
path only when it spools), the whole `filter_ingest` per KB (redaction and the injection
filter, every field), and `MemoryEngine.ingest` in the CLI's import batches with the current
redaction and with the baseline's patched in (the rest of the hygiene step unchanged).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baseline import baseline  # noqa: E402
from scale import synthetic  # noqa: E402
from semantic_memory.cli import IMPORT_BATCH  # noqa: E402
from semantic_memory.config import Settings  # noqa: E402
from semantic_memory.default_plugins import hygiene  # noqa: E402
from semantic_memory.safety import redaction  # noqa: E402
from semantic_memory.models import NewMemory  # noqa: E402
from semantic_memory.pipeline import MemoryEngine  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CORPORA = REPO / "tests" / "corpora"
CODE_LINES = [
    "def retry(fn, attempts=3):\n    for i in range(attempts):\n        try:\n"
    "            return fn()\n        except TimeoutError:\n            time.sleep(2 ** i)",
    "SELECT id, created_at FROM orders WHERE status = 'pending' ORDER BY created_at LIMIT 50;",
    "kubectl rollout restart deployment/api -n payments && kubectl rollout status deploy/api",
    "const res = await fetch(`${base}/v2/items?page=${page}`, { headers: { Accept: 'json' } });",
    "git rebase -i HEAD~4 then force-push with --force-with-lease to keep the reviewer's commits",
    "docker compose up -d db redis; pytest -x tests/test_api.py -k 'not slow'",
]


def baseline_module(rev: str) -> ModuleType:
    """`redaction.py` as it was at `rev` (in `safety/` since issue #23), with the textnorm.py
    beside it then."""
    return baseline(rev, "redaction.py")


def notes(n: int, with_secrets: bool, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    chat = synthetic(2_000, seed=seed)
    benign = [json.loads(line)["text"] for line in
              (CORPORA / "secrets_benign.jsonl").read_text().splitlines() if line]
    secrets = [json.loads(line)["text"] for line in
               (CORPORA / "secrets.jsonl").read_text().splitlines() if line]
    out = []
    for i in range(n):
        parts: list[str] = []
        target = rng.randint(300, 1_500)
        while sum(map(len, parts)) < target:
            pick = rng.random()
            parts.append(rng.choice(benign if pick < 0.4 else CODE_LINES if pick < 0.6 else chat))
        if with_secrets and i % 10 == 0:
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(secrets))
        out.append("\n".join(parts))
    return out


def per_kb(fn: Callable[[str], object], texts: list[str]) -> float:
    """CPU ms per KB of this process (`process_time`): on a shared, loaded machine the wall
    clock also counts the time other processes held the core."""
    kb = sum(len(t.encode()) for t in texts) / 1024
    start = time.process_time()
    for text in texts:
        fn(text)
    return (time.process_time() - start) * 1000 / kb


def hygiene_step(text: str) -> None:
    memory = NewMemory(text, project="acme-api", tags=["deploy", "notes"])
    try:
        hygiene.filter_ingest(memory=memory, settings=SETTINGS)
    except Exception:  # a refusal is a result too
        pass


SETTINGS = Settings(db_path=":memory:")


def import_rate(texts: list[str], redact: Callable[[str], str] | None) -> tuple[float, float]:
    """Memories per second through `MemoryEngine.ingest` in import batches, with `redact` in
    the hygiene plugin (None: the current `redact_many`): per wall-clock second and per CPU
    second of this process (the machine is shared)."""
    saved = hygiene.redact_many
    if redact is not None:  # the baseline's rules, one call per field as it made them
        hygiene.redact_many = lambda texts: [redact(t) for t in texts]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            engine = MemoryEngine(Settings(db_path=str(Path(tmp) / "m.db"), device="cpu"))
            start, cpu = time.perf_counter(), time.process_time()
            for i in range(0, len(texts), IMPORT_BATCH):
                engine.ingest([NewMemory(t, source="import", project=f"p{j % 20}")
                               for j, t in enumerate(texts[i:i + IMPORT_BATCH])],
                              batch_is_session=False)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            engine.close()
    finally:
        hygiene.redact_many = saved
    return len(texts) / elapsed, len(texts) / cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-rev", default="5176311")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--memories", type=int, default=10_000, help="for the import rate")
    args = parser.parse_args()
    old = baseline_module(args.baseline_rev)
    redaction.redact("warm-up")  # loads the library once (0.1 s), as a service does at start
    sets = {"chat": synthetic(2_000, seed=3), "notes": notes(300, False),
            "notes+secrets": notes(300, True)}
    results: dict[str, dict[str, list[float]]] = {
        name: {"baseline_redact": [], "redact": [], "library_only": [], "hygiene_step": []}
        for name in sets}
    for _ in range(args.rounds):
        for name, texts in sets.items():
            results[name]["baseline_redact"].append(per_kb(old.redact, texts))
            results[name]["redact"].append(per_kb(redaction.redact, texts))
            results[name]["library_only"].append(per_kb(redaction._library_spans, texts))
            results[name]["hygiene_step"].append(per_kb(hygiene_step, texts))
    import_texts = synthetic(args.memories, seed=5)
    rates: dict[str, list[tuple[float, float]]] = {"baseline": [], "current": []}
    for _ in range(2):  # alternate, twice each
        rates["baseline"].append(import_rate(import_texts, old.redact))
        rates["current"].append(import_rate(import_texts, None))
    report = {
        "baseline_rev": args.baseline_rev,
        "ruleset": redaction.ruleset_info(),
        "ms_per_kb_median": {
            name: {k: round(statistics.median(v), 3) for k, v in r.items()}
            for name, r in results.items()},
        "avg_chars": {name: round(sum(map(len, t)) / len(t)) for name, t in sets.items()},
        "import_per_s": {k: [round(wall) for wall, _ in v] for k, v in rates.items()},
        "import_per_cpu_s": {k: [round(cpu) for _, cpu in v] for k, v in rates.items()},
    }
    step = max(report["ms_per_kb_median"][n]["hygiene_step"] for n in ("notes", "notes+secrets"))
    report["targets"] = {
        "hygiene_step_le_1ms_per_kb_on_notes": step <= 1.0,
        "import_ge_5000_per_s": min(wall for wall, _ in rates["current"]) >= 5_000,
        "import_ge_5000_per_cpu_s": min(cpu for _, cpu in rates["current"]) >= 5_000,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
