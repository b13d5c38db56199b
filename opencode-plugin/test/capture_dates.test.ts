/**
 * Each exchange a flush stores is dated by its first user message's `time.created`, not by the
 * flush (transcript.py's rule); a time more than a day ahead of the clock, which the service
 * refuses, or none: the time it is stored. Against a real service.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { flushItems, transcriptTime } from "../src/transcript.js";
import { DAY_MS, MARCH_10, Session } from "./capture_support.js";
import { suiteService } from "./support.js";

describe("a flushed exchange's time", () => {
  const service = suiteService();

  test("an exchange is stored with the time its user message was written", async () => {
    const s = new Session(service);
    const today = new Date().toISOString().slice(0, 10);
    s.say("user", "why does the checkout test fail on CI?", MARCH_10);
    s.say("assistant", "The Redis fixture flushes keys between workers.", MARCH_10 + 5000);
    s.say("user", "what went wrong with migration 0042?", MARCH_10 + 60_000);
    s.say("assistant", "A long transaction held the lock on the orders table. ".repeat(60), MARCH_10 + 70_000);
    s.say("user", "which cluster hosts staging?", Date.now() + 3 * DAY_MS); // the service would refuse it
    s.say("assistant", "Staging runs on kube-stg-eu-west-1.");
    s.say("user", "where do the nightly backups go?"); // no time
    s.say("assistant", "Nightly backups go to s3://acme-backups/nightly.");
    await s.idle();
    const days = (await s.stored()).map((m) => [m.content.split("\n")[0], m.created_at.slice(0, 10)]);
    assert.deepEqual(days[0], ["User: why does the checkout test fail on CI?", "2025-03-10"]);
    const migration = days.slice(1, -2); // the long exchange's pieces
    assert.ok(migration.length > 2);
    assert.deepEqual(new Set(migration.map(([, day]) => day)), new Set(["2025-03-10"]));
    assert.deepEqual(days.slice(-2), [
      ["User: which cluster hosts staging?", today],
      ["User: where do the nightly backups go?", today],
    ]);
  });

  test("transcriptTime: milliseconds to seconds; none past a day ahead, before 1970, or not a number", () => {
    assert.equal(transcriptTime(MARCH_10), MARCH_10 / 1000);
    assert.ok((transcriptTime(Date.now() + DAY_MS / 2) ?? 0) > Date.now() / 1000);
    for (const bad of [Date.now() + 2 * DAY_MS, -1, Number.NaN, Infinity, "1741593601000", null, undefined, true]) {
      assert.equal(transcriptTime(bad), undefined, String(bad));
    }
  });

  test("flushItems: the first user turn dates its exchange; without one, the first reply", () => {
    assert.deepEqual(
      flushItems([
        { role: "assistant", text: "Resuming the earlier work on the billing exporter module.", at: 1 },
        { role: "user", text: "which port does it use?", at: 2 },
        { role: "user", text: "the metrics one", at: 3 },
        { role: "assistant", text: "9464, see otel/collector.yaml.", at: 4 },
      ]),
      [
        [{ content: "Assistant: Resuming the earlier work on the billing exporter module.", created_at: 1 }, 1],
        [{ content: "User: which port does it use?\n\nthe metrics one\nAssistant: 9464, see otel/collector.yaml.", created_at: 2 }, 1],
      ],
    );
  });
});
