/**
 * Reading opencode's messages and hook inputs: the conversation text in them, and which model
 * calls are the agent's own. Types come from `@opencode-ai/plugin`'s hook signatures, so a
 * change in opencode's message shapes fails the type check, not a session.
 */

import type { Hooks } from "@opencode-ai/plugin";

import { clean, type Turn } from "./transcript.js";

type MessagesTransform = NonNullable<Hooks["experimental.chat.messages.transform"]>;
/** One message of a session as hooks see it: `{info, parts}`. */
export type SessionMessage = Parameters<MessagesTransform>[1]["messages"][number];
/** One part of a message (text, tool call, file, compaction marker, …). */
export type MessagePart = SessionMessage["parts"][number];

/**
 * The text a person or the model wrote in these parts: text parts, without the ones opencode
 * made up (`synthetic`: attached file contents, "Continue if you have next steps…") or hid
 * (`ignored`).
 */
export function conversationText(parts: readonly MessagePart[]): string {
  return parts
    .flatMap((part) => (part.type === "text" && !part.synthetic && !part.ignored ? [part.text] : []))
    .join("\n");
}

/**
 * The messages as conversation turns. Compaction summaries are left out (what they summarise
 * was flushed when it was compacted), and so are messages with no written text (tool calls and
 * results, compaction markers, synthetic prompts).
 */
export function messageTurns(messages: readonly SessionMessage[]): Turn[] {
  const turns: Turn[] = [];
  for (const { info, parts } of messages) {
    if (info.role === "assistant" && info.summary) continue;
    const text = conversationText(parts);
    if (text.trim()) turns.push({ role: info.role, text });
  }
  return turns;
}

/** The latest user message with conversation text in it (what a recall is for). */
export function latestUserText(messages: readonly SessionMessage[]): string | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i] as SessionMessage;
    if (message.info.role !== "user") continue;
    const text = conversationText(message.parts);
    if (clean(text)) return text;
  }
  return null;
}

/** The session these messages belong to. */
export function sessionOf(messages: readonly SessionMessage[]): string | null {
  for (const { info } of messages) {
    if (typeof info.sessionID === "string" && info.sessionID) return info.sessionID;
  }
  return null;
}

/**
 * Whether a model call is one of the agent's own turns. opencode runs
 * `experimental.chat.system.transform` for every model call of a session, its hidden helpers'
 * too: the title generator and the compaction summariser. Those pass no system prompt of their
 * own (`system: []`, only their agent prompt), while every call of the agent loop carries the
 * environment block opencode writes for it (`<env> Working directory: … </env>`). The hook's
 * input has no agent name (`chat.params` has it, but runs after the system prompt is final).
 */
export function isAgentTurn(system: readonly string[]): boolean {
  return system.some((part) => part.includes("<env>") && part.includes("</env>"));
}
