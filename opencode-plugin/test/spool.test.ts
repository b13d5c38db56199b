/**
 * Nothing the plugin writes is lost: the spool file format (the Python service's, spool.py),
 * the back-off shared with the Python hooks (backoff.py), which answers are spooled and which
 * are not, a write in flight when opencode exits, and a real service storing what was spooled
 * while it was down, exactly once, then recalling it.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, test } from "node:test";

import { activeBackOff, clearBackOff, startBackOff } from "../src/backoff.js";
import { MemoryPlugin } from "../src/memory.js";
import type { MessagePart, SessionMessage } from "../src/messages.js";
import { backoffPath, spoolPath } from "../src/settings.js";
import { appendSpool, refusedItems, replaySpool, stampCreatedAt } from "../src/spool.js";
import { prompt, call, closedPort, hangingServer, hookLog, memories, removeDir, settingsFor, startService, tempDir } from "./support.js";

const PROJECT = "acme-web";
const NAME = /^\d{20}-\d+-[0-9a-f]{8}\.json$/;
const AGENT_SYSTEM = "You are opencode.\n<env>\n  Working directory: /src/web\n</env>";

/** The records waiting in `<dir>/spool` (or in `<dir>/spool/rejected`), oldest first. */
function spooled(dir: string, folder = "spool"): Record<string, any>[] {
  let names: string[];
  try {
    names = readdirSync(join(dir, folder)).filter((name) => name.endsWith(".json")).sort();
  } catch {
    return [];
  }
  return names.map((name) => JSON.parse(readFileSync(join(dir, folder, name), "utf8")) as Record<string, any>);
}

function refused(dir: string): Record<string, any>[] {
  return spooled(dir, join("spool", "rejected"));
}

/** A service's token: the service refuses a memory that is nothing but one (a 200 answer). */
const SECRET = "ghp_R8x2kQ9mZ4vT7nW1pL6sY3cB5hJ0dF8gA2eK";

let counter = 0;
function text(sessionID: string, role: "user" | "assistant", body: string): SessionMessage {
  const id = `msg_${++counter}`;
  const part = { id: `prt_${counter}`, sessionID, messageID: id, type: "text", text: body } as MessagePart;
  return { info: { id, sessionID, role }, parts: [part] } as unknown as SessionMessage;
}

/** A server that answers every request with `status` and a JSON error. */
async function statusServer(status: number, body?: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(status, { "Content-Type": body === undefined ? "application/json" : "text/html" });
      res.end(body ?? JSON.stringify({ error: `status ${status}` }));
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}

async function waitFor<T>(probe: () => Promise<T | null>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > end) throw new Error("gave up waiting");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("the spool file", () => {
  test("is spool.py's format: one fsync'd file per write, named to sort oldest first", () => {
    const dir = tempDir();
    try {
      const folder = join(dir, "spool");
      const bodies = [0, 1, 2].map((i) => ({ content: `m${i}`, tags: ["t"], created_at: 5 }));
      const files = bodies.map((body) => appendSpool(folder, "/ingest", body, { harness: "opencode", event: "e" }));
      const names = readdirSync(folder);
      assert.deepEqual(names.sort(), files.map((f) => f.slice(folder.length + 1)));
      assert.deepEqual([...names].sort(), names.map(String).sort()); // no temp file left
      for (const name of names) assert.match(name, NAME);
      assert.equal(names[0]?.split("-")[1], String(process.pid));
      // Unix ns of now in the name, sorted in the order written.
      assert.ok(Math.abs(Number(names[0]?.slice(0, 20)) / 1e9 - Date.now() / 1000) < 5);
      const records = spooled(dir);
      assert.deepEqual(records.map((r) => r["body"]), bodies);
      assert.deepEqual(Object.keys(records[0] as object), ["v", "ts", "harness", "event", "path", "body"]);
      assert.equal(records[0]?.["v"], 1);
      assert.equal(records[0]?.["path"], "/ingest");
      assert.equal(records[0]?.["harness"], "opencode");
      assert.ok(Math.abs(records[0]?.["ts"] - Date.now() / 1000) < 5);
      assert.equal(statSync(folder).mode & 0o777, 0o700);
      assert.equal(statSync(files[0] as string).mode & 0o777, 0o600);
    } finally {
      removeDir(dir);
    }
  });

  test("each memory is stamped with the time it was made, unless it has one", () => {
    const one: Record<string, unknown> = { content: "a" };
    stampCreatedAt(one, 12.5);
    assert.equal(one["created_at"], 12.5);
    const batch = { items: [{ content: "a" }, { content: "b", created_at: 3 }] };
    stampCreatedAt(batch, 7);
    assert.deepEqual(batch.items.map((i) => i.created_at), [7, 3]);
    assert.equal("created_at" in batch, false);
  });
});

describe("the shared back-off", () => {
  test("reads and writes backoff.py's file", () => {
    const dir = tempDir();
    const url = "http://127.0.0.1:9";
    try {
      const path = join(dir, "hooks.backoff.json");
      assert.equal(activeBackOff(path, url), null);
      // As the Python hooks write it.
      writeFileSync(path, JSON.stringify({ until: Date.now() / 1000 + 30, outcome: "timeout", detail: "hung", url }));
      assert.equal(activeBackOff(path, url)?.outcome, "timeout");
      assert.equal(activeBackOff(path, url, Date.now() / 1000 + 31), null, "it runs out");
      startBackOff(path, url, 10_000, "service down", "refused");
      const data = JSON.parse(readFileSync(path, "utf8"));
      assert.deepEqual(Object.keys(data), ["until", "outcome", "detail", "url"]);
      assert.ok(Math.abs(data.until - (Date.now() / 1000 + 10)) < 2);
      assert.equal(data.outcome, "service down");
      startBackOff(path, url, 0, "timeout", "0 = never");
      assert.equal(activeBackOff(path, url)?.outcome, "service down");
      writeFileSync(path, "{not json");
      assert.equal(activeBackOff(path, url), null);
      clearBackOff(path);
      clearBackOff(path);
      assert.deepEqual(readdirSync(dir), []);
    } finally {
      removeDir(dir);
    }
  });

  test("holds for the URL that failed only", () => {
    const dir = tempDir();
    const [dead, live] = ["http://127.0.0.1:9", "http://127.0.0.1:10"];
    try {
      const path = join(dir, "hooks.backoff.json");
      startBackOff(path, dead, 30_000, "service down", "refused");
      assert.equal(activeBackOff(path, live), null, "another URL's service is not silenced");
      assert.equal(activeBackOff(path, dead)?.outcome, "service down");
      clearBackOff(path, live);
      assert.equal(activeBackOff(path, dead)?.outcome, "service down", "an answer from elsewhere does not end it");
      clearBackOff(path, dead);
      assert.deepEqual(readdirSync(dir), []);
      writeFileSync(path, JSON.stringify({ until: Date.now() / 1000 + 30, outcome: "timeout" }));
      assert.equal(activeBackOff(path, live)?.outcome, "timeout", "an older release's file holds for all");
    } finally {
      removeDir(dir);
    }
  });

  test("MEMORY_HOOK_BACKOFF_S=0 turns it off", async () => {
    const dir = tempDir();
    try {
      const url = `http://127.0.0.1:${await closedPort()}`;
      const settings = settingsFor({ MEMORY_PLUGIN_URL: url, MEMORY_DB_PATH: join(dir, "m.db"), MEMORY_HOOK_BACKOFF_S: "0" });
      assert.equal(settings.backoffMs, 0);
      assert.equal(backoffPath(settings), join(dir, "hooks.backoff.json"));
      assert.equal(spoolPath(settings), join(dir, "spool"));
      await prompt(new MemoryPlugin(settings, dir, [], () => undefined), "ses_1", [
        { type: "text", text: "remember that nothing listens" } as MessagePart,
      ]);
      assert.deepEqual(readdirSync(dir).sort(), ["hooks.jsonl", "spool"]);
    } finally {
      removeDir(dir);
    }
  });
});

describe("what is spooled", () => {
  const cases = [[503, "spooled"], [500, "spooled"], [401, "spooled"], [429, "spooled"], [404, "spooled"], [405, "spooled"],
    [422, "refused"], [413, "refused"], [400, "refused"]] as const;
  for (const [status, expected] of cases) {
    test(`a write answered with HTTP ${status} is ${expected === "spooled" ? "spooled" : "kept in rejected/ (the request is wrong)"}`, async () => {
      const dir = tempDir();
      const server = await statusServer(status);
      try {
        const settings = settingsFor({ MEMORY_PLUGIN_URL: server.url, MEMORY_DB_PATH: join(dir, "m.db") }, { project: PROJECT });
        const memory = new MemoryPlugin(settings, dir, [], () => undefined);
        await prompt(memory, "ses_1", [{ type: "text", text: "remember that the pool size is 20" } as MessagePart]);
        const [line] = hookLog(dir);
        assert.equal(line?.["outcome"], expected);
        assert.match(line?.["detail"], new RegExp(`HTTP ${status}: status ${status}`));
        assert.equal(spooled(dir).length, expected === "spooled" ? 1 : 0);
        const kept = refused(dir);
        assert.equal(kept.length, expected === "refused" ? 1 : 0);
        if (expected === "refused") {
          // spool.py's record, with the reason: `memory-mcp spool list` shows it, nothing replays it.
          assert.match(line?.["detail"], / \(kept in spool\/rejected\/\)$/);
          assert.deepEqual(Object.keys(kept[0] as object), ["v", "ts", "harness", "event", "path", "body", "rejected", "rejected_at"]);
          assert.equal(kept[0]?.["rejected"], `HTTP ${status}: status ${status}`);
          assert.equal(kept[0]?.["rejected_at"], kept[0]?.["ts"]);
          assert.equal(kept[0]?.["body"]?.["content"], "the pool size is 20");
          assert.equal(kept[0]?.["event"], "chat.message");
          assert.equal(statSync(join(dir, "spool", "rejected")).mode & 0o777, 0o700);
        }
        // The service answered: no back-off for the others.
        assert.equal(activeBackOff(join(dir, "hooks.backoff.json"), ""), null);
      } finally {
        await server.close();
        removeDir(dir);
      }
    });
  }

  for (const [status, body] of [[200, "<html>hello</html>"], [204, ""]] as const) {
    test(`a write answered HTTP ${status} without the service's JSON is spooled, not taken as stored`, async () => {
      const dir = tempDir();
      const server = await statusServer(status, body);
      try {
        const settings = settingsFor({ MEMORY_PLUGIN_URL: server.url, MEMORY_DB_PATH: join(dir, "m.db") }, { project: PROJECT });
        const memory = new MemoryPlugin(settings, dir, [], () => undefined);
        await prompt(memory, "ses_1", [{ type: "text", text: "remember that the pool size is 20" } as MessagePart]);
        const [line] = hookLog(dir);
        assert.equal(line?.["outcome"], "spooled");
        assert.match(line?.["detail"], /without the service's JSON/);
        assert.equal(spooled(dir).length, 1);
      } finally {
        await server.close();
        removeDir(dir);
      }
    });
  }

  test("a compaction flush and a tool capture the service refuses are kept in rejected/ too", async () => {
    const dir = tempDir();
    const server = await statusServer(422);
    try {
      const settings = settingsFor({ MEMORY_PLUGIN_URL: server.url, MEMORY_DB_PATH: join(dir, "m.db") },
        { project: PROJECT, toolCapture: "bash" });
      const memory = new MemoryPlugin(settings, dir, [], () => undefined);
      memory.compacting("ses_1");
      await memory.messagesTransform([text("ses_1", "user", "why is the integration suite so slow?"),
        text("ses_1", "assistant", "Every test rebuilds the search index; cache it per worker.")]);
      memory.toolExecuted("bash", "ses_1", { command: "echo pool=20" }, "pool=20\n");
      await memory.dispose();
      assert.deepEqual(hookLog(dir).map((e) => [e["event"], e["outcome"], e["detail"]]), [
        ["experimental.session.compacting", "stored", "1 chunks: 0 new, 0 already stored, 1 refused"],
        ["tool.execute.after", "refused", "HTTP 422: status 422 (kept in spool/rejected/)"],
      ]);
      const kept = refused(dir);
      assert.deepEqual(kept.map((r) => [r["event"], r["rejected"]]), [
        ["experimental.session.compacting", "HTTP 422: status 422"], ["tool.execute.after", "HTTP 422: status 422"]]);
      assert.equal(kept[0]?.["body"]?.["items"]?.length, 1);
      assert.equal(kept[1]?.["body"]?.["content"], "bash(echo pool=20):\npool=20");
      assert.deepEqual(spooled(dir), []);
    } finally {
      await server.close();
      removeDir(dir);
    }
  });

  test("a write in flight when opencode exits is spooled on the way out", async () => {
    const dir = tempDir();
    const hung = await hangingServer();
    try {
      const memoryModule = new URL("../src/memory.js", import.meta.url).href;
      const settingsModule = new URL("../src/settings.js", import.meta.url).href;
      const script = `
        import { MemoryPlugin } from ${JSON.stringify(memoryModule)};
        import { loadSettings } from ${JSON.stringify(settingsModule)};
        const { settings } = loadSettings({ MEMORY_PLUGIN_URL: ${JSON.stringify(hung.url)},
          MEMORY_DB_PATH: ${JSON.stringify(join(dir, "m.db"))}, MEMORY_HOOK_BUDGET_S: "30" }, { project: "p" });
        const memory = new MemoryPlugin(settings, "/", [], () => undefined);
        const parts = [{ type: "text", text: "remember that exits lose nothing" }];
        void memory.chatMessage("ses_1", parts).then(() => memory.messagesTransform([{ info: { id: "msg_1", sessionID: "ses_1", role: "user" }, parts }]));
        setTimeout(() => process.exit(0), 300);`;
      const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: "inherit" });
      const code = await new Promise((resolve) => child.on("exit", resolve));
      assert.equal(code, 0);
      const [record] = spooled(dir);
      assert.equal(record?.["body"]?.["content"], "exits lose nothing");
      assert.equal(record?.["event"], "chat.message");
      assert.equal(typeof record?.["body"]?.["created_at"], "number");
    } finally {
      await hung.close();
      removeDir(dir);
    }
  });
});

describe("with the service down, then back", () => {
  test("a remember and a compaction flush are spooled, stored once by the service, then recalled", async () => {
    const dir = tempDir();
    const db = join(dir, "memory.db");
    const fact = "the nightly backup job runs on host vega at 02:30";
    const answer = "The integration suite is slow because every test rebuilds the search index; cache it per worker.";
    const down = `http://127.0.0.1:${await closedPort()}`;
    try {
      const memory = new MemoryPlugin(settingsFor({ MEMORY_PLUGIN_URL: down, MEMORY_DB_PATH: db }, { project: PROJECT }),
        "/src/web", [], () => undefined);
      await memory.chatMessage("ses_a", [{ type: "text", text: `remember that ${fact}` } as MessagePart]);
      const messages = [text("ses_a", "user", "why is the integration suite so slow?"), text("ses_a", "assistant", answer)];
      memory.compacting("ses_a");
      await memory.messagesTransform(messages);
      assert.deepEqual(hookLog(dir).map((e) => [e["event"], e["outcome"]]), [
        ["chat.message", "spooled"],
        ["experimental.session.compacting", "spooled"],
      ]);
      assert.match(hookLog(dir)[1]?.["detail"], /^1 chunks: 0 new, 0 already stored, 0 refused, 1 spooled \(service down: backing off until /);
      const records = spooled(dir);
      assert.deepEqual(records.map((r) => [r["harness"], r["event"], r["path"]]), [
        ["opencode", "chat.message", "/ingest"],
        ["opencode", "experimental.session.compacting", "/ingest"],
      ]);
      const spooledAt = records[0]?.["body"]?.["created_at"] as number;

      const service = await startService(dir); // drains the spool at start
      try {
        const chat = await waitFor(async () => {
          const found = await memories(service.url, "chat");
          return found.length ? found : null;
        });
        const flushed = await waitFor(async () => {
          const found = await memories(service.url, "compaction");
          return found.length ? found : null;
        });
        assert.deepEqual(chat.map((m) => [m.content, m.kind, m.project]), [[fact, "fact", PROJECT]]);
        assert.ok(Math.abs(Date.parse(chat[0].created_at) / 1000 - spooledAt) < 2, "it keeps the time it was made");
        assert.deepEqual(flushed.map((m) => m.content), [`User: why is the integration suite so slow?\nAssistant: ${answer}`]);
        assert.deepEqual(spooled(dir), []);
        assert.equal(activeBackOff(join(dir, "hooks.backoff.json"), ""), null, "the service ended the back-off");

        // The same write spooled again (its answer had come too late) is a duplicate.
        appendSpool(join(dir, "spool"), "/ingest", records[0]?.["body"], { harness: "opencode", event: "chat.message" });
        await waitFor(async () => (spooled(dir).length ? null : true));
        assert.equal((await memories(service.url, "chat")).length, 1);

        // The next session recalls both.
        const next = new MemoryPlugin(settingsFor({ MEMORY_PLUGIN_URL: service.url, MEMORY_DB_PATH: db }, { project: PROJECT }),
          "/src/web", [], () => undefined);
        await next.chatMessage("ses_b", [{ type: "text", text: "when does the nightly backup job run, and on which host?" } as MessagePart]);
        const system = [AGENT_SYSTEM];
        await next.systemTransform("ses_b", system);
        assert.ok(system[1]?.includes(fact), system.join("\n"));
      } finally {
        await service.stop();
      }
    } finally {
      removeDir(dir);
    }
  });
});

describe("replaying keeps what the service refuses", () => {
  test("a 200 answer's refused items go to rejected/ with their reasons; the rest counts as sent", async () => {
    const dir = tempDir();
    try {
      const folder = join(dir, "spool");
      const whole = { content: SECRET };
      const batch = { items: [{ content: "kept" }, { content: SECRET }, { content: " " }, { content: "dup" }] };
      const fine = { items: [{ content: "a" }, { content: "b" }] };
      for (const body of [whole, batch, fine]) appendSpool(folder, "/ingest", body, { harness: "opencode", event: "e" });
      const answers: unknown[] = [
        { status: "rejected", reason: "nothing left once secrets are redacted" },
        { new: 1, duplicate: 1, rejected: 2, results: [{ status: "new" }, { status: "rejected", reason: "secret" },
          { status: "rejected", reason: "empty" }, { status: "duplicate" }] },
        { new: 2, duplicate: 0, rejected: 0, results: [{ status: "new" }, { status: "new" }] },
      ];
      const sent: unknown[] = [];
      const done = await replaySpool(folder, async (_path, body) => {
        sent.push(body);
        return answers[sent.length - 1];
      }, () => true);
      assert.deepEqual(done, { sent: 2, rejected: 2 });
      assert.deepEqual(sent, [whole, batch, fine]);
      assert.deepEqual(readdirSync(folder), ["rejected"]);
      const kept = refused(dir);
      assert.deepEqual(kept.map((r) => [r["body"], r["rejected"]]), [
        [whole, "nothing left once secrets are redacted"],
        [{ items: [{ content: SECRET }, { content: " " }] }, "secret; empty"],
      ]);
      assert.deepEqual(Object.keys(kept[1] as object), ["v", "ts", "harness", "event", "path", "body", "rejected", "rejected_at"]);
    } finally {
      removeDir(dir);
    }
  });

  test("refusedItems reads /ingest's answers as spool.py refused_items does", () => {
    const batch = { items: [{ content: "a" }, { content: "b" }], project: "p" };
    assert.equal(refusedItems(batch, null), null);
    assert.equal(refusedItems(batch, { new: 2, results: [{ status: "new" }, { status: "duplicate" }] }), null);
    assert.equal(refusedItems({ content: "a" }, { status: "new", uid: "x" }), null);
    assert.deepEqual(refusedItems({ content: "a" }, { status: "rejected" }), [{ content: "a" }, "refused"]);
    assert.deepEqual(refusedItems(batch, { results: [{ status: "rejected", reason: "r" }, { status: "rejected", reason: "r" }] }),
      [batch, "r"]);
    assert.deepEqual(refusedItems(batch, { results: [{ status: "new" }, { status: "rejected", reason: "secret" }] }),
      [{ items: [{ content: "b" }], project: "p" }, "secret"]);
    assert.equal(refusedItems(batch, { results: [[], "rejected"] }), null);
  });
});

describe("a service that answers", () => {
  test("gets what the plugin's spool holds, even one that does not drain it itself", async () => {
    const dir = tempDir();
    const service = await startService(); // its own db folder: it never sees this spool
    try {
      const folder = join(dir, "spool");
      appendSpool(folder, "/ingest", { content: "the staging cluster is called orion", project: PROJECT, created_at: 1_700_000_000 },
        { harness: "opencode", event: "chat.message" });
      appendSpool(folder, "/ingest", { content: "   " }, { harness: "opencode", event: "chat.message" });
      appendSpool(folder, "/ingest", { content: "the prod cluster is called lyra", project: PROJECT }, { harness: "claude-code", event: "prompt" });
      // Refused item by item in a 200 answer: the secret alone is kept, the rest stored.
      appendSpool(folder, "/ingest", { items: [{ content: "the dev cluster is called vega", project: PROJECT },
        { content: ` ${SECRET} `, project: PROJECT }] }, { harness: "opencode", event: "experimental.session.compacting" });
      // A roomy budget: a loaded machine's first requests to a new service can be slow.
      const settings = settingsFor({ MEMORY_PLUGIN_URL: service.url, MEMORY_DB_PATH: join(dir, "m.db"), MEMORY_HOOK_BUDGET_S: "20" },
        { project: PROJECT });
      const memory = new MemoryPlugin(settings, "/src/web", [], () => undefined);
      await memory.chatMessage("ses_1", [{ type: "text", text: "what is the staging cluster called?" } as MessagePart]);
      await memory.systemTransform("ses_1", [AGENT_SYSTEM]); // a recall: the service answers
      await memory.dispose(); // the replay runs beside the session; dispose lets it finish
      const stored = (await call(service.url, "GET", "/api/memories?limit=100")).items.map((m: { content: string }) => m.content).sort();
      assert.deepEqual(stored, ["the dev cluster is called vega", "the prod cluster is called lyra", "the staging cluster is called orion"]);
      assert.deepEqual(readdirSync(folder).sort(), ["rejected"]);
      for (const name of readdirSync(join(folder, "rejected"))) assert.match(name, NAME);
      const [blank, secret] = refused(dir);
      assert.equal(blank?.["body"]?.["content"], "   ");
      assert.match(blank?.["rejected"], /^HTTP 4\d\d: /);
      assert.deepEqual(secret?.["body"]?.["items"], [{ content: ` ${SECRET} `, project: PROJECT }]);
      assert.ok(secret?.["rejected"], "the service's reason");
      const log = hookLog(dir).filter((e) => e["event"] === "spool replay");
      assert.deepEqual(log.map((e) => [e["outcome"], e["detail"]]), [
        ["stored", "3 spooled write(s) replayed, 2 refused (see `memory-mcp spool list`)"]]);
    } finally {
      await service.stop();
      removeDir(service.dir);
      removeDir(dir);
    }
  });
});
