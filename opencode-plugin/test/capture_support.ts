/**
 * Test support for what a flush captures (capture_*.test.ts): an opencode session told to the
 * plugin by its bus events, each message with its `time.created`, flushed as it goes idle into a
 * real service, and what the service stored of it.
 */

import type { MemoryPlugin } from "../src/memory.js";

import { memories, pluginFor, type Service } from "./support.js";

export const DAY_MS = 86_400_000;

/** 2025-03-10T08:00:01Z in milliseconds, as opencode's `time.created`. */
export const MARCH_10 = Date.UTC(2025, 2, 10, 8, 0, 1);

let counter = 0;

export class Session {
  readonly id = `ses_capture${++counter}`;
  readonly plugin: MemoryPlugin;

  constructor(readonly service: Service) {
    this.plugin = pluginFor(service.url, service.dir, { project: "capture" });
    this.plugin.event("session.created", { info: { id: this.id } });
  }

  /** A message with one text part, `created` its `time.created` (none when undefined). */
  say(role: "user" | "assistant", text: string, created?: number): void {
    const messageID = `msg_${String(++counter).padStart(6, "0")}`;
    const info = { id: messageID, sessionID: this.id, role, ...(created === undefined ? {} : { time: { created } }) };
    this.plugin.event("message.updated", { info });
    this.plugin.event("message.part.updated", { part: { id: `prt_${counter}`, sessionID: this.id, messageID, type: "text", text } });
  }

  /** `session.idle`, then whatever the plugin started for it has finished. */
  async idle(): Promise<void> {
    this.plugin.event("session.idle", { sessionID: this.id });
    await this.plugin.dispose();
  }

  /** This session's stored memories, oldest first. */
  async stored(): Promise<{ content: string; created_at: string }[]> {
    return (await memories(this.service.url, "compaction")).filter((m) => m.session === `opencode:${this.id}`).reverse();
  }
}
