"""The opencode plugin trims and reads prompts as Python does, in time linear in their length.

text.ts `strip`/`rstrip` were regexes (`[…]+$`) that V8 retried at every character of a
whitespace run inside the text: 80 kB of blanks in a prompt took 17 s to strip inside
opencode, for the recall query, a "remember" prompt and `unquote`. They are index loops now,
with Python's `str.strip()` results (its `isspace()` set). Checked on the shipped bundle and on
text.ts itself, against Python on the same strings."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN_DIR = Path(__file__).resolve().parent.parent / "opencode-plugin"
BUNDLE = PLUGIN_DIR / "semantic-memory.js"

#: Python's whitespace, and characters next to it in the code table or often taken for it
#: (zero-width space, BOM, word joiner, Mongolian vowel separator: not `isspace()`).
SPACES = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
NEAR = ["\x08", "\x0e", "\x1b", "!", "\x84", "\x86", "\x9f", "\xa1", "\u167f", "\u1681",
        "\u180e", "\u1fff", "\u200b", "\u2027", "\u202a", "\u2060", "\u2fff", "\u3001",
        "\ufeff", "x", "é", "🙂"]


def node(script: str, stdin: str = "", module: Path = BUNDLE) -> object:
    """What `script` (an ES module with `module` imported as `plugin`) writes, as JSON."""
    source = f"import * as plugin from {json.dumps(module.as_uri())};\n{script}"
    done = subprocess.run(["node", "--input-type=module", "-e", source], input=stdin,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def text_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """opencode-plugin/src/text.ts as an ES module (esbuild, the plugin's own build tool)."""
    out = tmp_path_factory.mktemp("text") / "text.mjs"
    esbuild = PLUGIN_DIR / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():  # the plugin's dev dependencies, as test_opencode_plugin.py installs them
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                              cwd=PLUGIN_DIR, capture_output=True, text=True, timeout=900,
                              check=False)
        assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([str(esbuild), "src/text.ts", "--format=esm", f"--outfile={out}",
                           "--log-level=warning"], cwd=PLUGIN_DIR, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_strip_is_pythons_strip(text_module: Path) -> None:
    rng = random.Random(20261207)
    alphabet = SPACES + NEAR
    cases = [c for ch in alphabet for c in (ch, f"{ch}a{ch}", f"a{ch}b", ch * 3 + "🙂" + ch)]
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(2000)]
    cases += ["", " " * 5000 + "x" + " \u3000" * 5000, "\u200b \u200b"]
    got = node("import { readFileSync } from 'node:fs';\n"
               "const cases = JSON.parse(readFileSync(0, 'utf8'));\n"
               "process.stdout.write(JSON.stringify(cases.map((t) => "
               "[plugin.strip(t), plugin.lstrip(t), plugin.rstrip(t), plugin.words(t)])));",
               json.dumps(cases), module=text_module)
    assert isinstance(got, list)
    for text, have in zip(cases, got, strict=True):
        assert have == [text.strip(), text.lstrip(), text.rstrip(), text.split()], ascii(text)


def test_prompts_with_long_blank_runs_are_read_in_linear_time() -> None:
    """A prompt of 16,000 blanks costs about sixteen of 1,000 (the regex cost sixteen times
    that: quadratic). `unquote` and `remembered` of the shipped bundle; CPU time per call (not
    wall time: the tests share the machine), calls repeated for 5 ms at least, the least of
    five runs."""
    ratios = node("""
const prompts = {
  unquote: (n) => '"x' + " ".repeat(n) + 'y"',
  remembered: (n) => "remember the port" + " \\t".repeat(n / 2) + "is 5433",
};
const perCall = (f, text) => {
  const start = process.cpuUsage();
  for (let calls = 1; ; calls++) {
    f(text);
    const spent = process.cpuUsage(start);
    if (spent.user + spent.system >= 5000) return (spent.user + spent.system) / calls;
  }
};
const out = {};
for (const [name, prompt] of Object.entries(prompts)) {
  const f = plugin[name];
  const [small, large] = [prompt(1000), prompt(16000)];
  perCall(f, small); perCall(f, large);  // the JIT warmed up
  const [a, b] = [[], []];
  for (let run = 0; run < 5; run++) { a.push(perCall(f, small)); b.push(perCall(f, large)); }
  out[name] = Math.min(...b) / (16 * Math.min(...a));
}
process.stdout.write(JSON.stringify(out));
""")
    assert isinstance(ratios, dict)
    assert all(ratio < 4 for ratio in ratios.values()), ratios


def test_a_prompt_with_long_blank_runs_reads_as_python_reads_it() -> None:
    from semantic_memory.harness.transcript import remembered, unquote

    prompts = ['"x' + " " * 20000 + 'y"', "remember the port" + " \t" * 10000 + "is 5433",
               "\u3000'" + "remember" + "\u2003" * 9000 + "that x" + "\x85" * 9000 + "'\n"]
    got = node("import { readFileSync } from 'node:fs';\n"
               "const cases = JSON.parse(readFileSync(0, 'utf8'));\n"
               "process.stdout.write(JSON.stringify(cases.map((p) => "
               "[plugin.unquote(p), plugin.remembered(p)])));", json.dumps(prompts))
    assert got == [[unquote(p), remembered(p)] for p in prompts]


def test_asks_reads_the_first_40_characters_as_python_does() -> None:
    """Whether a "remember" prompt asks (`remember which port we chose` is no fact) looks at
    the first word of its first 40 characters: code points, as Python counts, not UTF-16
    units, which an emoji counts twice. 🙂 × 20 then `which`: Python sees `which` (asks, not
    stored), UTF-16 saw only the emoji (stored); 🙂 × 17, two blanks, `whatever`: UTF-16 saw
    `what` (asks, not stored), Python `whatever` (stored)."""
    from semantic_memory.harness.transcript import remembered

    prompts = ["remember " + "🙂" * 20 + " which port we chose",
               "remember " + "🙂" * 17 + "  whatever happens, never force-push main",
               "remember " + "🧪" * 19 + " whether the cache is warm",
               "remember " + "é" * 3 + "🙂" * 15 + " what port we chose", "remember which port"]
    expected = [remembered(p) for p in prompts]
    assert expected[0] is None and expected[1] is not None
    assert node("import { readFileSync } from 'node:fs';\n"
                "const cases = JSON.parse(readFileSync(0, 'utf8'));\n"
                "process.stdout.write(JSON.stringify(cases.map((p) => plugin.remembered(p))));",
                json.dumps(prompts)) == expected
