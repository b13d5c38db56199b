/**
 * `MemoryPlugin` driven the way opencode drives it (the hook order and message shapes seen in
 * opencode 1.18), against a real `memory-mcp` service: what reaches the system prompt, what
 * the service stores and records, what the hook log says, and how it fails open.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, test } from "node:test";

import { PROBE_MS, now } from "../src/client.js";
import { MemoryPlugin, REPORT_MS } from "../src/memory.js";
import type { MessagePart, SessionMessage } from "../src/messages.js";
import {
  call,
  cleanEnv,
  closedPort,
  fakeService,
  hangingServer,
  hookLog,
  memories,
  memoryMcpBin,
  pluginFor,
  removeDir,
  settingsFor,
  store,
  suiteService,
  tempDir,
} from "./support.js";

const PROJECT = "acme-web";
const FACT = "The staging database runs PostgreSQL 16 on port 5433";
const QUESTION = "which port does the staging database use?";
const REDIS =
  "The flaky checkout test fails because the Redis fixture flushes keys between workers; pin the fixture to database 7.";
/** An agent-loop call's system prompt (opencode writes the <env> block into each). */
const AGENT_SYSTEM = "You are opencode.\n<env>\n  Working directory: /src/web\n</env>";
const TITLE_SYSTEM = "You are a title generator. You output ONLY a thread title.";

let counter = 0;
function part(sessionID: string, text: string, extra: Record<string, unknown> = {}): MessagePart {
  return { id: `prt_${++counter}`, sessionID, messageID: `msg_${counter}`, type: "text", text, ...extra } as MessagePart;
}

function message(sessionID: string, role: "user" | "assistant", parts: MessagePart[], info: Record<string, unknown> = {}): SessionMessage {
  return { info: { id: `msg_${++counter}`, sessionID, role, ...info }, parts } as unknown as SessionMessage;
}

/** One agent turn as opencode runs it: chat.message, then per model call messages + system. */
class Session {
  readonly messages: SessionMessage[] = [];
  constructor(
    readonly plugin: MemoryPlugin,
    readonly id = `ses_${++counter}`,
  ) {}

  async prompt(text: string): Promise<void> {
    const parts = [part(this.id, text)];
    await this.plugin.chatMessage(this.id, parts);
    this.messages.push(message(this.id, "user", parts));
  }

  /** One model call of the agent loop; the system prompt it was sent with. */
  async modelCall(): Promise<string[]> {
    await this.plugin.messagesTransform(this.messages);
    const system = [AGENT_SYSTEM];
    await this.plugin.systemTransform(this.id, system);
    return system;
  }

  reply(text: string): void {
    this.messages.push(message(this.id, "assistant", [part(this.id, text)]));
  }

  /** A compaction: the flush hook, the messages it summarises, the compacted event. */
  async compact(): Promise<void> {
    this.plugin.compacting(this.id);
    await this.plugin.messagesTransform(structuredClone(this.messages));
    const system = [TITLE_SYSTEM.replace("title generator", "summariser")];
    await this.plugin.systemTransform(this.id, system);
    assert.equal(system.length, 1, "a compaction call gets nothing");
    this.plugin.event("session.compacted", { sessionID: this.id });
    this.messages.splice(0, this.messages.length,
      message(this.id, "user", [{ type: "compaction", auto: true } as unknown as MessagePart]),
      message(this.id, "assistant", [part(this.id, "Summary: a checkout test was discussed.")], { summary: true }),
      message(this.id, "user", [part(this.id, "Continue if you have next steps", { synthetic: true })]));
  }
}

describe("against a live service", () => {
  const service = suiteService();

  function plugin(options: Record<string, unknown> = {}, env: Record<string, string> = {}): MemoryPlugin {
    return pluginFor(service.url, service.dir, { project: PROJECT, ...options }, env);
  }

  test("a relevant memory goes into the agent's calls, the same bytes each time, and is reported", async () => {
    const uid = await store(service.url, FACT, PROJECT);
    const session = new Session(plugin());
    await session.prompt(QUESTION);

    // The title generator's call (same session, no <env> block) gets nothing.
    const title = [TITLE_SYSTEM];
    await session.plugin.systemTransform(session.id, title);
    assert.deepEqual(title, [TITLE_SYSTEM]);

    const first = await session.modelCall();
    assert.equal(first.length, 2);
    const block = first[1] as string;
    assert.ok(block.startsWith("<semantic-memory>") && block.includes(FACT) && block.includes(uid), block);
    session.reply("Let me check."); // a tool step: the turn goes on
    assert.deepEqual(await session.modelCall(), first);

    await session.plugin.dispose(); // the report goes beside the model call: let it land
    const injections = (await call(service.url, "GET", "/api/injections?harness=opencode")).items;
    assert.equal(injections.length, 1, "one injection reported for the turn");
    assert.deepEqual(injections[0].uids, [uid]);
    assert.equal(injections[0].hook, "experimental.chat.system.transform");
    assert.equal(injections[0].query, QUESTION);
    assert.match(injections[0].session, new RegExp(`^${session.id}@[0-9a-f]{6}$`));
    const lines = hookLog(service.dir).filter((e) => e["session"] === injections[0].session);
    assert.deepEqual(lines.map((e) => [e["harness"], e["event"], e["outcome"], e["project"]]),
      [["opencode", "experimental.chat.system.transform", "injected", PROJECT]]);
  });

  test("what opencode loads itself (an imported AGENTS.md) is not given to it again", async () => {
    const loaded = "Lint with make lint before every push (AGENTS.md)";
    const question = "how do I lint before a push?";
    await call(service.url, "POST", "/ingest",
      { content: loaded, project: PROJECT, tags: ["import:agents-md", "loaded-by:opencode"] });
    const anyone = await call(service.url, "POST", "/recall",
      { query: question, project: PROJECT, relevant_only: true });
    assert.deepEqual(anyone.items.map((i: any) => i.content), [loaded], "relevant to the question");
    const session = new Session(plugin());
    await session.prompt(question);
    assert.deepEqual(await session.modelCall(), [AGENT_SYSTEM], "opencode has it already");
  });

  test("nothing twice in one context; a compaction starts a new one and the flushed turns come back", async () => {
    await store(service.url, "The Redis fixture of the checkout test uses database 7 on CI", PROJECT);
    const session = new Session(plugin());
    await session.prompt("why does the checkout integration test keep failing on CI?");
    const before = await session.modelCall();
    assert.equal(before.length, 2);
    session.reply(REDIS);

    // A new prompt that recalls the same memory adds nothing: it is in the context already.
    await session.prompt("and what about the Redis fixture of the checkout test on CI?");
    assert.deepEqual(await session.modelCall(), before);
    session.reply("Database 7.");

    const compacted = structuredClone(session.messages);
    await session.compact();
    const flushed = (await memories(service.url, "compaction")).filter((m) => m.content.includes(REDIS));
    assert.equal(flushed.length, 1);
    assert.equal(flushed[0].kind, "note");
    assert.equal(flushed[0].project, PROJECT);
    assert.ok(flushed[0].tags.includes("harness:opencode"));
    assert.ok(flushed[0].tags.some((t: string) => t.startsWith(`session:${session.id}@`)));
    assert.equal(flushed[0].session, `opencode:${session.id}`); // as adapter.py memory_fields
    assert.equal(flushed[0].content,
      `User: why does the checkout integration test keep failing on CI?\nAssistant: ${REDIS}`);

    // After the compaction the last real prompt is recalled for again, in a new context.
    const after = await session.modelCall();
    assert.equal(after.length, 2);
    assert.ok(after[1]?.includes(REDIS), "the flushed exchange is back");
    assert.notEqual(after[1], before[1]);

    // Flushing the same messages again (a compaction that failed and ran again) adds nothing.
    session.plugin.compacting(session.id);
    await session.plugin.messagesTransform(compacted);
    // A compaction of a context that holds only the last summary has nothing to store.
    await session.compact();
    const log = hookLog(service.dir).filter((e) => e["event"] === "experimental.session.compacting");
    assert.deepEqual(log.map((e) => [e["outcome"], e["detail"]]), [
      ["stored", "2 chunks: 2 new, 0 already stored, 0 refused"],
      ["stored", "2 chunks: 0 new, 2 already stored, 0 refused"],
      ["skipped", "no conversation to flush"],
    ]);
  });

  test("a long exchange goes whole, so a secret it holds across the cut is stored as no piece", async () => {
    const keyLines = Array.from({ length: 25 }, (_, i) =>
      Array.from({ length: 64 }, (_, j) => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(i * 31 + j * 17 + i * j) % 64]).join(""));
    const key = ["-----BEGIN RSA PRIVATE KEY-----", ...keyLines, "-----END RSA PRIVATE KEY-----"].join("\n");
    const said = "The deploy server runs the nightly release job at two in the morning.";
    const reply = `Here is the setup. ${Array(18).fill(said).join(" ")}\n\nUse this key:\n${key}\n\n` +
      `${Array(30).fill("Then restart the worker pool and watch the queue drain.").join(" ")}`;
    const session = new Session(plugin());
    await session.prompt("How do I set up the deploy server for the nightly job?");
    session.reply(reply);
    await session.compact();
    const stored = (await memories(service.url, "compaction"))
      .filter((m) => m.session === `opencode:${session.id}`);
    assert.ok(stored.length >= 2, "the exchange was cut into pieces");
    for (const memory of stored) {
      for (const line of [...keyLines, "BEGIN RSA PRIVATE KEY", "END RSA PRIVATE KEY"]) {
        assert.ok(!memory.content.includes(line), `a piece of the key was stored: ${memory.content}`);
      }
    }
    assert.ok(stored.some((m) => m.content.includes("[REDACTED:private-key]")));
    const [flush] = hookLog(service.dir).filter((e) => e["event"] === "experimental.session.compacting" &&
      String(e["session"]).startsWith(session.id));
    assert.equal(flush?.["outcome"], "stored");
  });

  test("a 'remember …' prompt is stored as a fact and the model told so", async () => {
    const session = new Session(plugin());
    await session.prompt("Remember that the deploy freeze starts on Fridays at noon");
    const system = await session.modelCall(); // the transform before it decides the "remember"
    const [fact] = (await memories(service.url, "chat")).filter((m) => m.content.includes("deploy freeze"));
    assert.equal(fact.content, "the deploy freeze starts on Fridays at noon");
    assert.equal(fact.kind, "fact");
    assert.equal(system[1], `semantic-memory stored the user's "remember" message as a memory (uid ${fact.uid}); ` +
      "it does not need to be stored again.");
  });

  test("a 'remember …' the service refuses tells the model it is not remembered, and why", async () => {
    const session = new Session(plugin());
    await session.prompt("remember ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8");
    const system = await session.modelCall();
    assert.match(system[1] ?? "", /^semantic-memory did NOT store the user's "remember" message \(content: nothing but a redacted secret is left.*\); it is not remembered\.$/);
    const [line] = hookLog(service.dir).filter((e) => e["outcome"] === "refused");
    assert.ok(line, "the refusal is logged");
  });

  test("a 'remember …?' question is recalled for, not stored", async () => {
    const chosen = "We chose port 6380 for the Redis of the billing service";
    await store(service.url, chosen, PROJECT);
    const session = new Session(plugin());
    await session.prompt("remember what port we chose for the billing redis?");
    await session.prompt("'remember:'"); // nothing to remember: an ordinary prompt too
    await session.prompt("remember what port we chose for the billing redis?");
    const system = await session.modelCall();
    assert.ok(system[1]?.startsWith("<semantic-memory>") && system[1].includes(chosen), system.join("\n"));
    const stored = (await memories(service.url, "chat")).filter((m) => /billing|remember/i.test(m.content));
    assert.deepEqual(stored.map((m) => m.content), [chosen], "only the memory stored beforehand");
    const lines = hookLog(service.dir).filter((e) => e["event"] === "chat.message" && String(e["session"]).startsWith(session.id));
    assert.deepEqual(lines, []);
  });

  test("an allow-listed tool's output is captured; others are not", async () => {
    const memory = plugin({ toolCapture: "Bash" });
    memory.toolExecuted("bash", "ses_tools", { command: "echo pool=20", description: "x" }, "pool=20\n");
    memory.toolExecuted("read", "ses_tools", { filePath: "/etc/hosts" }, "127.0.0.1 localhost");
    await memory.dispose();
    const captured = (await memories(service.url, "tool")).map((m) => [m.content, m.kind, m.tags.at(-1)]);
    assert.deepEqual(captured, [["bash(echo pool=20):\npool=20", "artifact", "tool:bash"]]);
  });
});

describe("fail-open", () => {
  test("a service that is down costs nothing: a write is spooled, the hooks back off", async () => {
    const dir = tempDir();
    try {
      const url = `http://127.0.0.1:${await closedPort()}`;
      const memory = new MemoryPlugin(settingsFor({ MEMORY_PLUGIN_URL: url, MEMORY_DB_PATH: join(dir, "m.db") }), dir, [], () => undefined);
      const session = new Session(memory);
      const started = now();
      await session.prompt("remember that nothing listens here");
      await session.prompt(QUESTION);
      const system = await session.modelCall();
      assert.ok(now() - started < 500, `took ${now() - started} ms`);
      // The model is told the "remember" will be stored, as the Python adapters tell it.
      assert.deepEqual(system, [AGENT_SYSTEM,
        "semantic-memory will store the user's \"remember\" message as a memory as soon as its " +
        "service can take it; it does not need to be stored again."]);
      const log = hookLog(dir).map((e) => [e["event"], e["outcome"], e["detail"]]);
      const down = `nothing listens at ${url} (Connection refused)`;
      assert.deepEqual(log[0], ["chat.message", "spooled", `remembered in the spool (service down: ${down})`]);
      // The first try started the back-off every harness shares: the recall made no request.
      assert.deepEqual(log[1]?.slice(0, 2), ["experimental.chat.system.transform", "service down"]);
      assert.match(log[1]?.[2], new RegExp(`^backing off until \\d\\d:\\d\\d:\\d\\d, no request made \\(the last try: ${escape(down)}\\)$`));
      assert.equal(log.length, 2);
      const [file] = readdirSync(join(dir, "spool"));
      const spooled = JSON.parse(readFileSync(join(dir, "spool", file as string), "utf8"));
      assert.equal(spooled.body.content, "nothing listens here");
      const backoff = JSON.parse(readFileSync(join(dir, "hooks.backoff.json"), "utf8"));
      assert.equal(backoff.outcome, "service down");
    } finally {
      removeDir(dir);
    }
  });

  test("a hung service costs one budget and a probe, then every hook leaves it alone for a while", async () => {
    const dir = tempDir();
    const hung = await hangingServer();
    try {
      const settings = settingsFor({ MEMORY_PLUGIN_URL: hung.url, MEMORY_DB_PATH: join(dir, "m.db"), MEMORY_HOOK_BUDGET_S: "0.3" });
      const memory = new MemoryPlugin(settings, dir, [], () => undefined);
      const session = new Session(memory);
      await session.prompt(QUESTION);
      let started = now();
      assert.deepEqual(await session.modelCall(), [AGENT_SYSTEM]);
      const first = now() - started;
      // The recall, then the probe that tells hung from slow (unanswered too): the back-off.
      assert.ok(first >= 290 + PROBE_MS && first < 1300, `took ${first} ms`);
      // Each after a connection that only asks whose process listens there (client.ts ownerCheck).
      assert.equal(hung.connections(), 4);
      await session.prompt("and the production database?");
      started = now();
      await session.modelCall();
      assert.ok(now() - started < 100, "the next prompt does not wait again");
      // Nor does another opencode process (or any harness's hook): the back-off is a file.
      const other = new Session(new MemoryPlugin(settings, dir, [], () => undefined));
      started = now();
      await other.prompt("remember that the hung service is the staging one");
      await other.modelCall(); // the transform before it decides the "remember"
      assert.ok(now() - started < 100, "a write while backing off is spooled at once");
      const log = hookLog(dir);
      assert.deepEqual(log.map((e) => e["outcome"]), ["timeout", "timeout", "spooled"]);
      assert.ok(log[0]?.["ms"] < 700, "the hook log counts the action's own time, not the probe");
      assert.equal(hung.connections(), 4, "nothing more reached it");
      assert.equal(log[0]?.["detail"], `${hung.url} did not answer within the budget (recall)`);
      assert.match(log[1]?.["detail"], /^backing off until .*, no request made \(the last try: .* did not answer within the budget\) \(recall\)$/);
      assert.equal(readdirSync(join(dir, "spool")).length, 1);
    } finally {
      await hung.close();
      removeDir(dir);
    }
  });
});

describe("a slow service is not a hung one (a long writer holds the store's write lock)", () => {
  const BLOCK = `<semantic-memory>\n<memory uid="m1">${FACT}</memory>\n</semantic-memory>`;

  function plugin(url: string, dir: string, env: Record<string, string> = {}): { memory: MemoryPlugin; debug: string[] } {
    const debug: string[] = [];
    const settings = settingsFor({ MEMORY_PLUGIN_URL: url, MEMORY_DB_PATH: join(dir, "m.db"), MEMORY_PLUGIN_DEBUG: "1", ...env });
    return { memory: new MemoryPlugin(settings, dir, [], (line) => debug.push(line)), debug };
  }

  test("the injection report, a write, does not hold the model call: sent once beside it, dropped when late", async () => {
    const dir = tempDir();
    const service = await fakeService({
      "POST /recall": { block: BLOCK, block_uids: ["m1"] },
      "POST /inject/report": "hang",
    });
    try {
      const { memory, debug } = plugin(service.url, dir);
      const session = new Session(memory);
      await session.prompt(QUESTION);
      const started = now();
      const system = await session.modelCall();
      const took = now() - started;
      assert.deepEqual(system, [AGENT_SYSTEM, BLOCK]);
      assert.ok(took < 400, `the model call waited ${took} ms (the budget is 1500)`);
      const [line] = hookLog(dir);
      assert.deepEqual([line?.["outcome"], line?.["detail"]], ["injected", `1 memories, ${BLOCK.length} chars`]);

      const disposed = now();
      await memory.dispose();
      assert.ok(now() - disposed < REPORT_MS + 300, "the report gives up after REPORT_MS");
      assert.deepEqual(service.requests, ["POST /recall", "POST /inject/report"], "once, never retried");
      assert.ok(debug.some((l) => l.includes(`report failed: ${service.url} did not answer within the budget`)), debug.join(""));
      assert.equal(hookLog(dir).length, 1, "no line of its own: telemetry");
      assert.ok(!existsSync(join(dir, "hooks.backoff.json")), "the service answered the recall: no back-off");
      assert.ok(!existsSync(join(dir, "spool")), "never spooled");
    } finally {
      await service.close();
      removeDir(dir);
    }
  });

  test("a write that times out on a service that answers a probe is spooled without a back-off", async () => {
    const dir = tempDir();
    const service = await fakeService({
      "HEAD /": {},
      "POST /ingest": "hang",
      "POST /recall": { block: BLOCK, block_uids: ["m1"] },
      "POST /inject/report": { status: "ok" },
    });
    try {
      const { memory } = plugin(service.url, dir, { MEMORY_HOOK_BUDGET_S: "0.5" });
      const session = new Session(memory);
      await session.prompt("remember that the deploy freeze starts on Fridays at noon");
      await session.modelCall();
      const [said] = hookLog(dir);
      assert.deepEqual([said?.["event"], said?.["outcome"]], ["chat.message", "spooled"]);
      assert.match(said?.["detail"], /^remembered in the spool \(timeout: .* did not answer within the budget\); the service answers a probe: slow, not hung, no back-off$/);
      assert.ok(!existsSync(join(dir, "hooks.backoff.json")));
      assert.equal(readdirSync(join(dir, "spool")).filter((f) => f.endsWith(".json")).length, 1);

      await session.prompt(QUESTION);
      const system = await session.modelCall();
      // After the note that the "remember" will be stored, the block: the recall was made.
      assert.ok(system[1]?.endsWith(`it does not need to be stored again.\n\n${BLOCK}`), system[1]);
      assert.deepEqual(hookLog(dir).map((e) => [e["event"], e["outcome"]]).at(-1),
        ["experimental.chat.system.transform", "injected"]);
      await memory.dispose();
      assert.deepEqual(service.requests.slice(0, 3), ["POST /ingest", "HEAD /", "POST /recall"]);
    } finally {
      await service.close();
      removeDir(dir);
    }
  });

  test("with the back-off off (MEMORY_HOOK_BACKOFF_S=0) no probe is made", async () => {
    const dir = tempDir();
    const service = await fakeService({ "HEAD /": {}, "POST /ingest": "hang" });
    try {
      const { memory } = plugin(service.url, dir, { MEMORY_HOOK_BUDGET_S: "0.3", MEMORY_HOOK_BACKOFF_S: "0" });
      const session = new Session(memory);
      await session.prompt("remember that the probe is only for the back-off");
      await session.modelCall();
      assert.deepEqual(service.requests, ["POST /ingest"]);
      assert.deepEqual(hookLog(dir).map((e) => e["outcome"]), ["spooled"]);
    } finally {
      await service.close();
      removeDir(dir);
    }
  });
});

describe("autostart", () => {
  test("with no service, MEMORY_PLUGIN_AUTOSTART=1 starts one on a free port and uses it", async () => {
    const dir = tempDir();
    const db = join(dir, "memory.db");
    let pid: number | null = null;
    try {
      const env = cleanEnv({ MEMORY_DB_PATH: db, MEMORY_PLUGIN_AUTOSTART: "1", MEMORY_DEVICE: "cpu" });
      // Where the plugin looks first: a live discovery file naming a port nothing listens on
      // (so the check never reaches a service of the developer's on the default port).
      writeFileSync(`${db}.server.json`, JSON.stringify({ url: `http://127.0.0.1:${await closedPort()}`, pid: process.pid }));
      const settings = settingsFor(env, { command: memoryMcpBin(), project: PROJECT, budgetS: 20 });
      const memory = new MemoryPlugin(settings, dir, [], () => undefined);
      memory.autostart();
      const session = new Session(memory);
      await session.prompt("remember that autostart found no service");
      await session.modelCall();
      const info = JSON.parse(readFileSync(`${db}.server.json`, "utf8")) as { url: string; pid: number };
      pid = info.pid;
      assert.notEqual(info.url, "http://127.0.0.1:8765");
      const [fact] = await memories(info.url, "chat");
      assert.equal(fact.content, "autostart found no service");
      const [line] = hookLog(dir);
      assert.equal(line?.["outcome"], "stored");
      assert.match(line?.["detail"], new RegExp(`; autostart: (started|found) the service at ${info.url}$`));
    } finally {
      if (pid !== null) process.kill(pid, "SIGTERM");
      await waitGone(pid);
      removeDir(dir);
    }
  });
});

describe("autostart beside another program's server", () => {
  test("a web page on the service's port: autostart starts the service on a free port", async () => {
    const dir = tempDir();
    const db = join(dir, "memory.db");
    const page = http.createServer((_, res) => res.writeHead(200, { "Content-Type": "text/html" }).end("<html>a dev server</html>"));
    await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
    const port = (page.address() as AddressInfo).port;
    let pid: number | null = null;
    try {
      const env = cleanEnv({ MEMORY_DB_PATH: db, MEMORY_PORT: String(port), MEMORY_PLUGIN_AUTOSTART: "1", MEMORY_DEVICE: "cpu" });
      const settings = settingsFor(env, { command: memoryMcpBin(), project: PROJECT, budgetS: 20 });
      const memory = new MemoryPlugin(settings, dir, [], () => undefined);
      memory.autostart();
      const session = new Session(memory);
      await session.prompt("remember that a dev server holds the port");
      await session.modelCall();
      const info = JSON.parse(readFileSync(`${db}.server.json`, "utf8")) as { url: string; pid: number };
      pid = info.pid;
      assert.notEqual(info.url, `http://127.0.0.1:${port}`);
      const [fact] = await memories(info.url, "chat");
      assert.equal(fact.content, "a dev server holds the port");
    } finally {
      page.close();
      if (pid !== null) process.kill(pid, "SIGTERM");
      await waitGone(pid);
      removeDir(dir);
    }
  });
});

async function waitGone(pid: number | null): Promise<void> {
  for (let i = 0; pid !== null && i < 100; i++) {
    if (spawnSync("kill", ["-0", String(pid)]).status !== 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
