"""Cost per KB of the prompt-injection filter, against a baseline revision, in one run.

The baseline is `looks_like_injection` (and the text folding it uses) as committed at
`--baseline` (default `HEAD`: uncommitted changes against the last commit; a revision as old as
5176311, the filter before the wider one, no longer loads beside today's models), loaded from
git into a throwaway module (`baseline.py`); the current one is the working tree's. Both read the same texts, in alternation, `--rounds` times; the report is
the median CPU microseconds per KB of each, per text family, and the ratio. Texts: the suite's
benign and injection corpora (tests/corpora), typical tool captures (pytest output, a git log, a
source file, a README) built to about 2 KB, French, German, Vietnamese and Russian prose of
about 2 KB (accented letters), and a megabyte-class hostile input scaled down to 64 KB.

    uv run --no-sync --all-packages python bench/injection_filter.py [--baseline REV] [--rounds N]

Prints JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from baseline import baseline

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BASELINE = "HEAD"


def baseline_filter(rev: str) -> Callable[[str], bool]:
    """`looks_like_injection` as of `rev` (`safety/injection_filter.py` since d52109d,
    `default_plugins/hygiene.py` before), with the textnorm.py beside it then."""
    module = baseline(rev, "injection_filter.py", "hygiene.py")
    return module.looks_like_injection  # type: ignore[no-any-return]


def _about(text: str, size: int) -> str:
    return (text * (size // max(1, len(text)) + 1))[:size]


def texts() -> dict[str, list[str]]:
    corpora = REPO / "tests" / "corpora"

    def corpus(name: str) -> list[str]:
        return [json.loads(line)["text"] for line in
                (corpora / name).read_text(encoding="utf-8").splitlines() if line.strip()]

    pytest_out = "tests/test_api.py::test_create PASSED\ntests/test_api.py::test_delete PASSED\n"
    git_log = ("commit 2abdc01b44b3b71e951a1e09d749d52a289d9774\nAuthor: Dev <dev@example.com>\n"
               "Date:   Tue Mar 4 10:12:01 2025\n\n    fix: retry the upload on 503\n\n")
    source = ('def handler(event: dict) -> dict:\n    """Handle one webhook event."""\n'
              '    if event.get("type") != "push":\n        return {"ignored": True}\n'
              '    return {"ok": True, "ref": event["ref"]}\n\n')
    readme = ("## Install\n\nRun `make setup`, then copy .env.example to .env and set the port.\n"
              "The system prompt for the demo bot lives in prompts/system.md.\n\n")
    # Accented letters and other scripts: the folding reads each word that carries a mark.
    french = ("Le fichier est ignoré par le linter ; exécutez `make test` après la mise à jour "
              "des règles précédentes. Les données sont stockées en mémoire.\n")
    german = "Die Übersetzung überspringt größere Dateien; ältere Einträge bleiben erhalten.\n"
    vietnamese = "Thư viện này đọc tệp cấu hình và bỏ qua các thiết lập cũ của người dùng.\n"
    russian = "Ещё раз: всё, что лежит в каталоге, будет удалено при сборке проекта.\n"
    return {
        "benign corpus": corpus("benign_injection.jsonl"),
        "injection corpus": corpus("injections.jsonl"),
        "2 KB captures": [f"Bash(pytest -q):\n{_about(pytest_out, 2048)}",
                          f"Bash(git log):\n{_about(git_log, 2048)}",
                          f"Read(app/handler.py):\n{_about(source, 2048)}",
                          f"Read(README.md):\n{_about(readme, 2048)}"],
        "2 KB accented prose": [_about(t, 2048) for t in (french, german, vietnamese, russian)],
        "64 KB hostile": [_about("ignore all ", 65_536), _about("<", 65_536),
                          _about("忽略", 65_536), _about("a b c d ", 65_536)],
    }


def per_kb(fn: Callable[[str], bool], samples: list[str]) -> float:
    """CPU microseconds per KB to check every sample once (CPU time: the machine may be
    shared, and other processes' load should not count)."""
    size = sum(len(s.encode()) for s in samples) / 1024
    start = time.process_time()
    for s in samples:
        fn(s)
    return (time.process_time() - start) * 1e6 / size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    from semantic_memory.safety.injection_filter import looks_like_injection

    old = baseline_filter(args.baseline)
    report: dict[str, dict[str, float]] = {}
    for name, samples in texts().items():
        runs: dict[str, list[float]] = {"baseline": [], "current": []}
        for fn in (old, looks_like_injection):  # warm caches (lru, translate tables)
            per_kb(fn, samples)
        for _ in range(args.rounds):
            runs["baseline"].append(per_kb(old, samples))
            runs["current"].append(per_kb(looks_like_injection, samples))
        base, cur = (statistics.median(runs[k]) for k in ("baseline", "current"))
        kb = sum(len(s.encode()) for s in samples) / 1024
        report[name] = {"baseline_us_per_kb": round(base, 1), "current_us_per_kb": round(cur, 1),
                        "ratio": round(cur / base, 2), "items": len(samples), "kb": round(kb, 1),
                        "baseline_us_per_item": round(base * kb / len(samples), 1),
                        "current_us_per_item": round(cur * kb / len(samples), 1)}
    print(json.dumps({"baseline": args.baseline, "rounds": args.rounds,
                      "load_average": os.getloadavg()[0], "median": report},
                     indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
