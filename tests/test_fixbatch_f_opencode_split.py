"""The opencode plugin cuts a long message in time linear in its length: `splitText` sliced and
counted the whole rest of the text once per piece (code-point helpers), so a flush of one
pasted log of 4.5 MB ran 35 s synchronously inside opencode's process, where no timer stops it.
Its pieces stay those of the Python adapters' `split_text` (the service dedups by exact
content), on long texts, astral characters, long whitespace runs and tiny limits too."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

from semantic_memory.harness.transcript import Turn, flush_items, split_text

BUNDLE = Path(__file__).resolve().parent.parent / "opencode-plugin" / "semantic-memory.js"
LOG_LINE = ("2025-03-10 ERROR worker-7 ConnectionResetError: peer reset while reading response "
            "body from upstream payments-api\n")


def node(script: str, stdin: str = "") -> object:
    """What `script` (an ES module with the bundle imported as `plugin`) writes, as JSON."""
    source = f"import * as plugin from {json.dumps(BUNDLE.as_uri())};\n{script}"
    done = subprocess.run(["node", "--input-type=module", "-e", source], input=stdin,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def long_text(rng: random.Random) -> str:
    """Tens of kilobytes of what the cut looks at: boundaries at every level, astral and CJK
    characters, long runs of whitespace and long words."""
    parts = [LOG_LINE, "\n\n", "\n", ". ", " ", "\t", "\u3000", "\u3002", "\uff01", "\uff1f",
             "🙂", "🧪🔥 ", "部署流程", "é", "word ", "\u00a0", "\x85"]
    out = []
    for _ in range(rng.randint(200, 2000)):
        pick = rng.random()
        if pick < 0.05:
            out.append(rng.choice([" ", "\n", "🙂", "x"]) * rng.randint(50, 3000))
        else:
            out.append(rng.choice(parts) * rng.randint(1, 4))
    return "".join(out)


def test_split_text_is_the_python_cut_on_long_texts_and_small_limits() -> None:
    rng = random.Random(20260311)
    cases = [(long_text(rng), rng.choice([1, 2, 3, 4, 7, 40, 160, 1037, 1100, 1200]))
             for _ in range(40)]
    cases += [("🙂" * 5000, 3), (" " * 9000 + "a" + " " * 9000 + "b", 2),
              ("a" + "\n" * 20000 + "b " * 3000, 100), ("x" * 50000, 1199)]
    got = node("import { readFileSync } from 'node:fs';\n"
               "const cases = JSON.parse(readFileSync(0, 'utf8'));\n"
               "process.stdout.write(JSON.stringify(cases.map(([t, n]) => plugin.splitText(t, n))));",
               json.dumps(cases))
    assert isinstance(got, list)
    for (text, limit), have in zip(cases, got, strict=True):
        assert have == split_text(text, limit), (limit, text[:200])


def test_a_flush_of_a_pasted_log_stores_the_python_memories() -> None:
    """A megabyte-long prompt, and one with 100 kB of blanks in it (text.ts `strip`, a regex,
    took 17 s on 80 kB of them): the plugin's /ingest items are the Python flush's."""
    for prompt in ["log:\n" + LOG_LINE * 10_000, "see\n" + " " * 100_000 + "\nthe 🙂 end " * 3000]:
        turns = [Turn("user", prompt), Turn("assistant", "The upstream resets idle sockets.")]
        items = node("import { readFileSync } from 'node:fs';\n"
                     "const turns = JSON.parse(readFileSync(0, 'utf8'));\n"
                     "process.stdout.write(JSON.stringify(plugin.flushItems(turns)));",
                     json.dumps([{"role": t.role, "text": t.text} for t in turns]))
        assert items == [[item, count] for item, count in flush_items(turns)[0]]
        # Many pieces, of the head and tail each message keeps (MESSAGE_CHARS).
        assert isinstance(items, list) and len(items) == 1 and items[0][1] > 10


def test_cutting_grows_linearly_with_the_text() -> None:
    """Eight times the text costs about eight times the work, not sixty-four (the quadratic
    cut measured 60). Pieces of 200 characters make many cuts of a small text; CPU time (not
    wall time: the tests share the machine), the least of five runs of each size."""
    ratio = node(f"""
const line = {json.dumps(LOG_LINE)};
const turnsOf = (n) => [{{ role: "user", text: "log:\\n" + line.repeat(n) }}, {{ role: "assistant", text: "ok" }}];
const cpu = (turns) => {{
  const start = process.cpuUsage();
  plugin.flushItems(turns, Infinity, 200);
  const spent = process.cpuUsage(start);
  return spent.user + spent.system;
}};
const [small, large] = [turnsOf(250), turnsOf(2000)];
cpu(large); cpu(small);  // the JIT warmed up
const [a, b] = [[], []];
for (let run = 0; run < 5; run++) {{ a.push(cpu(small)); b.push(cpu(large)); }}
process.stdout.write(JSON.stringify(Math.min(...b) / Math.max(Math.min(...a), 1)));
""")
    assert isinstance(ratio, float | int)
    assert ratio < 24, ratio
