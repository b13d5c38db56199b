/**
 * A session continued in a new opencode process (`opencode run --continue`, a TUI restarted on
 * it): the new plugin meets the session's earlier messages only at its first messages transform,
 * after `chat.message` of the new prompt. What the earlier messages left open must still count:
 * a "remember" inside a carried span is not stored (the model is told), and the visible text
 * before `<private>` whose reply the span hid is stored joined to the next prompt, as the hooks
 * store it re-reading the transcript. `opencode run "…"` wraps each prompt in quotes: a span
 * must not leave one behind. Against a real service.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import type { MemoryPlugin } from "../src/memory.js";
import type { SessionMessage } from "../src/messages.js";
import { hookLog, memories, pluginFor, suiteService } from "./support.js";

const AGENT_SYSTEM = "You are opencode.\n<env>\n  Working directory: /src/web\n</env>";
const PROJECT = "acme-later";
const SECRETS = ["Orla", "Pennyworth", "Rosalind", "Vexley", "7946"];

let counter = 0;

/** One session, driven as opencode drives a plugin; `plugin` is the process it runs in now. */
class Session {
  readonly messages: SessionMessage[] = [];
  readonly id = `ses_later${++counter}`;
  constructor(public plugin: MemoryPlugin) {
    plugin.event("session.created", { info: { id: this.id } });
  }

  private say(role: "user" | "assistant", text: string): SessionMessage {
    const messageID = `msg_${String(++counter).padStart(6, "0")}`;
    const info = { id: messageID, sessionID: this.id, role, time: { created: Date.now() } };
    const part = { id: `prt_${counter}`, sessionID: this.id, messageID, type: "text", text };
    this.plugin.event("message.updated", { info });
    this.plugin.event("message.part.updated", { part });
    const message = { info, parts: [part] } as unknown as SessionMessage;
    this.messages.push(message);
    return message;
  }

  /** A prompt, its model call and reply, then idle; what the plugin added to the system prompt. */
  async turn(prompt: string, reply: string): Promise<string> {
    const { parts } = this.say("user", prompt);
    await this.plugin.chatMessage(this.id, parts);
    await this.plugin.messagesTransform(this.messages);
    const system = [AGENT_SYSTEM];
    await this.plugin.systemTransform(this.id, system);
    this.say("assistant", reply);
    this.plugin.event("session.idle", { sessionID: this.id });
    await this.plugin.dispose();
    return system.slice(1).join("\n");
  }
}

describe("a session continued in a new opencode process", () => {
  const service = suiteService();

  function plugin(): MemoryPlugin {
    return pluginFor(service.url, service.dir, { project: PROJECT });
  }

  async function stored(session: Session, source: string): Promise<string[]> {
    return (await memories(service.url, source)).filter((m) => m.session === `opencode:${session.id}`).map((m) => m.content);
  }

  test("a 'remember' inside a span the first process's message opened is not stored, and the model is told", async () => {
    const session = new Session(plugin());
    await session.turn('"the vault setup <private> is done by Orla Pennyworth"', "Noted.");
    session.plugin = plugin(); // `opencode run --continue`: chat.message comes before any transform
    const added = await session.turn('"remember that the vault PIN is 4417"', "Understood.");
    assert.match(added, /semantic-memory did NOT store the user's "remember" message: it is not remembered\. semantic-memory is paused/);
    assert.deepEqual(await stored(session, "chat"), []);
    const line = hookLog(service.dir).filter((e) => e["event"] === "chat.message" && e["session"]?.startsWith(session.id)).at(-1);
    assert.equal(line?.["outcome"], "skipped");
    assert.match(String(line?.["detail"]), /inside a <private> span an earlier message opened: not remembered/);
    // Once the span has lapsed, a "remember" is stored again (in the same new process).
    await session.turn("what next?", "Nothing.");
    assert.match(await session.turn("remember that the vault audit is on Mondays", "Noted."), /stored the user's "remember" message/);
    assert.deepEqual(await stored(session, "chat"), ["the vault audit is on Mondays"]);
  });

  test("a span closing inside a quoted `opencode run` prompt leaves no quote in the stored exchange", async () => {
    const session = new Session(plugin());
    await session.turn('"the invoice job is slow <private> customer Rosalind Vexley"', "Noted, Rosalind Vexley.");
    session.plugin = plugin();
    await session.turn('"her phone is 020 7946 0311 </private> so which queue does the invoice job use?"',
      "The invoice job runs on the billing-low queue.");
    const [exchange, ...more] = await stored(session, "compaction");
    assert.deepEqual(more, []);
    assert.ok(exchange !== undefined && !exchange.includes('"'), exchange);
    for (const secret of SECRETS) assert.ok(!exchange.includes(secret), exchange);
  });

  test("the visible text before <private>, its reply hidden, is stored joined to the next prompt (a new process)", async () => {
    const session = new Session(plugin());
    await session.turn('"the export job is slow <private> customer Rosalind Vexley"', "Noted, Rosalind Vexley.");
    session.plugin = plugin();
    await session.turn('"her phone is 020 7946 0311 </private> so which queue does the export job use?"',
      "The export job runs on the reports queue.");
    assert.deepEqual(await stored(session, "compaction"), [
      "User: the export job is slow\n\nso which queue does the export job use?\nAssistant: The export job runs on the reports queue.",
    ]);
  });

  test("the same in one process: the prompt waits for the next exchange's flush, once", async () => {
    const session = new Session(plugin());
    await session.turn("we are debugging the billing job <private> the customer is Rosalind Vexley", "Noted.");
    session.plugin.event("session.idle", { sessionID: session.id }); // nothing new: nothing sent again
    await session.plugin.dispose();
    await session.turn("her account id is ACCT-77341 </private> which port does staging use?", "Port 5433.");
    await session.turn("and the billing job owner?", "The payments team owns it.");
    assert.deepEqual((await stored(session, "compaction")).sort(), [
      "User: and the billing job owner?\nAssistant: The payments team owns it.",
      "User: we are debugging the billing job\n\nwhich port does staging use?\nAssistant: Port 5433.",
    ]);
    const flushes = hookLog(service.dir).filter((e) => e["event"] === "session.idle" && e["session"]?.startsWith(session.id));
    assert.deepEqual(flushes.map((e) => e["outcome"]), ["skipped", "stored", "stored"]);
  });
});
