/**
 * What the plugin does with opencode's hooks, as the Python adapters do with a harness's hook
 * events (harness/adapter.py), through the same REST calls with the same fields:
 *
 * - inject: for the agent's model calls, recall for the latest user message (`/recall`,
 *   relevant_only) and add what clears the service's relevance bar to the system prompt; each
 *   injection is reported (`/inject/report`) beside the model call, not before it.
 * - flush: the messages a compaction is about to summarise are stored (`source=compaction`), and
 *   so is each answered exchange when the session goes idle (the end of every agent turn: the
 *   last one of a session that never compacts) or is deleted.
 * - remember: a user message starting with "remember" is stored as a `fact`.
 * - capture: an allow-listed tool's output is stored (`source=tool`, kind `artifact`).
 *
 * Recall, relevance, dedup and hygiene stay in the service. What the plugin adds to a session's
 * context is kept per session and sent again, byte for byte, with every later model call (the
 * system prompt is rebuilt for each call; an unchanged prefix keeps the provider's prompt cache
 * hitting). It grows only when a new prompt brings memories this context has not seen, and
 * starts over when a compaction replaces the context. Every service call is bounded by the
 * action's budget; a failure is a silent skip for the session and a line in the hook log.
 *
 * A write (remember, flush, capture) the service cannot take within the budget (down, hung,
 * slow, overloaded) goes to the write spool instead (spool.ts), which the service replays
 * exactly once. After an action met a dead or hung service, every harness's hooks skip the
 * network for a while (backoff.ts), spooling their writes at once. Hung, not slow: a request
 * that timed out starts it only when the service answers no probe either (client.ts `answers`).
 * One that answers the probe was slow: its slow mark sends every harness's writes of the next
 * SLOW_MS straight to the spool, while recalls still try.
 */

import { randomBytes } from "node:crypto";

import { startService } from "./autostart.js";
import { activeBackOff, activeSlowMark, clearBackOff, clearSlowMark, markSlow, slowMs, startBackOff } from "./backoff.js";
import { NotTheService, ServiceClient, ServiceFailed, ServiceUnavailable, answers, now, resolveUrl, type ServiceAddress } from "./client.js";
import {
  conversationText,
  isAgentTurn,
  latestUserText,
  messageTurns,
  sessionOf,
  type MessagePart,
  type SessionMessage,
} from "./messages.js";
import { record, type Outcome } from "./outcomes.js";
import { stripPrivate } from "./private.js";
import { detectProject } from "./project.js";
import { captureRecord } from "./records.js";
import { loadRepoConfig, repoWarning, type RepoConfig } from "./repoconfig.js";
import { approvalsPath, backoffPath, hookLogPath, spoolPath, type Settings, type SettingProblem } from "./settings.js";
import { SpoolRefused, SpoolRetry, SpoolStuck, appendSpool, pendingSpool, replaySpool, stampCreatedAt } from "./spool.js";
import { length, slice, strip } from "./text.js";
import { flushItems, remembered, transcriptTime, unquote, type FlushItem, type Turn } from "./transcript.js";

export const HARNESS = "opencode";
/** The opencode hooks, by action: the `event` of hook log lines and injection reports. */
export const HOOKS = {
  inject: "experimental.chat.system.transform",
  flush: "experimental.session.compacting",
  /** Not hooks: the bus events after which the answered exchanges not yet stored are flushed. */
  idle: "session.idle",
  deleted: "session.deleted",
  remember: "chat.message",
  capture: "tool.execute.after",
  autostart: "autostart",
  /** Not an opencode hook: the plugin handing the spool to a service that answered. */
  replay: "spool replay",
} as const;

/** Longest query sent to /recall. */
export const QUERY_CHARS = 2000;
/** Compaction chunks per /ingest request, and at most this many per flush (the newest). */
export const FLUSH_BATCH = 500;
export const FLUSH_MAX = 5000;
/** Milliseconds of an action's budget a write leaves for spooling (adapter.py SPOOL_MARGIN_S). */
export const SPOOL_MARGIN_MS = 150;
/** How long an autostarted service may take to listen (it runs in the background meanwhile). */
export const START_WAIT_MS = 20_000;
/** Sessions whose state is kept (the least recently used go first). */
export const MAX_SESSIONS = 200;
/**
 * At most this long for an injection report (runner.py REPORT_S). It is sent beside the model
 * call, which does not wait for it: a write, it takes milliseconds unless a long writer holds
 * the store's write lock, and then it is dropped rather than left hanging.
 */
export const REPORT_MS = 500;

interface SessionState {
  /** Compactions of this session seen by this process: each starts a new context. */
  compactions: number;
  /** The latest user message: what a recall is for. */
  prompt: string | null;
  /** The context key and prompt of the last recall (a turn's later calls reuse its answer). */
  recalled: string | null;
  /** What the plugin added to this context (blocks, notes), sent with every model call. */
  added: string[];
  /** A compaction started: the next messages transform carries the messages it summarises. */
  flushNext: boolean;
  /**
   * The messages no flush has taken yet, as opencode's message events told them, by id in the
   * order they began: what the next idle flush stores once they are answered.
   */
  heard: Map<string, HeardMessage>;
  /** The ids of the messages a flush took: a late update of one does not bring it back. */
  flushed: Set<string>;
  /** A subagent's session (opencode's task tool): its prompt is the agent's, not the user's. */
  subagent: boolean;
  /** What the earlier messages left open before `prompt` (`carryPrivate`): read inside it. */
  promptCarry: Carry;
  /** What was left open before each message read so far, by id (`withoutPrivate`). */
  openBefore: Map<string, Carry>;
  /** What the latest message read left open. */
  open: Carry;
  /**
   * The "remember" prompts not decided yet, with their message's id: the next messages
   * transform decides each, once it has read the spans the earlier messages left open (in a new
   * opencode process, `run --continue`, chat.message comes before any of them was read).
   */
  remembers: { messageID: string | undefined; fact: string }[];
  /**
   * The messages after the last reply a flush stored, whose own replies a span hid: flushed
   * again with the next exchange, their prompts' visible text joined to its prompt (as the hooks
   * store them, re-reading the whole transcript). In a new process, read from the session.
   */
  lead: SessionMessage[];
}

/** What opencode says of a message besides its parts (role, session, `summary`, …). */
type MessageInfo = SessionMessage["info"];

/** A message as its events told it so far: its info (once `message.updated` came) and text parts. */
interface HeardMessage {
  info: MessageInfo | null;
  parts: Map<string, MessagePart>;
}

/** Where a write goes when the service cannot take it: the spool folder and its origin. */
interface SpoolTarget {
  folder: string;
  event: string;
}

/**
 * The writes waiting for the service's answer. Should opencode exit meanwhile (its process
 * ends without waiting for our requests), they are spooled on the way out: nothing is lost,
 * and one that had landed replays as a duplicate.
 */
const inFlight = new Map<object, { target: SpoolTarget; body: Record<string, unknown> }>();
let exitGuard = false;

function spoolInFlight(): void {
  for (const [key, { target, body }] of inFlight) {
    inFlight.delete(key);
    try {
      keep(target, body);
    } catch {
      // the disk refused it: nothing more can be done on the way out
    }
  }
}

function keep(target: SpoolTarget, body: Record<string, unknown>): void {
  stampCreatedAt(body);
  appendSpool(target.folder, "/ingest", body, { harness: HARNESS, event: target.event });
}

/** One action: its deadline, the service to use, and how it ended (for the hook log). */
class Action {
  outcome: Outcome = "skipped";
  detail = "";
  /** How many writes of this action went to the spool, and why the first one did. */
  spooled = 0;
  spoolReason = "";

  constructor(
    readonly deadline: number,
    readonly service: ServiceClient,
    private readonly target: SpoolTarget,
  ) {}

  done(outcome: Outcome, detail = ""): void {
    this.outcome = outcome;
    this.detail = detail;
  }

  /**
   * POSTs `body` to /ingest; null when the service could not take it in time (down, hung,
   * slow, 5xx/401/403/404/405/408/429) and it went to the spool instead, to be stored exactly
   * once later. Once one write of this action was spooled, the next ones are spooled at once. A
   * write the service refuses outright (another 4xx: 413, 422) is kept in `spool/rejected/`
   * with the reason, and answered as a refusal (adapter.py `write`).
   */
  async write(body: Record<string, unknown>): Promise<Record<string, unknown> | null> {
    if (this.spooled) {
      this.spool(body, this.spoolReason);
      return null;
    }
    const key = {};
    if (!exitGuard) {
      exitGuard = true;
      process.once("exit", spoolInFlight);
    }
    inFlight.set(key, { target: this.target, body });
    try {
      const answer = await this.service.post("/ingest", body, this.deadline - SPOOL_MARGIN_MS);
      return typeof answer === "object" && answer !== null ? (answer as Record<string, unknown>) : {};
    } catch (error) {
      if (!(error instanceof ServiceUnavailable)) throw error;
      // The request itself is wrong: replaying it won't help.
      if (error instanceof ServiceFailed && !error.retryable) return this.keepRefused(body, error.message);
      this.spool(body, error instanceof ServiceFailed ? error.message : `${error.outcome}: ${error.message}`);
      return null;
    } finally {
      inFlight.delete(key);
    }
  }

  /**
   * Keeps a write the service refused in `spool/rejected/` (`memory-mcp spool list` shows it
   * with `reason`); the refusal, as /ingest words one (adapter.py `keep_refused`).
   */
  private keepRefused(body: Record<string, unknown>, reason: string): Record<string, unknown> {
    try {
      appendSpool(this.target.folder, "/ingest", body, { harness: HARNESS, event: this.target.event, rejected: reason });
    } catch (error) {
      throw new Error(`the service refused the write (${reason}) and keeping it failed: ${(error as Error).message}`);
    }
    const items = body["items"];
    if (Array.isArray(items)) return { new: 0, duplicate: 0, rejected: items.length };
    return { status: "rejected", reason: `${reason} (kept in spool/rejected/)` };
  }

  private spool(body: Record<string, unknown>, reason: string): void {
    try {
      keep(this.target, body);
    } catch (error) {
      throw new Error(`spooling failed, the write is lost (${reason}): ${(error as Error).message}`);
    }
    this.spooled += 1;
    this.spoolReason ||= reason;
  }
}

export class MemoryPlugin {
  private readonly sessions = new Map<string, SessionState>();
  /** Names this process's contexts: a new opencode process rebuilds every system prompt. */
  private readonly processTag = randomBytes(3).toString("hex");
  private readonly pending = new Set<Promise<unknown>>();
  /** Each context's last injection report in flight: its next recall waits for it (within
   * REPORT_MS), so the service knows what the context holds, as a hook's exit orders it. */
  private readonly reports = new Map<string, Promise<void>>();
  private detectedProject: string | null | undefined;
  private starting: Promise<void> | null = null;
  private startedUrl: string | null = null;
  private startNote = "";
  private replaying: Promise<void> | null = null;
  /** Why the spool could not be replayed last (SpoolStuck), logged once until it changes. */
  private stuck = "";
  private repoConfig: RepoConfig | undefined;

  constructor(
    readonly settings: Settings,
    readonly directory: string,
    problems: readonly SettingProblem[] = [],
    private readonly write: (line: string) => void = (line) => process.stderr.write(line),
  ) {
    for (const problem of problems) {
      this.log("settings", "error", problem.message, null, 0);
    }
  }

  /** The repository's `.semantic-memory.toml` (read once per process; defaults when none). */
  get repo(): RepoConfig {
    if (this.repoConfig === undefined) this.repoConfig = loadRepoConfig(this.directory, approvalsPath(this.settings));
    return this.repoConfig;
  }

  /** MEMORY_PROJECT, else the repository file's `[project] name` if allowed, else detected. */
  get project(): string | null {
    if (this.settings.project) return this.settings.project;
    if (this.repo.project) return this.repo.project;
    if (this.detectedProject === undefined) {
      try {
        this.detectedProject = detectProject(this.directory);
      } catch {
        this.detectedProject = null;
      }
    }
    return this.detectedProject;
  }

  // --- opencode hooks ---------------------------------------------------------------------

  /**
   * `chat.message`: a new user message; "remember …" waits for the next messages transform,
   * which stores it unless it is read inside a span an earlier message left open.
   */
  async chatMessage(sessionID: string, parts: readonly MessagePart[]): Promise<void> {
    const text = conversationText(parts);
    if (!text.trim()) return;
    const state = this.state(sessionID);
    state.prompt = unquote(text); // `opencode run "…"` wraps a prompt holding a space in quotes
    state.promptCarry = state.open; // read inside the spans the earlier messages left open
    const fact = remembered(text);
    if (fact !== null) state.remembers.push({ messageID: parts[0]?.messageID, fact });
  }

  /**
   * `experimental.chat.messages.transform`: runs before each agent call with the session's
   * messages, and once during a compaction with exactly the messages it summarises.
   */
  async messagesTransform(messages: readonly SessionMessage[]): Promise<void> {
    const sessionID = sessionOf(messages);
    if (sessionID === null) return;
    const state = this.state(sessionID);
    if (state.flushNext) {
      state.flushNext = false;
      for (const { info } of messages) {
        state.heard.delete(info.id); // stored now: an idle flush has nothing more to say of them
        state.flushed.add(info.id);
      }
      state.lead = []; // a compaction's flush stores them; what follows it starts afresh
      const read = withoutPrivate(state, messages);
      await this.decideRemembers(sessionID, state); // a prompt the compaction came before its model call
      await this.flush(HOOKS.flush, sessionID, state, read.flat());
      return;
    }
    // After a compaction the prompt may be summarised away; the last one seen stays the query.
    const text = latestUserText(messages);
    if (text !== null) {
      const first = !state.openBefore.size; // this process reads the session for the first time
      state.prompt = unquote(text);
      const read = withoutPrivate(state, messages); // the spans open before each message
      const at = messages.map((m) => m.info.role === "user" && conversationText(m.parts) === text).lastIndexOf(true);
      const latest = messages[at];
      state.promptCarry = (latest && state.openBefore.get(latest.info.id)) ?? state.open;
      if (first && at >= 0) this.leadFrom(state, messages.slice(0, at), read.slice(0, at));
    }
    await this.decideRemembers(sessionID, state);
  }

  /**
   * Stores the "remember" prompts `chatMessage` left waiting, each read inside what the messages
   * before it left open (the latest prompt's, for one not among the messages read).
   */
  private async decideRemembers(sessionID: string, state: SessionState): Promise<void> {
    for (const { messageID, fact } of state.remembers.splice(0)) {
      const carry = (messageID === undefined ? undefined : state.openBefore.get(messageID)) ?? state.promptCarry;
      await this.remember(sessionID, state, fact, carry);
    }
  }

  /**
   * The session's messages before the latest prompt (as a new process reads them first), and
   * their turns: those after the last reply left visible become the lead of the next flush.
   */
  private leadFrom(state: SessionState, earlier: readonly SessionMessage[], read: readonly Turn[][]): void {
    const lead = earlier.slice(answeredUpTo(read)).filter(({ info }) => !state.heard.has(info.id));
    for (const { info } of lead) state.flushed.add(info.id);
    state.lead = lead;
  }

  /** `experimental.chat.system.transform`: adds this context's memories to an agent call. */
  async systemTransform(sessionID: string | undefined, system: string[]): Promise<void> {
    if (!sessionID) return;
    if (!isAgentTurn(system)) {
      this.debug(HOOKS.inject, "not an agent turn (title or compaction call): nothing added");
      return;
    }
    const state = this.state(sessionID);
    // None left once a messages transform ran; were that experimental hook gone, still decided.
    await this.decideRemembers(sessionID, state);
    const key = this.contextKey(sessionID, state);
    const query = state.prompt;
    // Said with every call of the turn, not kept in `added`: the next prompt may close the span.
    const paused = query && remembered(query) === null ? pausedLine(query, state.promptCarry) : null;
    if (query && remembered(query) === null && state.recalled !== `${key}\n${query}`) {
      // A turn's later calls (tool steps) reuse the answer; a paused one recalled nothing.
      if (paused === null) state.recalled = `${key}\n${query}`;
      await this.inject(key, state, query, state.promptCarry);
    }
    const added = paused === null ? state.added : [...state.added, paused];
    if (added.length) system.push(added.join("\n\n"));
  }

  /** `experimental.session.compacting`: the next messages transform is the one to flush. */
  compacting(sessionID: string): void {
    this.state(sessionID).flushNext = true;
  }

  /**
   * opencode's bus events: a finished compaction starts a new context; the conversation is
   * heard from the message events, and what of it was answered is flushed when the session
   * goes idle (after each agent turn) and when it is deleted, in the background (opencode does
   * not wait for an event's handler; `dispose` and the exit guard do).
   */
  event(type: string, properties: Record<string, unknown>): void {
    if (type === "message.updated" || type === "message.part.updated") {
      this.heardOf(properties);
    } else if (type === "message.removed" && typeof properties["sessionID"] === "string") {
      this.sessions.get(properties["sessionID"])?.heard.delete(String(properties["messageID"]));
    } else if (type === HOOKS.idle && typeof properties["sessionID"] === "string") {
      const sessionID = properties["sessionID"];
      const state = this.sessions.get(sessionID);
      if (state !== undefined && !state.subagent) this.flushHeard(HOOKS.idle, sessionID, state, false);
    } else if (type === "session.compacted" && typeof properties["sessionID"] === "string") {
      const state = this.state(properties["sessionID"]);
      state.compactions += 1;
      state.added = [];
      state.recalled = null;
    } else if (type === HOOKS.deleted) {
      const info = properties["info"] as { id?: unknown } | undefined;
      const state = typeof info?.id === "string" ? this.sessions.get(info.id) : undefined;
      if (typeof info?.id !== "string" || state === undefined) return;
      this.sessions.delete(info.id);
      if (!state.subagent) this.flushHeard(HOOKS.deleted, info.id, state, true);
    } else if (type === "session.created") {
      const info = properties["info"] as { id?: unknown; parentID?: unknown } | undefined;
      if (typeof info?.id === "string" && typeof info.parentID === "string") this.state(info.id).subagent = true;
      this.autostart();
    }
  }

  /** `tool.execute.after`: an allow-listed tool's output is stored, without holding the turn. */
  toolExecuted(tool: string, sessionID: string, args: unknown, output: string): void {
    if (!this.settings.toolCapture.has(tool.toLowerCase())) return;
    const key = this.contextKey(sessionID, this.state(sessionID));
    this.background(this.run(HOOKS.capture, key, async (action) => {
      if (this.optedOut(action, "capture")) return;
      // The whole record (input gist and output): a private span may cross the cut.
      const answer = await action.write({
        content: stripPrivate(captureRecord({ name: tool, input: args, output: stripPrivate(output) })),
        kind: "artifact",
        source: "tool",
        ...this.memoryFields(sessionID, key, slice(`tool:${tool}`, 0, 64)),
      });
      if (answer === null) action.done("spooled", `${tool} output (${action.spoolReason})`);
      else if (answer["status"] === "rejected") action.done("refused", String(answer["reason"] ?? ""));
      else action.done("stored", `${tool} output (${String(answer["status"])})`);
    }));
  }

  /** A message event (`message.updated`, `message.part.updated`) kept for the next idle flush. */
  private heardOf(properties: Record<string, unknown>): void {
    const info = properties["info"] as MessageInfo | undefined;
    const part = properties["part"] as MessagePart | undefined;
    const sessionID = info?.sessionID ?? part?.sessionID;
    const messageID = info?.id ?? part?.messageID;
    if (typeof sessionID !== "string" || typeof messageID !== "string") return;
    if (part !== undefined && part.type !== "text") return; // only text is the conversation
    const state = this.state(sessionID);
    if (state.subagent || state.flushed.has(messageID)) return;
    let heard = state.heard.get(messageID);
    if (heard === undefined) state.heard.set(messageID, (heard = { info: null, parts: new Map() }));
    if (info !== undefined) heard.info = info;
    // Each update of a part carries its whole text so far: the latest is the part.
    if (part !== undefined) heard.parts.set(part.id, part);
  }

  /**
   * Flushes, in the background, what `state` heard and no flush took: the messages up to the
   * last reply with text in it (`all`: every one, the session is gone), each taken once, after
   * the lead (the prompts whose replies a span hid, which go again joined to the next prompt;
   * a prompt's visible text before `<private>` was lost when only its own hidden reply
   * followed). With nothing new, nothing is sent or logged; what was stored already is answered
   * a duplicate.
   */
  private flushHeard(event: string, sessionID: string, state: SessionState, all: boolean): void {
    const heard = [...state.heard];
    let end = all ? heard.length : 0;
    heard.forEach(([, { info, parts }], at) => {
      if (info?.role === "assistant" && conversationText([...parts.values()]).trim()) end = at + 1;
    });
    if (end === 0) return;
    const messages: SessionMessage[] = [...state.lead];
    for (const [id, { info, parts }] of heard.slice(0, end)) {
      state.heard.delete(id);
      state.flushed.add(id);
      if (info !== null) messages.push({ info, parts: [...parts.values()] });
    }
    const read = withoutPrivate(state, messages);
    state.lead = all ? [] : messages.slice(answeredUpTo(read));
    this.background(this.flush(event, sessionID, state, read.flat()));
  }

  /** Starts the service in the background when autostart is on and nothing answers. */
  autostart(): void {
    if (!this.settings.autostart || this.starting) return;
    this.starting = this.ensureRunning().finally(() => {
      this.starting = null;
    });
  }

  /** Lets captures, flushes and a spool replay still in flight finish (within one budget) before opencode exits. */
  async dispose(): Promise<void> {
    const deadline = new Promise((resolve) => setTimeout(resolve, this.settings.budgetMs).unref());
    await Promise.race([Promise.allSettled([...this.pending]), deadline]);
  }

  // --- the actions --------------------------------------------------------------------------

  /**
   * Recalls for `prompt`, a message read inside what earlier ones left open (`carryPrivate`);
   * inside a carried span nothing is recalled, and `systemTransform` tells the model so.
   */
  private async inject(key: string, state: SessionState, prompt: string, carry: Carry): Promise<void> {
    await this.run(HOOKS.inject, key, async (action) => {
      if (this.optedOut(action, "recall")) return;
      const query = slice(strip(stripPrivateFrom(prompt, carry[0])[0]), 0, QUERY_CHARS);
      if (!query && pausedLine(prompt, carry) !== null) {
        action.done("skipped", "inside a <private> span an earlier message opened: memory paused, the model told");
        return;
      }
      if (!query) {
        action.done("skipped", "nothing but <private> text to recall for");
        return;
      }
      await this.reports.get(key);
      const answer = await this.post(action, "/recall", {
        query,
        k: this.settings.limit,
        project: this.project,
        budget_chars: this.settings.budgetChars,
        session: key,
        relevant_only: true,
      });
      const block = typeof answer["block"] === "string" ? answer["block"] : "";
      if (!block) {
        action.done("nothing relevant");
        return;
      }
      state.added.push(block);
      const uids = blockUids(answer);
      this.report(action.service, key, {
        harness: HARNESS,
        hook: HOOKS.inject,
        project: this.project,
        query,
        uids,
        chars: length(block),
        session: key,
      });
      action.done("injected", `${uids.length} memories, ${length(block)} chars`);
    });
  }

  /**
   * Posts an injection report without holding the model call (runner.py `_report`). The report
   * is a write: while a long writer (a purge, an import's index merge, another process) holds
   * the store's write lock, the recall before it, a read, answers at once but the report waits,
   * and awaited it cost every model call the whole budget. Telemetry: sent once within
   * REPORT_MS, never spooled or retried; a failure is a debug line, and its own client keeps it
   * out of the back-off (the service answered the recall).
   */
  private report(service: ServiceClient, key: string, body: Record<string, unknown>): void {
    const task: Promise<void> = new ServiceClient(service.url, this.settings.token, { store: service.store })
      .post("/inject/report", body, now() + REPORT_MS)
      .then(
        () => undefined,
        (error: unknown) => this.debug(HOOKS.inject, `report failed: ${(error as Error).message}`),
      )
      .finally(() => {
        this.pending.delete(task);
        if (this.reports.get(key) === task) this.reports.delete(key);
      });
    this.pending.add(task); // `dispose` lets it land before opencode exits
    this.reports.set(key, task);
  }

  /** Stores a "remember" prompt's fact, read inside `carry` (what the earlier messages left open). */
  private async remember(sessionID: string, state: SessionState, content: string, carry: Carry): Promise<void> {
    const key = this.contextKey(sessionID, state);
    await this.run(HOOKS.remember, key, async (action) => {
      if (this.optedOut(action, "capture")) return;
      const kept = strip(stripPrivateFrom(content, carry[0])[0]);
      const paused = kept ? null : pausedLine(content, carry);
      if (paused !== null) {
        action.done("skipped", "inside a <private> span an earlier message opened: not remembered, the model told");
        state.added.push(`semantic-memory did NOT store the user's "remember" message: it is not remembered. ${paused}`);
        return;
      }
      if (!kept) {
        action.done("skipped", content ? "nothing but <private> text to remember" : "nothing to remember");
        return;
      }
      const answer = await action.write({
        content: kept,
        kind: "fact",
        source: "chat",
        ...this.memoryFields(sessionID, key),
      });
      if (answer === null) {
        action.done("spooled", `remembered in the spool (${action.spoolReason})`);
        state.added.push(
          "semantic-memory will store the user's \"remember\" message as a memory as soon as its " +
            "service can take it; it does not need to be stored again.",
        );
        return;
      }
      if (answer["status"] === "rejected") {
        // Told, or the user takes it as remembered (the hooks tell it too).
        const reason = String(answer["reason"] ?? "");
        action.done("refused", reason);
        state.added.push(`semantic-memory did NOT store the user's "remember" message (${reason.slice(0, 300)}); it is not remembered.`);
        return;
      }
      const uid = String(answer["uid"]);
      action.done("stored", `remembered (${String(answer["status"])} ${uid})`);
      // Tell the model, so that it does not store the same thing again through the MCP tools.
      state.added.push(
        `semantic-memory stored the user's "remember" message as a memory (uid ${uid}); ` +
          "it does not need to be stored again.",
      );
    });
  }

  /**
   * Stores the exchanges of `read`, turns without their private text (`source=compaction`,
   * as the hooks' flushes).
   */
  private async flush(event: string, sessionID: string, state: SessionState, read: readonly Turn[]): Promise<void> {
    const key = this.contextKey(sessionID, state);
    await this.run(event, key, async (action) => {
      if (this.optedOut(action, "capture")) return;
      const turns = [...read];
      // A trailing unanswered prompt is the live one: it is stored with its answer later.
      while (turns.length && turns[turns.length - 1]?.role === "user") turns.pop();
      // A long exchange goes whole: the service redacts it before it cuts it (flushItems).
      const items = flushItems(turns, FLUSH_MAX);
      if (!items.length) {
        action.done("skipped", "no conversation to flush");
        return;
      }
      const batches: [FlushItem, number][][] = [[]];
      let size = 0;
      for (const item of items) {
        if (size && size + item[1] > FLUSH_BATCH) {
          batches.push([]);
          size = 0;
        }
        batches[batches.length - 1]?.push(item);
        size += item[1];
      }
      const chunks = items.reduce((sum, [, pieces]) => sum + pieces, 0); // as cut before redaction
      const counts = { new: 0, duplicate: 0, rejected: 0, spooled: 0 };
      for (const batch of batches) {
        const answer = await action.write({
          items: batch.map(([item]) => ({
            ...item,
            kind: "note",
            source: "compaction",
            ...this.memoryFields(sessionID, key),
          })),
        });
        if (answer === null) {
          counts.spooled += batch.reduce((sum, [, pieces]) => sum + pieces, 0);
          continue;
        }
        for (const name of ["new", "duplicate", "rejected"] as const) {
          counts[name] += Number(answer[name] ?? 0) || 0;
        }
      }
      const detail =
        `${chunks} chunks: ${counts.new} new, ${counts.duplicate} already stored, ${counts.rejected} refused`;
      if (counts.spooled) action.done("spooled", `${detail}, ${counts.spooled} spooled (${action.spoolReason})`);
      else action.done("stored", detail);
    });
  }

  // --- plumbing -----------------------------------------------------------------------------

  /** True (and the action skipped) when the repository's file turns `what` off. */
  private optedOut(action: Action, what: "capture" | "recall"): boolean {
    const repo = this.repo;
    if (repo[what]) return false;
    const why = repo.error ? `unreadable, so nothing is stored (${repo.error})` : `[${what}] enabled = false`;
    action.done("skipped", `${what} off by ${repo.path}: ${why}`);
    return true;
  }

  /**
   * Names what is in a session's context now, for the service's per-context dedup: memories
   * injected into it (or flushed from it, tagged `session:<key>`) are not injected again.
   * A compaction or a new opencode process (which rebuilds the system prompt without what
   * an earlier one added) starts a new context, so what left it can come back.
   */
  private contextKey(sessionID: string, state: SessionState): string {
    const base = `${slice(sessionID, 0, 40)}@${this.processTag}`;
    return state.compactions ? `${base}+${state.compactions}` : base;
  }

  /**
   * What every memory the plugin stores carries (adapter.py `memory_fields`): the project, the
   * tags (the context key among them, so this context is not given it back) and the agent
   * session, in which the service keeps memories in arrival order.
   */
  private memoryFields(sessionID: string, key: string, ...extraTags: string[]): Record<string, unknown> {
    return {
      project: this.project,
      tags: [`harness:${HARNESS}`, slice(`session:${key}`, 0, 64), ...extraTags],
      session: slice(`${HARNESS}:${sessionID}`, 0, 256),
    };
  }

  private state(sessionID: string): SessionState {
    let state = this.sessions.get(sessionID);
    if (state === undefined) {
      state = {
        compactions: 0, prompt: null, recalled: null, added: [], flushNext: false,
        heard: new Map(), flushed: new Set(), subagent: false, promptCarry: NO_CARRY,
        openBefore: new Map(), open: NO_CARRY, remembers: [], lead: [],
      };
    } else {
      this.sessions.delete(sessionID); // re-inserted below: the map stays in use order
    }
    this.sessions.set(sessionID, state);
    const oldest = this.sessions.size > MAX_SESSIONS ? this.sessions.entries().next().value : undefined;
    if (oldest !== undefined) {
      const [oldestID, oldestState] = oldest;
      this.sessions.delete(oldestID);
      // What it heard and no flush took would go with its state: flushed now, as at a delete.
      if (!oldestState.subagent) this.flushHeard(HOOKS.idle, oldestID, oldestState, true);
    }
    return state;
  }

  /** A task that runs on without holding opencode; `dispose` lets it finish (within a budget). */
  private background(task: Promise<void>): void {
    this.pending.add(task);
    void task.finally(() => this.pending.delete(task));
  }

  private async post(action: Action, path: string, body: unknown): Promise<Record<string, unknown>> {
    const answer = await action.service.post(path, body, action.deadline);
    return typeof answer === "object" && answer !== null ? (answer as Record<string, unknown>) : {};
  }

  /** Runs an action within its budget; whatever happens, one line in the hook log. */
  private async run(event: string, session: string | null, body: (action: Action) => Promise<void>): Promise<void> {
    const started = now();
    const debug = (message: string): void => this.debug(event, message);
    const offline = this.backingOff(this.serviceUrl().url);
    const target = { folder: spoolPath(this.settings), event };
    let { outcome, detail, service } = await this.attempt(started + this.settings.budgetMs, debug, body, target, offline);
    // The action's own time, as the hooks log it (runner.py): the probe after a timeout, once
    // per back-off on a hung service, is not part of it.
    const ms = now() - started;
    // Only a recall can time out: a write that could not be handed over was spooled.
    if (outcome === "timeout" && event === HOOKS.inject) detail = `${detail} (recall)`;
    if (service !== null && offline === null) {
      const note = await this.afterContact(service);
      if (note) detail = detail ? `${detail}; ${note}` : note;
    }
    if (this.startNote) {
      detail = detail ? `${detail}; ${this.startNote}` : this.startNote;
      this.startNote = "";
    }
    debug(detail ? `${outcome}: ${detail}` : outcome);
    this.log(event, outcome, detail, session, ms);
  }

  /** The action's outcome (its own, or how the service failed it) and the client it used. */
  private async attempt(
    deadline: number,
    debug: (message: string) => void,
    body: (action: Action) => Promise<void>,
    target: SpoolTarget,
    offline: ServiceUnavailable | null,
  ): Promise<{ outcome: Outcome; detail: string; service: ServiceClient | null }> {
    let service: ServiceClient | null = null;
    try {
      if (offline === null) await this.waitForStart(deadline);
      const { url, origin, store } = this.serviceUrl();
      debug(`service ${url} (${origin})`);
      service = new ServiceClient(url, this.settings.token, { offline, writesHeld: offline === null ? this.writesHeld(url) : null, store });
      const action = new Action(deadline, service, target);
      await body(action);
      return { outcome: action.outcome, detail: action.detail, service };
    } catch (error) {
      if (error instanceof ServiceUnavailable) return { outcome: error.outcome, detail: error.message, service };
      const { name, message } = error instanceof Error ? error : { name: "Error", message: String(error) };
      return { outcome: "error", detail: slice(`${name}: ${message}`, 0, 500), service };
    }
  }

  /** The error every request of an action meets at once while the hooks back off; else null. */
  private backingOff(url: string): ServiceUnavailable | null {
    const state = activeBackOff(backoffPath(this.settings), url);
    if (state === null) return null;
    const until = new Date(state.until * 1000).toTimeString().slice(0, 8);
    return new ServiceUnavailable(
      state.outcome,
      `backing off until ${until}, no request made (the last try: ${state.detail})`,
    );
  }

  /**
   * The error every write (not a recall) of an action meets at once while the service's slow
   * mark holds (backoff.ts); else null. Spooled without waiting: the service replays it.
   */
  private writesHeld(url: string): ServiceUnavailable | null {
    const mark = activeSlowMark(backoffPath(this.settings), url);
    if (mark === null) return null;
    const until = new Date(mark.until * 1000).toTimeString().slice(0, 8);
    return new ServiceUnavailable(
      "timeout",
      `the service is slow, spooled without waiting (slow mark until ${until}; the last try: ${mark.detail})`,
    );
  }

  /**
   * A service that is down or hung starts the shared back-off (runner.py `_after_contact`);
   * one that answered ends it. Hung, not slow: a request that timed out starts it only when
   * the service answers no probe either (`answers`, PROBE_MS). A write waiting behind a long
   * writer (a purge, an import) times out while the service answers, and backing off for it
   * would blank every harness's recalls, which that writer does not hold back; it sets the
   * slow mark instead, so the next writes of every harness spool at once rather than wait
   * their whole budget too, and a write the service takes ends it. What to add to the log
   * line's detail, or "".
   */
  private async afterContact(service: ServiceClient): Promise<string> {
    const path = backoffPath(this.settings);
    const failure = service.lastFailure;
    const timedOut = failure?.outcome === "timeout";
    const slowFor = slowMs(this.settings.backoffMs);
    if (failure !== null && !service.answered) {
      if (timedOut && this.settings.backoffMs > 0 && (await answers(service.url, this.settings.token))) {
        markSlow(path, service.url, slowFor, failure.message);
        return "the service answers a probe: slow, not hung, no back-off";
      }
      startBackOff(path, service.url, this.settings.backoffMs, timedOut ? "timeout" : "service down", failure.message);
    } else if (service.answered) {
      clearBackOff(path, service.url);
      // It answered, then a later request of this action timed out: slow, with no probe.
      if (timedOut && failure !== null) markSlow(path, service.url, slowFor, failure.message);
      else if (service.wrote) clearSlowMark(path, service.url);
      // While the mark holds, the service replays its spool itself: a replay would only wait.
      if (service.succeeded && service.writesHeld === null) this.replay(service);
    }
    return "";
  }

  /**
   * Hands what the spool holds to a service that answered, in the background and within one
   * budget (the service drains its own spool too; this covers one with another db). A write
   * it cannot take now stays queued; one it refuses as invalid goes to `rejected/`, and so do
   * the memories it refuses one by one in a 200 answer.
   */
  private replay(service: ServiceClient): void {
    const folder = spoolPath(this.settings);
    if (this.replaying !== null || !pendingSpool(folder).length) return;
    const started = now();
    const deadline = started + this.settings.budgetMs;
    const client = new ServiceClient(service.url, this.settings.token, { store: service.store });
    const send = async (path: string, body: Record<string, unknown>): Promise<unknown> => {
      try {
        return await client.post(path, body, deadline); // replaySpool keeps what it refused item by item
      } catch (error) {
        if (error instanceof ServiceFailed && !error.retryable) throw new SpoolRefused(error.message);
        if (error instanceof ServiceUnavailable) throw new SpoolRetry(error.message);
        throw error;
      }
    };
    const task = replaySpool(folder, send, () => now() < deadline - 50)
      .then(({ sent, rejected }) => {
        if (!sent && !rejected) return;
        const refused = rejected ? `, ${rejected} refused (see \`memory-mcp spool list\`)` : "";
        this.log(HOOKS.replay, "stored", `${sent} spooled write(s) replayed${refused}`, null, now() - started);
      })
      .catch((error: unknown) => {
        // What was not sent stays queued. A spool this user cannot replay is said once until
        // the reason changes (the next action would say it again).
        if (!(error instanceof SpoolStuck) || error.message === this.stuck) return;
        this.stuck = error.message;
        this.log(HOOKS.replay, "error", error.message, null, now() - started);
      })
      .finally(() => {
        this.replaying = null;
        this.pending.delete(task);
      });
    this.replaying = task;
    this.pending.add(task);
  }

  /** MEMORY_PLUGIN_URL, else a live discovery file, else a service autostart started, else the default. */
  private serviceUrl(): ServiceAddress {
    const found = resolveUrl(this.settings);
    // The service autostart started serves this db (MEMORY_DB_PATH is the plugin's): no store to check.
    if (found.origin === "default" && this.startedUrl) return { url: this.startedUrl, origin: "autostart", store: null };
    return found;
  }

  private async ensureRunning(): Promise<void> {
    const { url, store } = this.serviceUrl();
    try {
      await new ServiceClient(url, this.settings.token, { store }).get("/health", now() + this.settings.budgetMs);
      return;
    } catch (error) {
      if (!startable(error)) return;
    }
    try {
      const started = await startService(this.settings, START_WAIT_MS);
      this.startedUrl = started.url;
      this.startNote = `autostart: ${started.how} the service at ${started.url}`;
    } catch (error) {
      this.startNote = `autostart failed: ${(error as Error).message}`;
    }
    this.debug(HOOKS.autostart, this.startNote);
  }

  /** An action that comes while autostart runs waits for it, within the action's budget. */
  private async waitForStart(deadline: number): Promise<void> {
    if (this.starting === null) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(deadline - now() - 50, 0));
    });
    await Promise.race([this.starting, timeout]);
    clearTimeout(timer);
  }

  private log(event: string, outcome: Outcome, detail: string, session: string | null, ms: number): void {
    const warning = repoWarning(this.repo);
    record(hookLogPath(this.settings), {
      harness: HARNESS,
      event,
      outcome,
      detail,
      session,
      project: this.project,
      ms: Math.round(ms * 10) / 10,
      // A malformed repository file, or its project name not allowed yet: one line on every
      // entry, whatever the outcome.
      ...(warning === null ? {} : { warning }),
    });
  }

  private debug(event: string, message: string): void {
    if (this.settings.debug) this.write(`memory-mcp ${HARNESS} ${event}: ${message}\n`);
  }
}

const OPEN_TAG = "<private>";
const CLOSE_TAG = "</private>";
/** Every character whose NFKC form is ">" (tests/test_private_spans.py checks it): a tag ends at one. */
const TAG_END = /[>\ufe65\uff1e]/g;

/**
 * `text`, a message read `depth` `<private>` spans deep (opened by earlier messages, not closed
 * yet), without its private text; and the spans open at its end, for the next message
 * (private.py `strip_private_from`). A span opened in one message runs on into the next ones,
 * and a closing tag there closes it instead of being dropped as stray.
 */
export function stripPrivateFrom(text: string, depth: number): [string, number] {
  if (depth <= 0 && stripPrivate(text) === text) return [text, 0]; // no tag: tags are never empty
  const read = OPEN_TAG.repeat(Math.max(depth, 0)) + text;
  // Every tag ends at or before the last ">" (an unfinished "<private" after it is text): the
  // spans open there are the closing tags that, put after it, let a last character be kept.
  let end = 0;
  for (const match of read.matchAll(TAG_END)) end = (match.index ?? 0) + match[0].length;
  const head = read.slice(0, end);
  let open = 0;
  while (!keptEnd(head, open)) open++;
  return [stripPrivate(read), open];
}

/** What a user message leaves open for the next: the spans open, and the later messages the oldest has run into. */
export type Carry = readonly [number, number];
/** Nothing left open. */
const NO_CARRY: Carry = [0, 0];
/** How many later user messages a span left open carries into, unless one closes it (private.py `CARRY_MESSAGES`). */
export const CARRY_MESSAGES = 2;

/**
 * `text`, a user message read inside what the earlier ones left open, without its private text;
 * and what it leaves open for the next (private.py `carry_private`): a span left open runs into
 * the next CARRY_MESSAGES user messages at most; none closing it, it was a mention of the tag and
 * nothing after them is hidden (one mention turned memory off for the whole session, unseen).
 */
export function carryPrivate(text: string, carry: Carry): [string, Carry] {
  const [kept, depth] = stripPrivateFrom(text, carry[0]);
  if (!depth) return [kept, NO_CARRY];
  const carried = carry[0] && !kept ? carry[1] + 1 : 0;
  if (carried >= CARRY_MESSAGES) return [kept, NO_CARRY]; // never closed within the bound: a mention
  return [kept, [depth, carried]];
}

/** The line that tells the model memory is paused (adapter.py `paused_notice`). */
export function pausedNotice(carry: Carry): string {
  const left = CARRY_MESSAGES - carry[1] - 1;
  const until = left
    ? `or after ${left} more message${left !== 1 ? "s" : ""} without it`
    : "or from the next message on (an unclosed tag is then a mention)";
  return (
    "semantic-memory is paused: an earlier user message opened <private> and none has closed it, so this " +
    `message is neither recalled for nor stored; memory resumes at </private> ${until}.`
  );
}

/** `pausedNotice` for `prompt` when it runs on inside a span an earlier message left open, else null. */
function pausedLine(prompt: string, carry: Carry): string | null {
  if (!carry[0]) return null;
  const [kept, open] = stripPrivateFrom(prompt, carry[0]);
  return !strip(kept) && open ? pausedNotice(carry) : null;
}

/** Whether `head` followed by `open` closing tags ends outside every span. */
function keptEnd(head: string, open: number): boolean {
  const closed = `${head}${CLOSE_TAG.repeat(open)}`;
  return stripPrivate(`${closed}.`) === `${stripPrivate(closed)}.`;
}

/**
 * The messages as conversation turns (`messageTurns`), a list per message, without their
 * private text, read as one conversation (adapter.py `without_private`): a span a user message opens runs on through the
 * later messages until a user message closes it, or lapses (`carryPrivate`); an assistant reply inside one is hidden whole
 * (its own tags hide only within it: a model's `</private>` does not end the user's span). Each
 * turn is dated by its message's `time.created` (an exchange is stored with the time it began).
 * The spans open before each message are kept in `state`: the first message starts inside
 * those it was read in before, a new one inside those the latest message read left open.
 */
function withoutPrivate(state: SessionState, messages: readonly SessionMessage[]): Turn[][] {
  const first = messages[0];
  let carry = (first === undefined ? undefined : state.openBefore.get(first.info.id)) ?? state.open;
  const read: Turn[][] = [];
  for (const message of messages) {
    state.openBefore.set(message.info.id, carry);
    const at = transcriptTime(message.info.time?.created);
    const turns: Turn[] = [];
    for (const turn of messageTurns([message])) {
      let text: string;
      // Unquoted first: a span opened or closed inside `opencode run "…"`'s quotes would keep one.
      if (turn.role === "user") [text, carry] = carryPrivate(unquote(turn.text), carry);
      else text = carry[0] ? "" : stripPrivate(turn.text);
      turns.push({ ...turn, text, at });
    }
    read.push(turns);
  }
  state.open = carry;
  return read;
}

/** How many of the messages `read` are taken up to the last one with a reply left visible. */
function answeredUpTo(read: readonly Turn[][]): number {
  let end = 0;
  read.forEach((turns, at) => {
    if (turns.some((turn) => turn.role === "assistant" && strip(turn.text))) end = at + 1;
  });
  return end;
}

/** The uids of the memories in the block (the budget may leave some recalled ones out). */
function blockUids(answer: Record<string, unknown>): string[] {
  if (Array.isArray(answer["block_uids"])) return answer["block_uids"].map(String);
  const items = Array.isArray(answer["items"]) ? answer["items"] : [];
  return items.flatMap((item) => (typeof item?.uid === "string" ? [item.uid] : []));
}

/**
 * Whether autostart starts this user's service after `error` (autostart.py `ensure_running`):
 * nothing listens, another user's process or another program's server holds the address (the
 * new service listens on a free port). Not the service's own refusal (a token) nor a hung one.
 */
function startable(error: unknown): boolean {
  if (error instanceof ServiceFailed) return error.foreign;
  return error instanceof NotTheService || (error instanceof ServiceUnavailable && error.outcome === "service down");
}
