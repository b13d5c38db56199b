/**
 * The shipped file, semantic-memory.js: what the sources build to (a stale bundle would ship
 * old behaviour), and a module opencode loads as exactly one plugin with the hooks it needs.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, test } from "node:test";

import type { Hooks, PluginInput } from "@opencode-ai/plugin";

import { PACKAGE_ROOT, closedPort, hookLog, removeDir, tempDir } from "./support.js";

const BUNDLE = join(PACKAGE_ROOT, "semantic-memory.js");

describe("the bundle", () => {
  test("is what the sources build to (run `npm run build` after changing src/)", () => {
    const dir = tempDir();
    try {
      const fresh = join(dir, "semantic-memory.js");
      execFileSync(process.execPath, [join(PACKAGE_ROOT, "scripts", "build.mjs"), fresh]);
      assert.ok(readFileSync(BUNDLE, "utf8") === readFileSync(fresh, "utf8"),
        "semantic-memory.js is stale: run `npm run build` in opencode-plugin/");
    } finally {
      removeDir(dir);
    }
  });

  test("default-exports one plugin whose hooks run (fail-open without a service)", async () => {
    const module = (await import(pathToFileURL(BUNDLE).href)) as {
      default: { id: string; server: (input: PluginInput, options?: Record<string, unknown>) => Promise<Hooks> };
    };
    assert.equal(module.default.id, "semantic-memory");
    const dir = tempDir();
    const saved = { ...process.env };
    try {
      for (const key of Object.keys(process.env)) if (key.startsWith("MEMORY_")) delete process.env[key];
      process.env["MEMORY_DB_PATH"] = join(dir, "memory.db");
      const hooks = await module.default.server({ directory: dir } as PluginInput,
        { url: `http://127.0.0.1:${await closedPort()}`, project: "p" });
      assert.deepEqual(Object.keys(hooks).sort(), [
        "chat.message", "dispose", "event", "experimental.chat.messages.transform",
        "experimental.chat.system.transform", "experimental.session.compacting", "tool.execute.after",
      ]);
      const system = ["<env>\n  Working directory: /x\n</env>"];
      const parts = [{ id: "prt_1", sessionID: "ses_1", messageID: "msg_1", type: "text", text: "hello there" }];
      await hooks["chat.message"]?.({ sessionID: "ses_1" }, { message: {}, parts } as never);
      await hooks["experimental.chat.system.transform"]?.({ sessionID: "ses_1" } as never, { system });
      assert.equal(system.length, 1);
      assert.deepEqual(hookLog(dir).map((e) => [e["harness"], e["outcome"], e["project"]]),
        [["opencode", "service down", "p"]]);
    } finally {
      process.env = saved;
      removeDir(dir);
    }
  });
});
