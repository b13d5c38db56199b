/**
 * The review's fixes on the plugin's side: a remote on an IPv6-literal host keeps its address
 * whole and `.GIT` is `.git` on a caseless host (remotes.py `normalise_remote`); numeric
 * settings are read as Python's `int()` and `float()` read them, with the Python bounds. (Both
 * are compared with the Python side from pytest, tests/test_review_fixes.py.)
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { normaliseRemote } from "../src/project.js";
import { loadSettings, pythonFloat, pythonInt } from "../src/settings.js";

describe("review fixes", () => {
  test("an IPv6-literal host is kept whole: two servers, two projects", () => {
    assert.equal(normaliseRemote("https://[fd00::1]/team/app.git"), "[fd00::1]/team/app");
    assert.equal(normaliseRemote("ssh://git@[fd00::2]:2222/team/app.git"), "[fd00::2]/team/app");
    assert.equal(normaliseRemote("git@[FD00::1]:team/app.git"), "[fd00::1]/team/app");
    assert.equal(normaliseRemote("https://GitHub.com/Org/Repo.GIT"), "github.com/org/repo");
    assert.equal(normaliseRemote("https://git.corp/Team/App.GIT"), "git.corp/Team/App.GIT");
  });

  test("numbers are read as Python reads them", () => {
    for (const raw of ["0x10", "1e1", "5.0", "1__0", "\ufeff7", ""]) assert.ok(Number.isNaN(pythonInt(raw)), raw);
    assert.deepEqual(["7", " +7\u3000", "1_0", "\uff11\uff10", "-0"].map(pythonInt), [7, 7, 10, 10, 0]);
    for (const raw of ["0x2", "1_.5", "1e", "inf!"]) assert.ok(Number.isNaN(pythonFloat(raw)), raw);
    assert.deepEqual(["1.", ".5", "2e0", "1_0.5", "-inf"].map(pythonFloat), [1, 0.5, 2, 10.5, -Infinity]);
  });

  test("a settings value Python refuses is refused; the budget's maximum is Python's", () => {
    const { settings, problems } = loadSettings({
      MEMORY_PORT: "0x1F90", MEMORY_PLUGIN_LIMIT: "5.0", MEMORY_HOOK_BUDGET_S: "0x2",
      MEMORY_PLUGIN_BUDGET_CHARS: "1000000",
    });
    assert.deepEqual(problems.map((p) => p.name), ["MEMORY_PORT", "MEMORY_PLUGIN_LIMIT", "MEMORY_HOOK_BUDGET_S"]);
    assert.equal(settings.budgetChars, 1_000_000);
    assert.deepEqual(loadSettings({ MEMORY_PLUGIN_BUDGET_CHARS: "1000001" }).problems.map((p) => p.name),
      ["MEMORY_PLUGIN_BUDGET_CHARS"]);
    assert.equal(loadSettings({ MEMORY_HOOK_BUDGET_S: "2e0" }).settings.budgetMs, 2000);
  });
});
