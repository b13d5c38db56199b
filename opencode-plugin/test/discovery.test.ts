/**
 * The discovery file is read with the service's own rule (lite.py `read_discovery`): a file
 * whose pid the system has given to another program since its service died (a hard kill, a
 * reboot) is stale, told by the process start time the service wrote (`proc_start`, /proc's
 * 22nd field). A real service, a real foreign process holding the pid.
 */

import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { readDiscovery, resolveUrl, storeIdentity, storeTag } from "../src/client.js";
import { loadSettings } from "../src/settings.js";
import { removeDir, startService, tempDir, type Service } from "./support.js";

describe("discovery file", () => {
  let service: Service;
  let other: ChildProcess;
  let written: Record<string, unknown>;

  before(async () => {
    service = await startService();
    // Started after the service, as a program given a dead service's pid is.
    other = spawn(process.execPath, ["-e", "setTimeout(() => {}, 120_000)"], { stdio: "ignore" });
    written = JSON.parse(readFileSync(join(service.dir, "memory.db.server.json"), "utf8")) as Record<string, unknown>;
  });

  after(async () => {
    other.kill();
    await service.stop();
    removeDir(service.dir);
  });

  test("names the live service; a pid another program holds now is stale", () => {
    const dir = tempDir();
    try {
      const db = join(dir, "memory.db");
      const path = `${db}.server.json`;
      const settings = loadSettings({ MEMORY_DB_PATH: db, MEMORY_PORT: "1" }).settings;
      // Found by the port alone, the address carries the store MEMORY_DB_PATH names; found by the file, none.
      const store = { tag: storeTag(storeIdentity("", db)), identity: storeIdentity("", db) };
      assert.equal(typeof written["proc_start"], "number");
      // As copied with its data folder: it names the original db's service, not this db's.
      writeFileSync(path, JSON.stringify(written));
      assert.equal(readDiscovery(path)?.stale, false);
      assert.equal(readDiscovery(path, db)?.stale, true);
      assert.deepEqual(resolveUrl(settings), { url: "http://127.0.0.1:1", origin: "MEMORY_PORT", store });
      // This db's service (its db_path is this db).
      writeFileSync(path, JSON.stringify({ ...written, db_path: db }));
      assert.equal(readDiscovery(path, db)?.stale, false);
      assert.deepEqual(resolveUrl(settings), { url: service.url.replace(/\/+$/, ""), origin: `discovery file ${path}`, store: null });
      // A service killed hard, its pid now another program's: alive, but not the service.
      writeFileSync(path, JSON.stringify({ ...written, db_path: db, pid: other.pid }));
      assert.equal(readDiscovery(path)?.stale, true);
      assert.deepEqual(resolveUrl(settings), { url: "http://127.0.0.1:1", origin: "MEMORY_PORT", store });
      // An older release wrote no start time (nor does a system without /proc): only whether the pid lives.
      const { proc_start: _, ...older } = written;
      writeFileSync(path, JSON.stringify({ ...older, pid: other.pid }));
      assert.equal(readDiscovery(path)?.stale, false);
    } finally {
      removeDir(dir);
    }
  });
});
