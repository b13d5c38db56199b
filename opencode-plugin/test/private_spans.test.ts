/**
 * `<private>` across the messages of a session, as the hooks read it (tests/test_private_spans.py):
 * a span a user message opens and a later one closes hides everything between, the replies in it
 * included, and the later closing tag closes it (it was dropped as stray, keeping what preceded
 * it). Through idle flushes (one after each reply: the span crosses them), a compaction's flush
 * and the recall query, against a real service.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { type MemoryPlugin, stripPrivateFrom } from "../src/memory.js";
import type { SessionMessage } from "../src/messages.js";
import { call, memories, pluginFor, suiteService } from "./support.js";

const NAME = "Rosalind Vexley";
const PHONE = "020 7946 0311";
const EMAIL = "r.vexley@example.co.uk";
const AGENT_SYSTEM = "You are opencode.\n<env>\n  Working directory: /src/web\n</env>";
const PROJECT = "acme-spans";

let counter = 0;

/** One opencode session as its bus events tell it to a plugin (idle.test.ts). */
class Events {
  readonly messages: SessionMessage[] = [];
  constructor(readonly plugin: MemoryPlugin, readonly id = `ses_span${++counter}`) {
    plugin.event("session.created", { info: { id } });
  }

  say(role: "user" | "assistant", text: string): void {
    const messageID = `msg_${String(++counter).padStart(6, "0")}`;
    const info = { id: messageID, sessionID: this.id, role };
    const part = { id: `prt_${counter}`, sessionID: this.id, messageID, type: "text", text };
    this.plugin.event("message.updated", { info });
    this.plugin.event("message.part.updated", { part });
    this.plugin.event("message.updated", { info: { ...info, finish: "stop" } });
    this.messages.push({ info, parts: [part] } as unknown as SessionMessage);
  }

  async idle(): Promise<void> {
    this.plugin.event("session.idle", { sessionID: this.id });
    await this.plugin.dispose();
  }
}

test("a message read inside a span (the cases of tests/test_private_spans.py)", () => {
  const cases: [string, number, string, number][] = [
    ["no tags", 0, "no tags", 0],
    ["no tags, inside a span", 1, "", 1],
    [`a <private>${NAME}`, 0, "a ", 1],
    [`${PHONE}</private> b`, 1, " b", 0],
    [`${PHONE}</private> b</private> c`, 1, " b c", 0],
    [`x <private>${NAME}</private> y`, 0, "x  y", 0],
    [`${NAME}</private> x <private>${PHONE}`, 1, " x ", 1],
    [`a <private>b <private>${NAME}`, 0, "a ", 2],
    [`${NAME}</private> still ${PHONE}`, 2, "", 1],
    [`${NAME}\uff1c/private\uff1e b`, 1, " b", 0],
    // an unfinished tag after the last ">" is text: it opens nothing
    [`a <private>${NAME}</private> <private reason`, 0, "a  <private reason", 0],
    [`<pri\u200bvate>${NAME}`, 0, "", 1],
  ];
  for (const [text, depth, kept, open] of cases) assert.deepEqual(stripPrivateFrom(text, depth), [kept, open], text);
});

describe("a span across messages", () => {
  const service = suiteService();

  function plugin(): MemoryPlugin {
    return pluginFor(service.url, service.dir, { project: PROJECT });
  }

  async function storedFor(session: Events): Promise<string> {
    return (await memories(service.url, "compaction"))
      .filter((m) => m.session === `opencode:${session.id}`)
      .map((m) => m.content)
      .join("\n");
  }

  function assertNothingPrivate(text: string): void {
    for (const secret of [NAME, "Rosalind", PHONE, EMAIL]) assert.ok(!text.includes(secret), text);
  }

  test("idle flushes: the span crosses them, and the closing tag closes it", async () => {
    const session = new Events(plugin());
    session.say("user", `Here is the customer record, keep it out of memory: <private>Name: ${NAME}`);
    session.say("assistant", `Understood, ${NAME}'s record is noted for this session only.`);
    await session.idle();
    session.say("user", `Phone ${PHONE}, email ${EMAIL}</private> Now please fix the invoice bug.`);
    session.say("assistant", "Fixed the invoice rounding bug in billing.py.");
    await session.idle();
    const stored = await storedFor(session);
    assert.match(stored, /fix the invoice bug/);
    assertNothingPrivate(stored);
  });

  test("a compaction's flush, and the recall query of a prompt that closes the span", async () => {
    await call(service.url, "POST", "/ingest", { content: "The invoice rounding bug lives in billing.py", project: PROJECT });
    const prompt = `Phone ${PHONE}, email ${EMAIL}</private> where is the invoice rounding bug?`;
    // As opencode drives it: chat.message, then the messages transform of the model call.
    const memory = plugin();
    const session = new Events(memory);
    session.say("user", `Customer record: <private>Name: ${NAME}`);
    await memory.chatMessage(session.id, session.messages[0]?.parts ?? []);
    await memory.messagesTransform(session.messages);
    session.say("assistant", `Noted, ${NAME}.`);
    session.say("user", prompt);
    await memory.chatMessage(session.id, session.messages[2]?.parts ?? []);
    const system = [AGENT_SYSTEM];
    await memory.systemTransform(session.id, system);
    assert.match(system[1] ?? "", /billing\.py/);
    session.say("assistant", "In billing.py, the rounding of line totals.");
    memory.compacting(session.id);
    await memory.messagesTransform(session.messages);
    await memory.dispose();
    const stored = await storedFor(session);
    assert.match(stored, /where is the invoice rounding bug/);
    assertNothingPrivate(stored);
    // A plugin that meets the session only at a messages transform (a new opencode process).
    const later = plugin();
    await later.messagesTransform(session.messages.slice(0, 3));
    const recalled = [AGENT_SYSTEM];
    await later.systemTransform(session.id, recalled);
    assert.match(recalled[1] ?? "", /billing\.py/);
    await later.dispose();
    const injections = (await call(service.url, "GET", `/api/injections?project=${PROJECT}&limit=100`)).items;
    const queries = injections.map((i: { query: string }) => i.query);
    assert.deepEqual(queries, ["where is the invoice rounding bug?", "where is the invoice rounding bug?"]);
  });

  test("a mention of the tag pauses memory for two messages, says so, then lapses", async () => {
    await call(service.url, "POST", "/ingest", { content: "The invoice rounding bug lives in billing.py", project: PROJECT });
    const memory = plugin();
    const session = new Events(memory);
    async function prompt(text: string): Promise<string> {
      session.say("user", text);
      await memory.chatMessage(session.id, session.messages[session.messages.length - 1]?.parts ?? []);
      await memory.messagesTransform(session.messages);
      const system = [AGENT_SYSTEM];
      await memory.systemTransform(session.id, system);
      session.say("assistant", "Answered.");
      return system.slice(1).join("\n");
    }
    assert.doesNotMatch(await prompt("Quick question: does wrapping text in <private> keep it out of memory?"), /paused/);
    const paused = await prompt("where is the invoice rounding bug?");
    assert.match(paused, /semantic-memory is paused/);
    assert.doesNotMatch(paused, /billing\.py/);
    assert.match(await prompt("remember: the staging proxy listens on port 8443"), /did NOT store the user's "remember" message/);
    const resumed = await prompt("where is the invoice rounding bug?");
    assert.match(resumed, /billing\.py/);
    assert.doesNotMatch(resumed.split("did NOT store")[0] ?? "", /is paused/);
    memory.compacting(session.id);
    await memory.messagesTransform(session.messages);
    await memory.dispose();
    const stored = await storedFor(session);
    assert.match(stored, /where is the invoice rounding bug/); // the exchange after the lapse
    assert.doesNotMatch(stored, /8443/); // what was hidden stays hidden
  });
});
