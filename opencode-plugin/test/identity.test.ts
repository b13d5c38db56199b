/**
 * Which repository a remote names: a git config value as git reads it, and the well-known
 * spellings of one repository's remote. (Parity of every case with the Python hooks is checked
 * from pytest, tests/test_fixbatch_d_remotes.py.)
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { gitValue, normaliseRemote } from "../src/project.js";

describe("git config values", () => {
  test("quotes go, a comment outside them ends the value, escapes are read", () => {
    assert.equal(gitValue('"https://github.com/acme/shop.git"'), "https://github.com/acme/shop.git");
    assert.equal(gitValue("https://github.com/acme/shop.git ; mirror"), "https://github.com/acme/shop.git");
    assert.equal(gitValue("https://h/x   # note"), "https://h/x");
    assert.equal(gitValue('"a ; b" # c'), "a ; b");
    assert.equal(gitValue('a \t "b  c"  d\t'), "a   b  c  d"); // as `git config` reads it
    assert.equal(gitValue('x\\"y\\\\z'), 'x"y\\z');
    assert.equal(gitValue("plain"), "plain");
  });
});

describe("remote spellings of one repository", () => {
  test("SSH host aliases and Azure DevOps' forms name the HTTPS clone's project", () => {
    for (const url of ["git@github.com-work:Acme/Shop.git", "ssh://git@ssh.github.com:443/acme/shop.git"]) {
      assert.equal(normaliseRemote(url), "github.com/acme/shop", url);
    }
    for (const url of [
      "https://dev.azure.com/org/proj/_git/repo",
      "git@ssh.dev.azure.com:v3/org/proj/repo",
      "https://org.visualstudio.com/proj/_git/repo",
    ]) {
      assert.equal(normaliseRemote(url), "dev.azure.com/org/proj/repo", url);
    }
    assert.equal(normaliseRemote("file:///srv/git/lib.git"), normaliseRemote("/srv/git/lib.git"));
    assert.equal(normaliseRemote("git@github.company.com:Acme/Shop.git"), "github.company.com/Acme/Shop");
  });
});
