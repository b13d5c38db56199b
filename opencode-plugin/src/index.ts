/**
 * semantic-memory-mcp for opencode: the plugin opencode loads (a `plugin` entry in
 * opencode.json, or this file's bundle in a `plugin/` folder). It wires opencode's hooks to
 * `MemoryPlugin`; see memory.ts for what each does, and docs/opencode.md.
 *
 * The named exports below are for tests: opencode uses only the default export (a module
 * whose default export has `id` and `server` is loaded as that one plugin).
 */

import type { Hooks, Plugin, PluginInput, PluginOptions } from "@opencode-ai/plugin";

import { MemoryPlugin } from "./memory.js";
import { loadSettings } from "./settings.js";

export const server: Plugin = async (input: PluginInput, options?: PluginOptions): Promise<Hooks> => {
  const { settings, problems } = loadSettings(process.env, options ?? {});
  const memory = new MemoryPlugin(settings, input.directory, problems);
  memory.autostart();
  return {
    "chat.message": async (hook, output) => {
      await memory.chatMessage(hook.sessionID, output.parts);
    },
    "experimental.chat.messages.transform": async (_hook, output) => {
      await memory.messagesTransform(output.messages);
    },
    "experimental.chat.system.transform": async (hook, output) => {
      await memory.systemTransform(hook.sessionID, output.system);
    },
    "experimental.session.compacting": async (hook) => {
      memory.compacting(hook.sessionID);
    },
    "tool.execute.after": async (hook, output) => {
      memory.toolExecuted(hook.tool, hook.sessionID, hook.args, String(output.output ?? ""));
    },
    event: async ({ event }) => {
      memory.event(event.type, event.properties as Record<string, unknown>);
    },
    dispose: () => memory.dispose(),
  };
};

export default { id: "semantic-memory", server };

export { MemoryPlugin } from "./memory.js";
export { loadSettings } from "./settings.js";
export { detectProject, normaliseRemote } from "./project.js";
export { chunkTurns, flushItems, splitText, clean, remembered, unquote } from "./transcript.js";
export { captureRecord, describeInput } from "./records.js";
export { appendSpool, refusedItems, replaySpool } from "./spool.js";
export { stripPrivate } from "./private.js";
export { loadRepoConfig, repoWarning } from "./repoconfig.js";
