/**
 * Control what is remembered: `<private>…</private>` never leaves the plugin (what it stores,
 * spools or logs), and a repository's `.semantic-memory.toml` turns capture or recall off and
 * names the project, against a real service. (Parity of both rules with the Python ones is
 * checked from pytest, tests/test_opencode_plugin.py.)
 */

import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";

import { MemoryPlugin } from "../src/memory.js";
import type { MessagePart, SessionMessage } from "../src/messages.js";
import { stripPrivate } from "../src/private.js";
import { loadRepoConfig, parseRepoConfig } from "../src/repoconfig.js";
import { prompt, call, closedPort, hookLog, pluginFor, removeDir, settingsFor, store, suiteService, tempDir } from "./support.js";

const SECRET = "hunter2-swordfish";
const AGENT_SYSTEM = "You are opencode.\n<env>\n  Working directory: /src/web\n</env>";
let counter = 0;

function part(sessionID: string, text: string): MessagePart {
  return { id: `prt_${++counter}`, sessionID, messageID: `msg_${counter}`, type: "text", text } as MessagePart;
}

function message(sessionID: string, role: "user" | "assistant", text: string): SessionMessage {
  return { info: { id: `msg_${++counter}`, sessionID, role }, parts: [part(sessionID, text)] } as unknown as SessionMessage;
}

/** A repository (read from `.git` as the plugin reads it) with the file at its top; a sub-folder. */
function repository(root: string, config: string | null): string {
  mkdirSync(join(root, ".git"), { recursive: true });
  writeFileSync(join(root, ".git", "config"), '[remote "origin"]\n\turl = git@github.com:acme/web.git\n');
  if (config !== null) writeFileSync(join(root, ".semantic-memory.toml"), config);
  mkdirSync(join(root, "src"));
  return join(root, "src");
}

describe("private text", () => {
  test("the rule", () => {
    const cases: [string, string][] = [
      [`port 6543 <private>${SECRET}</private> ok`, "port 6543  ok"],
      [`a < PRIVATE >${SECRET}</ private\n> b`, "a  b"],
      [`a <private>x <private>${SECRET}</private> y</private> b`, "a  b"],
      [`a <private>${SECRET} to the end`, "a "],
      ["a </private> b <private/> c", "a  b  c"],
      ["<privateer> stays", "<privateer> stays"],
      // what the tag reads as: invisible characters and other forms inside it do not hide it
      [`a <pri\u200bvate>${SECRET}</pri\u200bvate> b`, "a  b"],
      [`a <pri\u00advate>${SECRET}</private\u2060> b`, "a  b"],
      [`a <\u3000private>${SECRET}</private\u3000> b`, "a  b"],
      [`a \uff1c\uff50rivate\uff1e${SECRET}\uff1c/private\uff1e b`, "a  b"],
      [`a <\u0440rivate>${SECRET}</private> b`, "a  b"], // Cyrillic р
      [`a <pr\u0130vate>${SECRET}</PR\u0131VATE> b`, "a  b"], // İ and dotless ı, as Python reads them
      // ... and are cut from the text as written, whose other invisible characters stay
      [`\ufeff👩\u200d💻 <private>${SECRET}\u200b</private>\u200f ok`, "\ufeff👩\u200d💻 \u200f ok"],
      ["<pri\u200bvateer> is another tag", "<pri\u200bvateer> is another tag"],
      ["\u0440\u0433\u0456\u03bd\u0430\u0442\u0435 <\u0440\u0433\u0456\u03bd\u0430\u0442\u0435> is a word of its own script",
        "\u0440\u0433\u0456\u03bd\u0430\u0442\u0435 <\u0440\u0433\u0456\u03bd\u0430\u0442\u0435> is a word of its own script"],
    ];
    for (const [text, kept] of cases) assert.equal(stripPrivate(text), kept);
  });

  test("nothing private is spooled or logged while the service is down", async () => {
    const dir = tempDir();
    try {
      const url = `http://127.0.0.1:${await closedPort()}`;
      const settings = settingsFor({ MEMORY_PLUGIN_URL: url, MEMORY_DB_PATH: join(dir, "m.db"), MEMORY_PLUGIN_TOOL_CAPTURE: "bash" });
      const memory = new MemoryPlugin(settings, dir, [], () => undefined);
      await prompt(memory, "ses_p", [part("ses_p", `remember that the vault is sealed <private>${SECRET}</private>`)]);
      await prompt(memory, "ses_p", [part("ses_p", `remember that the vault has two keys <pri\u200bvate>${SECRET}</pri\u200bvate>`)]);
      memory.toolExecuted("bash", "ses_p", { command: "cat .env" }, `DB=staging <private>${SECRET}`);
      memory.toolExecuted("bash", "ses_p", { command: "cat .env.local" }, `DB=local \uff1c\uff50rivate\uff1e${SECRET}`);
      memory.compacting("ses_p");
      await memory.messagesTransform([message("ses_p", "user", `log in how? <private>${SECRET}</private>`),
        message("ses_p", "assistant", "Use the staging account.")]);
      await memory.dispose();
      const spooled = readdirSync(join(dir, "spool")).filter((f) => f.endsWith(".json"))
        .map((f) => readFileSync(join(dir, "spool", f), "utf8")).join("");
      assert.match(spooled, /the vault is sealed/);
      assert.match(spooled, /DB=staging/);
      assert.match(spooled, /the vault has two keys/);
      assert.match(spooled, /DB=local/);
      assert.match(spooled, /Use the staging account/);
      assert.ok(!spooled.includes(SECRET) && !spooled.includes("private>"), spooled);
      assert.ok(!readFileSync(join(dir, "hooks.jsonl"), "utf8").includes(SECRET));
    } finally {
      removeDir(dir);
    }
  });
});

describe(".semantic-memory.toml", () => {
  const service = suiteService();

  function plugin(cwd: string, env: Record<string, string> = {}): MemoryPlugin {
    return pluginFor(service.url, service.dir, {}, { MEMORY_PLUGIN_TOOL_CAPTURE: "bash", ...env }, cwd);
  }

  test("the three keys, and a malformed file stops capture", () => {
    assert.deepEqual(parseRepoConfig('[capture]\nenabled = false # off\n[project]\nname = "a/b"\n'),
      { path: null, capture: false, recall: true, project: "a/b", error: null });
    assert.deepEqual(parseRepoConfig("recall.enabled = false\n"),
      { path: null, capture: true, recall: false, project: null, error: null });
    // Any other table or key is most likely a typo in an opt-out: an error, so capture stops.
    assert.throws(() => parseRepoConfig("recall.enabled = false\n[other]\nx = [1,\n 2]\n"), /unknown table \[other\]/);
    assert.throws(() => parseRepoConfig("[capure]\nenabled = false\n"), /unknown table \[capure\]/);
    assert.throws(() => parseRepoConfig("[capture]\nenable = false\n"), /unknown key capture.enable/);
    assert.throws(() => parseRepoConfig('[capture]\nenabled = "no"\n'), /capture.enabled must be a boolean/);
    // A name the service would refuse: every write would end in spool/rejected/ (as in Python).
    assert.throws(() => parseRepoConfig('[project]\nname = "a\\nb"\n'), /project.name must be one line/);
    assert.throws(() => parseRepoConfig('[project]\nname = "<private>x</private>"\n'), /must not hold <private> text/);
    assert.throws(() => parseRepoConfig(`[project]\nname = "${"\u{1F680}".repeat(257)}"\n`), /project.name must be 1..256/);
    assert.equal(parseRepoConfig(`[project]\nname = "${"\u{1F680}".repeat(256)}"\n`).project, "\u{1F680}".repeat(256));
    assert.equal(parseRepoConfig('[project]\nname = "  "\n').project, null);
    const root = tempDir();
    try {
      const cwd = repository(root, "[capture\nenabled = false\n");
      const config = loadRepoConfig(cwd);
      assert.equal(config.path, join(root, ".semantic-memory.toml"));
      assert.deepEqual([config.capture, config.recall, config.error !== null], [false, true, true]);
      assert.equal(loadRepoConfig(repository(tempDir(), null)).path, null);
    } finally {
      removeDir(root);
    }
  });

  test("capture off: nothing stored from the repository; each write skipped, naming the file", async () => {
    const root = tempDir();
    try {
      const memory = plugin(repository(root, "[capture]\nenabled = false\n"));
      await prompt(memory, "ses_off", [part("ses_off", "remember that the opted-out cache is in /var/optout")]);
      memory.toolExecuted("bash", "ses_off", { command: "ls" }, "optout listing");
      memory.compacting("ses_off");
      await memory.messagesTransform([message("ses_off", "user", "what about optout?"), message("ses_off", "assistant", "optout it is.")]);
      await memory.dispose();
      const stored = (await call(service.url, "GET", "/api/memories?limit=200")).items.filter((m: { content: string }) => m.content.includes("optout"));
      assert.deepEqual(stored, []);
      const log = hookLog(service.dir).filter((e) => e["session"]?.startsWith("ses_off"));
      assert.deepEqual(log.map((e) => e["outcome"]), ["skipped", "skipped", "skipped"]);
      for (const entry of log) assert.match(entry["detail"], /\.semantic-memory\.toml: \[capture\] enabled = false$/);
    } finally {
      removeDir(root);
    }
  });

  test("recall off: nothing injected; the file names the project, MEMORY_PROJECT wins", async () => {
    const root = tempDir();
    try {
      const cwd = repository(root, '[recall]\nenabled = false\n[project]\nname = "acme/pinned"\n');
      // The user allowed this file's name (`memory-mcp allow`): it is not the detected one.
      writeFileSync(join(service.dir, "repo-approvals.json"), JSON.stringify({ allowed: { [join(root, ".semantic-memory.toml")]: "acme/pinned" } }));
      await store(service.url, "The pinned service deploys from the release branch", "acme/pinned");
      const memory = plugin(cwd);
      assert.equal(memory.project, "acme/pinned");
      await memory.chatMessage("ses_nr", [part("ses_nr", "which branch does the pinned service deploy from?")]);
      const system = [AGENT_SYSTEM];
      await memory.systemTransform("ses_nr", system);
      assert.deepEqual(system, [AGENT_SYSTEM]);
      const [last] = hookLog(service.dir).filter((e) => e["session"]?.startsWith("ses_nr"));
      assert.equal(last?.["outcome"], "skipped");
      assert.match(last?.["detail"], /\[recall\] enabled = false/);
      writeFileSync(join(root, ".semantic-memory.toml"), '[project]\nname = "acme/pinned"\n');
      const again = plugin(cwd);
      await again.chatMessage("ses_r", [part("ses_r", "which branch does the pinned service deploy from?")]);
      const recalled = [AGENT_SYSTEM];
      await again.systemTransform("ses_r", recalled);
      assert.match(recalled[1] ?? "", /release branch/);
      assert.equal(plugin(cwd, { MEMORY_PROJECT: "elsewhere" }).project, "elsewhere");
    } finally {
      removeDir(root);
    }
  });
});
