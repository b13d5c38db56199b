/**
 * A plugin that names its store (MEMORY_DB_PATH) and finds no live discovery file falls back
 * to the port, where a memory service of another db may listen (QA F2): it sends
 * X-Memory-Store there, the service answers 421, and the plugin treats that as no service:
 * the "remember" waits in the spool for its own service, the recall injects nothing. Real
 * services, as tests/test_store_identity.py for the hooks.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, test } from "node:test";

import { ServiceClient, ServiceMisdirected, now, resolveUrl, storeIdentity, storeTag } from "../src/client.js";
import { MemoryPlugin } from "../src/memory.js";
import type { MessagePart } from "../src/messages.js";
import { call, hookLog, PACKAGE_ROOT, prompt, removeDir, settingsFor, startService, store, tempDir } from "./support.js";

const PROJECT = "store-identity";

async function contents(url: string): Promise<string[]> {
  return ((await call(url, "GET", "/api/memories?limit=100")).items as { content: string }[]).map((m) => m.content);
}

/** The system prompt one model call of a new session gets after `text`. */
async function turn(plugin: MemoryPlugin, session: string, text: string): Promise<string[]> {
  await prompt(plugin, session, [{ type: "text", text, sessionID: session, messageID: `msg_${session}` } as MessagePart]);
  const system = ["You are opencode. <env>cwd</env>"];
  await plugin.systemTransform(session, system);
  return system;
}

describe("a service of another db on the fallback port", () => {
  test("names a store as lite.py does: real path, `~`, sqlite URLs, URLs without their password", () => {
    const dir = tempDir();
    try {
      mkdirSync(join(dir, "real"));
      symlinkSync(join(dir, "real"), join(dir, "link"));
      const cases: [string, string][] = [
        ["", join(dir, "link", "memory.db")], // not made yet: by its folder's real path
        [`sqlite:///${join(dir, "link", "memory.db")}`, "x"],
        ["postgres+psycopg://me:s3cr%40t@Db:5432/mem?sslpassword=pw&x=1", ""],
      ];
      const python = resolve(PACKAGE_ROOT, "..", ".venv", "bin", "python");
      const script = "import json,sys; from semantic_memory import lite; "
        + "print(json.dumps([lite.store_tag(lite.store_identity(u, p)) for u, p in json.loads(sys.argv[1])]))";
      const tags = JSON.parse(execFileSync(python, ["-c", script, JSON.stringify(cases)], { encoding: "utf8" })) as string[];
      assert.deepEqual(cases.map(([url, path]) => storeTag(storeIdentity(url, path))), tags);
      assert.equal(storeIdentity(cases[1]![0], ""), join(dir, "real", "memory.db"));
      assert.doesNotMatch(storeIdentity(cases[2]![0], ""), /s3cr|pw/);
    } finally {
      removeDir(dir);
    }
  });

  test("the expected store travels with the address, not in a map per URL", async () => {
    // A module map per URL forgot it as soon as other settings of the same process resolved
    // the same URL naming no store, and a client built for a URL not resolved here sent none.
    const mine = tempDir();
    const other = await startService(); // db B
    try {
      const port = new URL(other.url).port;
      const db = join(mine, "memory.db");
      const address = resolveUrl(settingsFor({ MEMORY_PORT: port, MEMORY_DB_PATH: db }));
      const identity = storeIdentity("", db);
      assert.deepEqual(address, { url: `http://127.0.0.1:${port}`, origin: "MEMORY_PORT", store: { tag: storeTag(identity), identity } });
      const plain = resolveUrl(settingsFor({ MEMORY_PORT: port, MEMORY_DISCOVERY_FILE: "off" }));
      assert.deepEqual(plain, { ...address, store: null }); // same URL, no store named: B answers it
      await new ServiceClient(plain.url, "", { store: plain.store }).get("/health", now() + 10_000);

      // Resolved before `plain` was, and built after: still sends this db's tag; B refuses it.
      const client = new ServiceClient(address.url, "", { store: address.store });
      await assert.rejects(client.post("/ingest", { content: "not for B", project: PROJECT }, now() + 10_000), ServiceMisdirected);
      assert.ok(!(await contents(other.url)).some((c) => c.includes("not for B")));
    } finally {
      await other.stop();
      removeDir(other.dir);
      removeDir(mine);
    }
  });

  test("is neither written to nor recalled from; the spool goes to this db's own service once", async () => {
    const mine = tempDir();
    const other = await startService(); // db B
    let own: Awaited<ReturnType<typeof startService>> | null = null;
    try {
      await store(other.url, "the blue widget ships on mondays", PROJECT);
      const env = { MEMORY_PORT: new URL(other.url).port, MEMORY_DB_PATH: join(mine, "memory.db") };
      const plugin = (extra: Record<string, string> = {}): MemoryPlugin =>
        new MemoryPlugin(settingsFor({ ...env, ...extra }, { project: PROJECT }), mine, [], () => undefined);

      assert.equal((await turn(plugin(), "ses_1", "when does the blue widget ship?")).length, 1);
      const recall = hookLog(mine).at(-1);
      assert.equal(recall?.["outcome"], "service down", JSON.stringify(recall));
      assert.match(String(recall?.["detail"]), /serves .*memory\.db/);

      await turn(plugin(), "ses_2", "remember that the green gadget ships on fridays");
      assert.equal(hookLog(mine).at(-1)?.["outcome"], "spooled");
      assert.equal(readdirSync(join(mine, "spool")).filter((n) => n.endsWith(".json")).length, 1);
      assert.ok(!(await contents(other.url)).some((c) => c.includes("green gadget")));

      // Naming B's own db (through a symlink), found by the port alone: recalled as before.
      symlinkSync(other.dir, join(mine, "b-link"));
      const named = plugin({ MEMORY_DB_PATH: join(mine, "b-link", "memory.db"), MEMORY_DISCOVERY_FILE: "off" });
      const system = await turn(named, "ses_3", "when does the blue widget ship?");
      assert.ok(system[1]?.includes("blue widget"), system.join("\n"));
      await named.dispose();

      await other.stop();
      own = await startService(mine); // replays this db's spool
      const deadline = Date.now() + 30_000;
      while (!(await contents(own.url)).some((c) => c.includes("green gadget"))) {
        assert.ok(Date.now() < deadline, "the spool was not replayed into this db");
        await new Promise((done) => setTimeout(done, 200));
      }
      assert.equal((await contents(own.url)).filter((c) => c.includes("green gadget")).length, 1);
    } finally {
      await other.stop();
      await own?.stop();
      removeDir(other.dir);
      removeDir(mine);
    }
  });
});
