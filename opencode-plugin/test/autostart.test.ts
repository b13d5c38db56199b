/**
 * The autostarted service's log, `service.log` beside the db, is rotated as the plugin spawns a
 * service, as the Python hooks' autostart rotates it (autostart.py `rotate_log`): over
 * LOG_MAX_BYTES it moves to `service.log.1`, replacing the copy before. A real detached service.
 * On a machine several users share, the data folder the plugin makes first (its autostart, its
 * hook log) is 0700 and the log and lock 0600 under umask 022 (it was 0755: docs/security.md).
 */

import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";

import { LOG_MAX_BYTES, startService } from "../src/autostart.js";
import { record } from "../src/outcomes.js";
import { cleanEnv, memoryMcpBin, removeDir, settingsFor, tempDir } from "./support.js";

/** The plugin's autostart in `dir`; the started service's pid, once its discovery file names it. */
async function autostart(dir: string): Promise<number> {
  const db = join(dir, "memory.db");
  const settings = settingsFor(cleanEnv({ MEMORY_DB_PATH: db, MEMORY_DEVICE: "cpu" }), { command: memoryMcpBin() });
  const started = await startService(settings, 30_000);
  assert.equal(started.how, "started");
  for (let i = 0; i < 200; i++) {
    try {
      const info = JSON.parse(readFileSync(`${db}.server.json`, "utf8")) as { url: string; pid: number };
      if (info.url.replace(/\/+$/, "") === started.url) return info.pid;
    } catch {
      // not written yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("the started service wrote no discovery file");
}

async function stop(pid: number): Promise<void> {
  process.kill(pid, "SIGTERM");
  for (let i = 0; i < 200; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("autostart's service.log", () => {
  test("one grown past LOG_MAX_BYTES is moved to service.log.1, replacing the copy before", async () => {
    const dir = tempDir();
    const [log, older] = [join(dir, "service.log"), join(dir, "service.log.1")];
    const line = "an old service's line\n";
    const grown = line.repeat(Math.floor(LOG_MAX_BYTES / line.length) + 1);
    writeFileSync(log, grown);
    writeFileSync(older, "the copy before that\n");
    const pid = await autostart(dir);
    try {
      assert.equal(LOG_MAX_BYTES, 5_000_000); // autostart.py's
      assert.ok(readFileSync(older, "utf8") === grown, "service.log.1 is the grown log");
      assert.ok(!readFileSync(log, "utf8").includes(line) && statSync(log).size < LOG_MAX_BYTES);
    } finally {
      await stop(pid);
      removeDir(dir);
    }
  });

  test("one under it is appended to", async () => {
    const dir = tempDir();
    const log = join(dir, "service.log");
    writeFileSync(log, "an earlier start's line\n");
    const pid = await autostart(dir);
    try {
      assert.ok(readFileSync(log, "utf8").startsWith("an earlier start's line\n"));
      assert.equal(existsSync(join(dir, "service.log.1")), false);
    } finally {
      await stop(pid);
      removeDir(dir);
    }
  });
});

/** `path`'s permission bits. */
function mode(path: string): number {
  return statSync(path).mode & 0o777;
}

/** `fn` run under umask 022, the usual one (the service it spawns inherits it). */
async function underUmask022<T>(fn: () => Promise<T>): Promise<T> {
  const before = process.umask(0o022);
  try {
    return await fn();
  } finally {
    process.umask(before);
  }
}

describe("the data folder the plugin makes first, under umask 022", () => {
  test("autostart makes it 0700, its log and lock 0600", async () => {
    const dir = tempDir();
    const folder = join(dir, "home", ".local", "share", "memory-mcp");
    const pid = await underUmask022(() => autostart(folder));
    try {
      assert.equal(mode(folder).toString(8), "700");
      for (const name of ["service.log", "autostart.lock"]) {
        assert.equal(mode(join(folder, name)).toString(8), "600", name);
      }
    } finally {
      await stop(pid);
      removeDir(dir);
    }
  });

  test("the hook log makes it 0700, itself 0600", async () => {
    const dir = tempDir();
    const folder = join(dir, "fresh");
    await underUmask022(async () =>
      record(join(folder, "hooks.jsonl"), {
        harness: "opencode", event: "chat.message", outcome: "skipped", detail: "a test",
        session: null, project: null, ms: 0,
      }),
    );
    try {
      assert.deepEqual(readdirSync(folder), ["hooks.jsonl"]);
      assert.equal(mode(folder).toString(8), "700");
      assert.equal(mode(join(folder, "hooks.jsonl")).toString(8), "600");
    } finally {
      removeDir(dir);
    }
  });
});
