/**
 * Project names the service takes, by the Python rule (harness/project.py `bounded`,
 * `name_text`): a name over 256 characters shortened to its tail and a hash, bytes of a
 * folder's name that are not UTF-8 read as Python reads them. The expected values are Python's
 * own; parity on real repositories (worktrees, bare repositories, long remotes, folders not
 * UTF-8) is checked from pytest, tests/test_opencode_plugin.py.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { MAX_PROJECT_CHARS, bounded, fsdecode, nameText } from "../src/project.js";
import { length } from "../src/text.js";

describe("names over the service's limit", () => {
  test("are the tail from a component's start and a hash of the composed name, as Python's", () => {
    const cases: [string, string][] = [
      ["x".repeat(300), `\u2026${"x".repeat(246)}~0d4e2ca9`],
      [`/srv/${"r".repeat(150)}/${"s".repeat(150)}/origin`, `\u2026/${"s".repeat(150)}/origin~f6875503`],
      ["e\u0301".repeat(200) + "z".repeat(60), `\u2026${"\u00e9".repeat(186)}${"z".repeat(60)}~f2db23a4`],
      ["\u00e9".repeat(300), `\u2026${"\u00e9".repeat(246)}~7250b666`],
      // a tail that would read as an scp-like remote is the hash alone
      ["a".repeat(200) + "x@host:" + "p".repeat(100), "\u2026~986eaed8"],
    ];
    for (const [name, want] of cases) {
      const short = bounded(name);
      assert.equal(short, want, name.slice(0, 20));
      assert.ok(length(short) <= MAX_PROJECT_CHARS && length(short.normalize("NFC")) <= MAX_PROJECT_CHARS);
      assert.equal(bounded(short), short);
    }
  });

  test("a name that fits is kept, composed only when it fits only composed", () => {
    assert.equal(bounded("github.com/acme/app"), "github.com/acme/app");
    assert.equal(bounded("a".repeat(MAX_PROJECT_CHARS)), "a".repeat(MAX_PROJECT_CHARS));
    assert.equal(bounded("\u0958".repeat(100)), "\u0958".repeat(100)); // 200 once composed
    assert.equal(bounded("e\u0301".repeat(200)), "\u00e9".repeat(200));
    assert.equal(bounded("\ud83d\ude00".repeat(MAX_PROJECT_CHARS)), "\ud83d\ude00".repeat(MAX_PROJECT_CHARS));
  });
});

describe("names not UTF-8", () => {
  test("are read as os.fsdecode reads them, and named with U+FFFD as Node and name_text do", () => {
    const cases: [number[], string, string][] = [
      [[0x63, 0x61, 0x66, 0xe9], "caf\udce9", "caf\ufffd"],
      [[0xe2, 0x82, 0x41], "\udce2\udc82A", "\ufffdA"],
      [[0xed, 0xa0, 0x80, 0x78], "\udced\udca0\udc80x", "\ufffd\ufffd\ufffdx"],
      [[0xf0, 0x9f, 0x92, 0x80], "\ud83d\udc80", "\ud83d\udc80"],
      [[0xf4, 0x90, 0x80, 0x80], "\udcf4\udc90\udc80\udc80", "\ufffd\ufffd\ufffd\ufffd"],
      [[0xc0, 0xaf], "\udcc0\udcaf", "\ufffd\ufffd"],
    ];
    for (const [bytes, escaped, text] of cases) {
      assert.equal(fsdecode(Uint8Array.from(bytes)), escaped, escaped);
      assert.equal(nameText(escaped), text, escaped);
    }
  });
});
