/**
 * One machine, several people (peer.ts, as tests/test_other_users.py for the hooks): the
 * plugin sends nothing to a loopback listener another OS user owns, neither a write, a prompt
 * nor the token; the write waits in the spool for this user's own service. The other user is
 * tests/squatter.py, which drops to uid 65534 (run as root, or through `sudo -n`).
 */

import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { join, resolve } from "node:path";
import { describe, test } from "node:test";

import { answers, ServiceClient, ServiceForeign } from "../src/client.js";
import { MemoryPlugin } from "../src/memory.js";
import type { MessagePart } from "../src/messages.js";
import { prompt, hookLog, PACKAGE_ROOT, removeDir, settingsFor, tempDir } from "./support.js";

interface Squatter {
  port: number;
  /** Stops it; the bytes it was sent, all its connections together. */
  stop(): Promise<number>;
}

async function squatter(): Promise<Squatter> {
  const python = resolve(PACKAGE_ROOT, "..", ".venv", "bin", "python");
  const script = resolve(PACKAGE_ROOT, "..", "tests", "squatter.py");
  const command = process.getuid?.() === 0 ? [python, script] : ["sudo", "-n", python, script];
  const child: ChildProcessWithoutNullStreams = spawn(command[0]!, command.slice(1));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const port = Number((await lines.next()).value);
  assert.ok(port > 0, "the squatter did not start");
  return {
    port,
    async stop() {
      child.stdin.end("stop\n");
      return Number((await lines.next()).value);
    },
  };
}

describe("another user's process on the service's port", () => {
  test("is sent nothing: the remember waits in the spool, a probe says nothing answers", async () => {
    const dir = tempDir();
    const other = await squatter();
    let received = -1;
    try {
      // The port as MEMORY_PORT, the default port's case: no MEMORY_PLUGIN_URL.
      const settings = settingsFor({
        MEMORY_PORT: String(other.port), MEMORY_TOKEN: "alice-secret-0123456789", MEMORY_DB_PATH: join(dir, "m.db"),
      });
      const memory = new MemoryPlugin(settings, dir, [], () => undefined);
      await prompt(memory, "ses_1", [
        { type: "text", text: "remember that the staging DB_PASSWORD=Xk9vL2pQ7mZ4 lives in vault" } as MessagePart,
      ]);
      const [line] = hookLog(dir);
      assert.equal(line?.["outcome"], "spooled");
      assert.match(String(line?.["detail"]), /another user's \(uid 65534\): nothing was sent to it/);
      assert.equal(readdirSync(join(dir, "spool")).filter((name) => name.endsWith(".json")).length, 1);

      const url = `http://127.0.0.1:${other.port}`;
      await assert.rejects(new ServiceClient(url, "t").get("/health", performance.now() + 2000), ServiceForeign);
      assert.equal(await answers(url, "t"), false);
    } finally {
      received = await other.stop();
      removeDir(dir);
    }
    assert.equal(received, 0);
  });
});
