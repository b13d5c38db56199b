/**
 * A message over MESSAGE_CHARS is stored as its head and tail around `[… N characters left out
 * …]` (transcript.py's cut, characters counted as Python counts them). Against a real service.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { MESSAGE_CHARS, capped } from "../src/transcript.js";
import { Session } from "./capture_support.js";
import { suiteService } from "./support.js";

describe("a pasted message", () => {
  const service = suiteService();

  test("a pasted log of megabytes is stored as its head and tail", async () => {
    const s = new Session(service);
    const log = Array.from({ length: 60_000 }, (_, i) => `ERROR worker-${i % 8} PASTEWORD peer reset reading body #${i}\n`).join("");
    const prompt = `why does the worker keep dying?\n${log}`;
    s.say("user", prompt);
    s.say("assistant", "The upstream closes idle sockets after 30 s; lower the keep-alive to 25 s.");
    await s.idle();
    const contents = (await s.stored()).map((m) => m.content);
    assert.ok(contents.length > 20 && contents.length < 40, String(contents.length));
    const left = prompt.trim().length - MESSAGE_CHARS;
    assert.equal(contents.filter((c) => c.includes(`[… ${left} characters left out …]`)).length, 1);
    assert.ok(contents.some((c) => c.includes("body #59999")));
    assert.ok(!contents.some((c) => c.includes("body #30000\n")));
  });

  test("capped: head and tail in characters, astral ones counted once", () => {
    const half = MESSAGE_CHARS / 2;
    assert.equal(capped("🙂".repeat(MESSAGE_CHARS + 10)), `${"🙂".repeat(half)}\n[… 10 characters left out …]\n${"🙂".repeat(half)}`);
    assert.equal(capped("x".repeat(MESSAGE_CHARS)), "x".repeat(MESSAGE_CHARS));
  });
});
