/**
 * The plugin's parts on their own: settings precedence, the client's failure modes against
 * servers that refuse, hang or error, the hook log, chunking, capture records and remote
 * names. (Parity of chunking and project names with the Python adapters is checked from
 * pytest, tests/test_opencode_plugin.py, which has both sides at hand.)
 */

import assert from "node:assert/strict";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { PROBE_MS, ServiceClient, ServiceUnavailable, answers, now, resolveUrl, storeIdentity, storeTag } from "../src/client.js";
import { MAX_LOG_BYTES, record } from "../src/outcomes.js";
import { normaliseRemote } from "../src/project.js";
import { CAPTURE_CHARS, captureRecord, describeInput } from "../src/records.js";
import { discoveryPath, hookLogPath, loadSettings } from "../src/settings.js";
import { chunkTurns, clean, remembered, splitText, unquote } from "../src/transcript.js";
import { closedPort, fakeService, hangingServer, removeDir, tempDir } from "./support.js";

describe("settings", () => {
  test("the environment wins over the plugin's options, which win over the defaults", () => {
    const { settings, problems } = loadSettings(
      { MEMORY_PLUGIN_LIMIT: "7", MEMORY_PLUGIN_TOOL_CAPTURE: "Bash, Read", MEMORY_DB_PATH: "/data/m.db" },
      { limit: 3, budgetChars: 900, toolCapture: ["webfetch"], debug: true, url: "http://h:1/" },
    );
    assert.deepEqual(problems, []);
    assert.equal(settings.limit, 7);
    assert.equal(settings.budgetChars, 900);
    assert.deepEqual([...settings.toolCapture], ["bash", "read"]);
    assert.equal(settings.debug, true);
    assert.equal(settings.url, "http://h:1");
    assert.equal(settings.budgetMs, 1500);
    assert.equal(hookLogPath(settings), "/data/hooks.jsonl");
    assert.equal(discoveryPath(settings), "/data/m.db.server.json");
  });

  test("the token is MEMORY_PLUGIN_TOKEN, else MEMORY_TOKEN, else the option", () => {
    assert.equal(loadSettings({ MEMORY_TOKEN: "svc" }, { token: "opt" }).settings.token, "svc");
    assert.equal(loadSettings({ MEMORY_PLUGIN_TOKEN: "p", MEMORY_TOKEN: "svc" }).settings.token, "p");
    assert.equal(loadSettings({}, { token: "opt" }).settings.token, "opt");
  });

  test("a bad value is reported and its default used; empty variables count as unset", () => {
    const { settings, problems } = loadSettings(
      { MEMORY_PLUGIN_LIMIT: "99", MEMORY_PLUGIN_AUTOSTART: "maybe", MEMORY_HOOK_BUDGET_S: "", MEMORY_PROJECT: "",
        MEMORY_PLUGIN_BUDGET_CHARS: "300" }, // a budget no memory fits in
      { budgetS: 0.5, project: "web" },
    );
    assert.equal(settings.limit, 5);
    assert.equal(settings.budgetChars, 2000);
    assert.equal(settings.autostart, false);
    assert.equal(settings.budgetMs, 500);
    assert.equal(settings.project, "web");
    assert.deepEqual(problems.map((p) => p.name),
      ["MEMORY_PLUGIN_LIMIT", "MEMORY_PLUGIN_BUDGET_CHARS", "MEMORY_PLUGIN_AUTOSTART"]);
    assert.match(problems[0]?.message ?? "", /1\.\.50/);
  });
});

describe("client", () => {
  let errors: http.Server;
  let errorsUrl = "";

  before(async () => {
    errors = http.createServer((req, res) => {
      res.writeHead(req.url === "/boom" ? 500 : 200, { "Content-Type": "application/json" });
      res.end(req.url === "/boom" ? '{"error": "kaputt"}' : '{"ok": true}');
    });
    await new Promise<void>((done) => errors.listen(0, "127.0.0.1", done));
    errorsUrl = `http://127.0.0.1:${(errors.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((done) => errors.close(() => done())));

  async function failure(promise: Promise<unknown>): Promise<ServiceUnavailable> {
    try {
      await promise;
    } catch (error) {
      assert.ok(error instanceof ServiceUnavailable, String(error));
      return error;
    }
    assert.fail("the call succeeded");
  }

  test("answers are decoded JSON; an error status is an error with the service's message", async () => {
    const client = new ServiceClient(errorsUrl, "");
    assert.deepEqual(await client.get("/fine", now() + 1000), { ok: true });
    const error = await failure(client.get("/boom", now() + 1000));
    assert.equal(error.outcome, "error");
    assert.equal(error.message, "HTTP 500: kaputt");
  });

  test("a request says how long it can still wait (X-Memory-Wait-Ms), as client.py", async () => {
    const waits: string[] = [];
    const server = http.createServer((req, res) => {
      waits.push(String(req.headers["x-memory-wait-ms"]));
      res.writeHead(200, { "Content-Type": "application/json" }).end('{"ok": true}');
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      await new ServiceClient(url, "").post("/recall", {}, now() + 1000);
      assert.equal(waits.length, 1);
      const wait = Number(waits[0]);
      assert.ok(Number.isInteger(wait) && wait > 0 && wait <= 1000, waits[0]);
    } finally {
      await new Promise<void>((done) => server.close(() => done()));
    }
  });

  test("nothing listening is 'service down', at once", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const started = now();
    const error = await failure(new ServiceClient(url, "").post("/recall", {}, now() + 1000));
    assert.equal(error.outcome, "service down");
    assert.equal(error.message, `nothing listens at ${url} (Connection refused)`);
    assert.ok(now() - started < 200, `took ${now() - started} ms`);
  });

  test("a service that never answers is a 'timeout' when the deadline comes, not later", async () => {
    const hung = await hangingServer();
    try {
      const started = now();
      const error = await failure(new ServiceClient(hung.url, "").post("/recall", {}, now() + 300));
      const took = now() - started;
      assert.equal(error.outcome, "timeout");
      assert.ok(took >= 290 && took < 600, `took ${took} ms`);
    } finally {
      await hung.close();
    }
  });

  test("the probe: any HTTP answer is an answer; a hung service gets PROBE_MS, a refused one none", async () => {
    assert.equal(await answers(errorsUrl, "t"), true);
    const other = await fakeService({}); // a 404 to everything
    try {
      assert.equal(await answers(other.url, ""), true, "an error status is an answer too");
      assert.deepEqual(other.requests, ["HEAD /"]);
    } finally {
      await other.close();
    }
    const hung = await hangingServer();
    try {
      const started = now();
      assert.equal(await answers(hung.url, ""), false);
      const took = now() - started;
      assert.ok(took >= PROBE_MS - 10 && took < PROBE_MS + 300, `took ${took} ms`);
      assert.equal(await answers(hung.url, "", now() + 100), false);
      assert.ok(now() - started < PROBE_MS + 400, "a deadline of its own is kept");
    } finally {
      await hung.close();
    }
    const started = now();
    assert.equal(await answers(`http://127.0.0.1:${await closedPort()}`, ""), false);
    assert.equal(await answers("not a url", ""), false);
    assert.ok(now() - started < 200, `took ${now() - started} ms`);
  });

  test("the URL: MEMORY_PLUGIN_URL, else a live discovery file, else MEMORY_PORT, else the default port", () => {
    const dir = tempDir();
    try {
      const db = join(dir, "memory.db");
      const discovery = `${db}.server.json`;
      const settings = loadSettings({ MEMORY_DB_PATH: db }).settings;
      // Found by the port alone: the store MEMORY_DB_PATH names goes with it (X-Memory-Store).
      const store = { tag: storeTag(storeIdentity("", db)), identity: storeIdentity("", db) };
      assert.deepEqual(resolveUrl(settings), { url: "http://127.0.0.1:8765", origin: "default", store });
      writeFileSync(discovery, JSON.stringify({ url: "http://127.0.0.1:4711/", pid: process.pid }));
      assert.deepEqual(resolveUrl(settings), { url: "http://127.0.0.1:4711", origin: `discovery file ${discovery}`, store: null });
      // Left behind by a killed service: its process is gone.
      writeFileSync(discovery, JSON.stringify({ url: "http://127.0.0.1:4711", pid: 2 ** 22 + 12345 }));
      assert.equal(resolveUrl(settings).origin, "default");
      const pinned = loadSettings({ MEMORY_DB_PATH: db, MEMORY_PLUGIN_URL: "http://127.0.0.1:9/" }).settings;
      assert.deepEqual(resolveUrl(pinned), { url: "http://127.0.0.1:9", origin: "MEMORY_PLUGIN_URL", store: null });
      // No live discovery file: the service's own MEMORY_PORT (0: the OS picks, only the file knows).
      const ported = loadSettings({ MEMORY_DB_PATH: db, MEMORY_PORT: "44913" }).settings;
      assert.deepEqual(resolveUrl(ported), { url: "http://127.0.0.1:44913", origin: "MEMORY_PORT", store });
      const picked = loadSettings({ MEMORY_DB_PATH: db, MEMORY_PORT: "0" }).settings;
      assert.deepEqual(resolveUrl(picked), { url: "http://127.0.0.1:8765", origin: "default", store });
    } finally {
      removeDir(dir);
    }
  });
});

describe("hook log", () => {
  test("one JSON line per outcome, in the Python hooks' format, rotated past 1 MB", () => {
    const dir = tempDir();
    try {
      const path = join(dir, "sub", "hooks.jsonl");
      const entry = { harness: "opencode", event: "e", outcome: "stored" as const, detail: "d", session: "s", project: "p", ms: 1.5 };
      record(path, entry);
      const [line] = readFileSync(path, "utf8").split("\n");
      const parsed = JSON.parse(line as string) as Record<string, unknown>;
      assert.deepEqual(Object.keys(parsed), ["ts", "harness", "event", "outcome", "detail", "session", "project", "ms"]);
      assert.ok(Math.abs((parsed["ts"] as number) - Date.now() / 1000) < 5);
      assert.equal(statSync(path).mode & 0o777, 0o600);
      writeFileSync(path, "x".repeat(MAX_LOG_BYTES + 1));
      record(path, entry);
      assert.equal(statSync(`${path}.1`).size, MAX_LOG_BYTES + 1);
      assert.equal(readFileSync(path, "utf8").split("\n").filter(Boolean).length, 1);
      // An unwritable log is not an error for the plugin.
      mkdirSync(join(dir, "blocked"));
      record(join(dir, "blocked"), entry);
    } finally {
      removeDir(dir);
    }
  });
});

describe("chunking", () => {
  test("one memory per exchange; injected blocks and short exchanges left out", () => {
    const chunks = chunkTurns([
      { role: "user", text: "why does the checkout integration test keep failing on CI?" },
      { role: "assistant", text: "<semantic-memory>old</semantic-memory>The Redis fixture flushes keys." },
      { role: "user", text: "ok" },
      { role: "assistant", text: "Done." },
    ]);
    assert.deepEqual(chunks, [
      "User: why does the checkout integration test keep failing on CI?\nAssistant: The Redis fixture flushes keys.",
    ]);
    assert.equal(clean("a <system-reminder x='1'>b</system-reminder> c"), "a  c");
  });

  test("a long exchange is cut at boundaries, each later piece headed by its question", () => {
    const answer = Array.from({ length: 40 }, (_, i) => `Paragraph ${i} explains one more detail of the fix.`).join("\n\n");
    const chunks = chunkTurns([
      { role: "user", text: "how do we fix the flaky checkout test?" },
      { role: "assistant", text: answer },
    ]);
    assert.ok(chunks.length > 1);
    for (const chunk of chunks) assert.ok(chunk.length <= 1200, `${chunk.length} chars`);
    for (const chunk of chunks.slice(1)) assert.ok(chunk.startsWith("(User asked: how do we fix the flaky checkout test?)\n"));
    assert.deepEqual(chunkTurns([{ role: "user", text: "how do we fix the flaky checkout test?" }, { role: "assistant", text: answer }]), chunks);
    assert.deepEqual(splitText("aaaa bbbb cccc", 9), ["aaaa bbbb", "cccc"]);
  });

  test("a 'remember' prompt and its bare acknowledgement are not flushed again", () => {
    const fact = "the deploy freeze starts on Fridays at noon";
    const chunks = chunkTurns([
      { role: "user", text: '"why does the checkout integration test keep failing on CI?"' },
      { role: "assistant", text: "The Redis fixture flushes keys." },
      { role: "user", text: `"remember that ${fact}"` },
      { role: "assistant", text: `Noted: ${fact}.` },
    ]);
    assert.deepEqual(chunks, [
      "User: why does the checkout integration test keep failing on CI?\nAssistant: The Redis fixture flushes keys.",
    ]);
  });
});

describe("prompts", () => {
  test("the quotes `opencode run` wraps around a prompt are not the prompt", () => {
    // `opencode run "remember that …"` and `opencode run '"remember that …"'`
    assert.equal(unquote('"remember that the freeze starts Fridays"'), "remember that the freeze starts Fridays");
    assert.equal(unquote('"\\"remember that the freeze starts Fridays\\""'), "remember that the freeze starts Fridays");
    assert.equal(unquote('"deploy" and "rollback"'), '"deploy" and "rollback"');
    assert.equal(remembered('"remember that the freeze starts Fridays"'), "the freeze starts Fridays");
    assert.equal(remembered('"Remember: use pnpm, not npm"'), "use pnpm, not npm");
    assert.equal(remembered('"which service holds our feature flags?"'), null);
  });

  test("what a 'remember' prompt stores (transcript.py's rule, checked against it from pytest)", () => {
    for (const [prompt, fact] of [
      ["remember:", null], ["remember that", null], ["Remember that.", null], ['remember ""', null],
      ["REMEMBER \u2014 use pnpm not npm", "use pnpm not npm"], ["remember \u2013 use pnpm", "use pnpm"],
      ["remember\uff1athe port is 5433", "the port is 5433"], ["remember\uff0c\u3001the port is 5433", "the port is 5433"],
      ["remember that's the port", "that's the port"],
      ["remember what port we chose for redis?", null], ["remember \u7aef\u53e3\uff1f", null],
      ["'remember the queue is sqs'", "the queue is sqs"], ["\u2018remember the queue is sqs\u2019", "the queue is sqs"],
      ["'remember' and 'forget'", null],
    ] as const) {
      assert.equal(remembered(prompt), fact, prompt);
    }
    assert.equal(unquote("'x' and 'y'"), "'x' and 'y'");
    assert.equal(unquote("'it's sqs'"), "'it's sqs'");
    assert.equal(unquote(" '\"remember the queue is sqs\"'\n"), "remember the queue is sqs");
  });
});

describe("capture records", () => {
  test("tool(input gist): output, its head and tail when long", () => {
    assert.equal(captureRecord({ name: "bash", input: { command: "echo hi", description: "x" }, output: "hi\n" }), "bash(echo hi):\nhi");
    assert.equal(captureRecord({ name: "read", input: { filePath: "/src/a.ts" }, output: "" }), "read(/src/a.ts): (no output)");
    assert.equal(describeInput({ a: 1, b: [true, null] }), '{"a": 1, "b": [true, null]}');
    const long = captureRecord({ name: "bash", input: { command: "yes" }, output: "h".repeat(1500) + "t".repeat(1500) });
    assert.ok(long.includes(`\n[… ${3000 - CAPTURE_CHARS} characters cut …]\n`));
    assert.ok(long.startsWith("bash(yes):\nhhh") && long.endsWith("ttt"));
  });
});

describe("project names", () => {
  test("SSH and HTTPS remotes of one repository agree", () => {
    for (const url of [
      "git@github.com:Acme/web.git",
      "https://github.com/Acme/web",
      "https://user:tok@GitHub.com:443/Acme/web.git/",
      "ssh://git@github.com:22/Acme/web.git",
    ]) {
      assert.equal(normaliseRemote(url), "github.com/acme/web", url);
    }
    assert.equal(normaliseRemote("/srv/git/web.git"), "/srv/git/web");
  });

  test("a self-hosted server's path keeps its case; a code host's is case-insensitive", () => {
    assert.equal(normaliseRemote("git@git.example.com:Acme/Web.git"), "git.example.com/Acme/Web");
    assert.equal(normaliseRemote("https://GitLab.com/Team/API"), "gitlab.com/team/api");
    assert.equal(normaliseRemote("git@bitbucket.org:Team/App.git"), "bitbucket.org/team/app");
  });
});
