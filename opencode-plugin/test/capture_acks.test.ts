/**
 * An exchange whose user message only acknowledges ("thanks!", "ok", "continue", "lgtm") and whose
 * reply is short is not stored; a short question's short answer is (transcript.py's rule).
 * Against a real service.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { acknowledges } from "../src/transcript.js";
import { MARCH_10, Session } from "./capture_support.js";
import { suiteService } from "./support.js";

describe("acknowledgements", () => {
  const service = suiteService();

  test("an exchange that only acknowledges is left out; a short question's answer is kept", async () => {
    const s = new Session(service);
    for (const [user, reply] of [
      ["thanks!", "You're welcome! Let me know if you need anything else."],
      ["ok", "Great, I'll proceed with the next step then."],
      ["which port?", "5432"],
      ["continue", "Continuing with the refactor now."],
      ["lgtm", "Thanks! I've committed the change and pushed it."],
    ] as const) {
      s.say("user", user, MARCH_10);
      s.say("assistant", reply, MARCH_10);
    }
    await s.idle();
    assert.deepEqual((await s.stored()).map((m) => m.content), ["User: which port?\nAssistant: 5432"]);
  });

  test("what is an acknowledgement, and what is not", () => {
    for (const ack of ["ok", "OK.", "Thank you very much!", "lgtm 👍", "👍", "lgtm, continue", "谢谢！"]) {
      assert.ok(acknowledges(ack), ack);
    }
    for (const other of ["which port?", "ok?", "no", "fix it", "yes", "go ahead", "okthanks", "", "ok ".repeat(40)]) {
      assert.ok(!acknowledges(other), other);
    }
  });
});
