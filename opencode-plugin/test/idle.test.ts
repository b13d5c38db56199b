/**
 * A session that never compacts is stored too: the plugin hears the conversation from
 * opencode's message events and flushes what was answered when the session goes idle (the end
 * of each agent turn) or is deleted, each message once. Events as opencode 1.18 sends them to
 * a plugin: `message.updated` with the message's info, `message.part.updated` with a part's
 * whole text so far (empty as it starts), then `session.idle`.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { MAX_SESSIONS, type MemoryPlugin } from "../src/memory.js";
import type { SessionMessage } from "../src/messages.js";
import { fakeService, hookLog, memories, pluginFor, removeDir, suiteService, tempDir } from "./support.js";

const PROJECT = "acme-web";
const QUESTION = "why does the checkout integration test keep failing on CI?";
const REDIS =
  "The flaky checkout test fails because the Redis fixture flushes keys between workers; pin the fixture to database 7.";
const DEPLOY = "how do we deploy the web app to staging?";
const MAKE = "Run make deploy-staging from the repository root; it builds the image and rolls the pods.";

let counter = 0;

/** One opencode session as its bus events tell it to a plugin. */
class Events {
  /** The messages so far, as a messages transform (a compaction's) would hand them over. */
  readonly messages: SessionMessage[] = [];
  constructor(
    readonly plugin: MemoryPlugin,
    readonly id = `ses_idle${++counter}`,
    parentID?: string,
  ) {
    plugin.event("session.created", { info: { id, ...(parentID ? { parentID } : {}) } });
  }

  /** A message with one text part, its events in opencode's order; its id. */
  say(role: "user" | "assistant", text: string): string {
    const messageID = `msg_${String(++counter).padStart(6, "0")}`;
    const info = { id: messageID, sessionID: this.id, role };
    this.plugin.event("message.updated", { info });
    this.plugin.event("message.part.updated", { part: { id: `prt_${counter}s`, sessionID: this.id, messageID, type: "step-start" } });
    const part = { id: `prt_${counter}`, sessionID: this.id, messageID, type: "text" };
    this.plugin.event("message.part.updated", { part: { ...part, text: "" } }); // a reply starts empty
    this.plugin.event("message.part.updated", { part: { ...part, text } });
    this.plugin.event("message.updated", { info: { ...info, finish: "stop" } });
    this.messages.push({ info, parts: [{ ...part, text }] } as unknown as SessionMessage);
    return messageID;
  }

  /** `session.idle`, then whatever the plugin started for it has finished. */
  async idle(): Promise<void> {
    this.plugin.event("session.idle", { sessionID: this.id });
    await this.plugin.dispose();
  }
}

describe("idle and deleted sessions", () => {
  const service = suiteService();

  function plugin(url = service.url, logDir = service.dir): MemoryPlugin {
    return pluginFor(url, logDir, { project: PROJECT });
  }

  function flushLog(session: Events): [string, string, string][] {
    return hookLog(service.dir)
      .filter((e) => String(e["session"]).startsWith(`${session.id}@`) && e["event"] !== "chat.message")
      .map((e) => [e["event"], e["outcome"], e["detail"]]);
  }

  async function storedFor(session: Events): Promise<string[]> {
    return (await memories(service.url, "compaction"))
      .filter((m) => m.session === `opencode:${session.id}`)
      .map((m) => m.content)
      .sort();
  }

  test("each answered exchange is stored when the session goes idle, once, then nothing more is sent", async () => {
    const session = new Events(plugin());
    session.say("user", `"${QUESTION}"`); // `opencode run "…"` quotes the prompt
    await session.idle(); // unanswered yet (the model call failed): kept for its answer
    assert.deepEqual(flushLog(session), []);
    const reply = session.say("assistant", REDIS);
    await session.idle();
    const first = `User: ${QUESTION}\nAssistant: ${REDIS}`;
    assert.deepEqual(await storedFor(session), [first]);
    const [memory] = (await memories(service.url, "compaction")).filter((m) => m.content === first);
    assert.equal(memory.kind, "note");
    assert.ok(memory.tags.includes("harness:opencode"));
    assert.ok(memory.tags.some((t: string) => t.startsWith(`session:${session.id}@`)));

    // Idle again with nothing new, and a late update of a message flushed already: no request.
    await session.idle();
    session.plugin.event("message.updated", { info: { id: reply, sessionID: session.id, role: "assistant" } });
    session.plugin.event("message.part.updated", { part: { id: "prt_late", sessionID: session.id, messageID: reply, type: "text", text: REDIS } });
    await session.idle();
    assert.deepEqual(flushLog(session), [["session.idle", "stored", "1 chunks: 1 new, 0 already stored, 0 refused"]]);

    // The next turn sends only itself.
    session.say("user", DEPLOY);
    session.say("assistant", MAKE);
    await session.idle();
    assert.deepEqual(await storedFor(session), [first, `User: ${DEPLOY}\nAssistant: ${MAKE}`].sort());

    // A compaction of the whole session then: the service answers both stored already.
    session.plugin.compacting(session.id);
    await session.plugin.messagesTransform(session.messages);
    await session.idle(); // what the compaction took, an idle flush does not send again
    assert.deepEqual(flushLog(session).slice(1), [
      ["session.idle", "stored", "1 chunks: 1 new, 0 already stored, 0 refused"],
      ["experimental.session.compacting", "stored", "2 chunks: 0 new, 2 already stored, 0 refused"],
    ]);
    assert.equal((await storedFor(session)).length, 2);
  });

  test("a deleted session's exchanges are stored before its state goes; a subagent's are not", async () => {
    const session = new Events(plugin());
    const [asked, answer] = ["where do the nightly backups go?", "They go to the s3://acme-backups bucket, kept for 30 days."];
    session.say("user", asked);
    session.say("assistant", answer);
    session.say("user", "and the weekly ones?"); // never answered: nothing to pair it with
    const child = new Events(session.plugin, `ses_idle${++counter}`, session.id);
    child.say("user", "Find where the staging deploy target is defined in the Makefile.");
    child.say("assistant", "The deploy-staging target is defined at Makefile line 42, calling scripts/deploy.sh.");
    await child.idle();
    session.plugin.event("session.deleted", { info: { id: session.id } });
    await session.plugin.dispose();
    assert.deepEqual(await storedFor(session), [`User: ${asked}\nAssistant: ${answer}`]);
    assert.deepEqual(await storedFor(child), []);
    assert.deepEqual(flushLog(session), [["session.deleted", "stored", "1 chunks: 1 new, 0 already stored, 0 refused"]]);
    assert.deepEqual(flushLog(child), []);
  });

  test("a session pushed out of the tracked ones by newer sessions has its exchanges stored first", async () => {
    const session = new Events(plugin());
    const [asked, answer] = ["which node version does CI pin?", "CI pins Node 20.19 through the .nvmrc file at the repository root."];
    session.say("user", asked);
    session.say("assistant", answer); // answered, but the session never goes idle
    // as many newer sessions, each heard from (an unanswered prompt: nothing of theirs is stored)
    for (let i = 0; i < MAX_SESSIONS; i++) new Events(session.plugin).say("user", "still thinking");
    await session.plugin.dispose();
    assert.deepEqual(await storedFor(session), [`User: ${asked}\nAssistant: ${answer}`]);
    assert.deepEqual(flushLog(session), [["session.idle", "stored", "1 chunks: 1 new, 0 already stored, 0 refused"]]);
  });

  test("repeated idles cost one request for what is new and none otherwise", async () => {
    const logDir = tempDir();
    const fake = await fakeService({ "POST /ingest": { new: 1, duplicate: 0, rejected: 0 } });
    try {
      const session = new Events(plugin(fake.url, logDir));
      session.say("user", QUESTION);
      session.say("assistant", REDIS);
      for (let i = 0; i < 3; i++) await session.idle();
      assert.deepEqual(fake.requests, ["POST /ingest"]);
      session.say("user", "ok");
      session.say("assistant", "Done."); // too short to be worth a memory: nothing to send
      await session.idle();
      assert.deepEqual(fake.requests, ["POST /ingest"]);
    } finally {
      await fake.close();
      removeDir(logDir);
    }
  });
});
