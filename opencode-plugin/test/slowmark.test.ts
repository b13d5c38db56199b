/**
 * The slow mark shared with the Python hooks (backoff.py): after a write met a slow service (it
 * timed out, and the `HEAD /` probe was answered), the next writes of every harness spool at
 * once without a request, while recalls still try; a write the service takes ends the mark.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";

import { activeBackOff, activeSlowMark, clearBackOff, markSlow, slowMs, SLOW_MS } from "../src/backoff.js";
import { MemoryPlugin } from "../src/memory.js";
import type { MessagePart } from "../src/messages.js";
import { prompt, fakeService, hookLog, removeDir, settingsFor, tempDir } from "./support.js";

const remember = (text: string): MessagePart[] => [{ type: "text", text: `remember that ${text}` } as MessagePart];

describe("the slow mark", () => {
  test("is backoff.py's file: hooks.slow.json beside the back-off, for one URL, cleared with it", () => {
    const dir = tempDir();
    try {
      const path = join(dir, "hooks.backoff.json");
      const url = "http://127.0.0.1:9";
      markSlow(path, url, 20_000, "did not answer within the budget");
      const data = JSON.parse(readFileSync(join(dir, "hooks.slow.json"), "utf8")) as Record<string, unknown>;
      assert.deepEqual(Object.keys(data).sort(), ["detail", "outcome", "until", "url"]);
      assert.equal(data["outcome"], "slow");
      assert.equal(activeSlowMark(path, url)?.detail, "did not answer within the budget");
      assert.equal(activeSlowMark(path, "http://127.0.0.1:10"), null, "another URL's service");
      assert.equal(activeBackOff(path, url), null, "a slow mark is no back-off");
      assert.equal(activeSlowMark(path, url, Date.now() / 1000 + 21), null, "it runs out");
      assert.equal(slowMs(30_000), SLOW_MS);
      assert.equal(slowMs(0), 0);
      clearBackOff(path); // the service starting
      assert.equal(activeSlowMark(path, url), null);
    } finally {
      removeDir(dir);
    }
  });

  test("after a write timed out on a service that answers the probe, the next write makes no request", async () => {
    const dir = tempDir();
    // As the service answers while a long writer holds the store's write lock.
    const service = await fakeService({ "HEAD /": {}, "POST /ingest": "hang", "POST /recall": { block: "", items: [] } });
    try {
      const settings = settingsFor(
        { MEMORY_PLUGIN_URL: service.url, MEMORY_DB_PATH: join(dir, "m.db"), MEMORY_HOOK_BUDGET_S: "1" },
        { project: "acme-web" },
      );
      const memory = new MemoryPlugin(settings, dir, [], () => undefined);
      await prompt(memory, "ses_1", remember("the pool size is 20"));
      const writes = (): number => service.requests.filter((r) => r === "POST /ingest").length;
      assert.equal(writes(), 1);
      assert.notEqual(activeSlowMark(join(dir, "hooks.backoff.json"), service.url), null);
      assert.equal(activeBackOff(join(dir, "hooks.backoff.json"), service.url), null, "slow, not hung");

      // Another process's action (a new plugin) reads the same mark.
      const other = new MemoryPlugin(settings, dir, [], () => undefined);
      await prompt(other, "ses_2", remember("the deploy freeze starts friday at noon"));
      assert.equal(writes(), 1, "spooled without a request");
      // A recall still tries.
      const system = ["You are opencode.\n<env>\n  Working directory: /src/web\n</env>"];
      await other.chatMessage("ses_3", [{ type: "text", text: "how big is the pool?" } as MessagePart]);
      await other.systemTransform("ses_3", system);
      assert.equal(service.requests.filter((r) => r === "POST /recall").length, 1);

      const [first, second] = hookLog(dir);
      assert.equal(first?.["outcome"], "spooled");
      assert.match(String(first?.["detail"]), /slow, not hung, no back-off$/);
      assert.equal(second?.["outcome"], "spooled");
      assert.match(String(second?.["detail"]), /spooled without waiting/);
      assert.ok(second?.["ms"] < first?.["ms"] / 3, `${second?.["ms"]} vs ${first?.["ms"]}`);
      await other.dispose();
      await memory.dispose();
    } finally {
      await service.close();
      removeDir(dir);
    }
  });

  test("a write the service takes ends the mark", async () => {
    const dir = tempDir();
    const service = await fakeService({ "POST /ingest": { status: "new", uid: "u1" } });
    try {
      const settings = settingsFor({ MEMORY_PLUGIN_URL: service.url, MEMORY_DB_PATH: join(dir, "m.db") }, { project: "acme-web" });
      const path = join(dir, "hooks.backoff.json");
      markSlow(path, service.url, 1, "a moment ago"); // run out at once: the write is made
      await new Promise((resolve) => setTimeout(resolve, 10));
      const memory = new MemoryPlugin(settings, dir, [], () => undefined);
      await prompt(memory, "ses_1", remember("the pool size is 20"));
      assert.equal(hookLog(dir)[0]?.["outcome"], "stored");
      assert.throws(() => readFileSync(join(dir, "hooks.slow.json")), "the file is gone");
    } finally {
      await service.close();
      removeDir(dir);
    }
  });
});
