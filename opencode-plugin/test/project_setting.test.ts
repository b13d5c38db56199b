/**
 * MEMORY_PROJECT as the Python hooks read it (harness/settings.py `project_setting`): blank is
 * unset, a name the service refuses is a problem and the project is detected.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { loadSettings } from "../src/settings.js";

describe("MEMORY_PROJECT", () => {
  test("a blank one is unset: the project is detected", () => {
    for (const blank of ["   ", "\t", " \u3000 "]) {
      const { settings, problems } = loadSettings({ MEMORY_PROJECT: blank });
      assert.deepEqual(problems, []);
      assert.equal(settings.project, "");
    }
    assert.equal(loadSettings({ MEMORY_PROJECT: "  shop  " }).settings.project, "shop");
  });

  test("a name the service refuses is a problem, never echoed; detection is used", () => {
    for (const [value, reason] of [
      ["x".repeat(257), "must be 1..256 characters"],
      ["a\nb", "must be one line (no newline, tab or NUL)"],
      ["a\tb", "must be one line (no newline, tab or NUL)"],
      ["<private>secret-name</private>", "must not hold <private> text"],
    ] as const) {
      const { settings, problems } = loadSettings({ MEMORY_PROJECT: value });
      assert.equal(settings.project, "");
      assert.deepEqual(problems.map((p) => p.message), [`MEMORY_PROJECT ${reason}; using the default`]);
      assert.ok(!problems[0]?.message.includes("secret-name"));
    }
    assert.equal(loadSettings({ MEMORY_PROJECT: "é".repeat(256) }).settings.project, "é".repeat(256));
  });
});
