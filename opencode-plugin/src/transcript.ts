/**
 * Conversation turns cut into memories, exactly as the Python adapters cut them
 * (harness/transcript.py): one memory per exchange (a user message and the replies to it), a
 * long exchange split at paragraph, line, sentence or word boundaries with each later piece
 * headed by its question. Deterministic, so a second compaction of the same turns produces the
 * same memories and the service's exact-content dedup refreshes them instead of adding copies.
 */

import { SPACE, length, lstrip, rstrip, slice, spaceEnd, spaceStart, strip } from "./text.js";

/** Longest memory a flush writes, in characters. */
export const CHUNK_CHARS = 1200;
/** Exchanges with less text than this ("User: ok / Assistant: Done.") are not worth a memory. */
export const MIN_CHUNK_CHARS = 40;
/** The question heading the later pieces of a long exchange. */
export const HEAD_CHARS = 160;
/**
 * Longest message (one user message, one reply) a flush keeps whole, in characters; a longer one
 * keeps its head and tail around `[… N characters left out …]` (transcript.py MESSAGE_CHARS: a
 * pasted log made thousands of memories of noise, and over the service's body limit its whole
 * exchange was refused).
 */
export const MESSAGE_CHARS = 32_000;
/** A reply of at most this many words to a user message that only acknowledges is not worth a memory. */
export const ACK_REPLY_WORDS = 12;
/** How far ahead of this machine's clock a time may be before the service refuses it (limits.py MAX_FUTURE_S). */
const MAX_FUTURE_S = 86_400;

/** A reply to a "remember" prompt with at most this many words that are not the fact's is only its acknowledgement. */
export const ACK_WORDS = 20;

/**
 * What a user message that only acknowledges, greets or waves the agent on says (its words
 * lowercased, punctuation and emoji aside): one of these, or several in a row ("ok thanks", "yes,
 * continue!"); not a confirmation ("yes", "go ahead"), whose short reply is what was done.
 * transcript.py ACKNOWLEDGEMENTS, the same list.
 */
export const ACKNOWLEDGEMENTS: ReadonlySet<string> = new Set([
  "ok", "okay", "okey", "k", "kk", "thanks", "thank you", "thank you very much",
  "thanks a lot", "thanks so much", "thanks very much", "many thanks", "thx", "ty", "tysm",
  "cheers", "continue", "go on", "carry on", "keep going", "lgtm",
  "looks good", "sounds good", "all good", "great", "nice", "cool", "perfect", "good",
  "awesome", "excellent", "fine", "alright", "all right", "got it", "works for me",
  "that works", "makes sense", "nice work", "good job", "great job", "well done",
  "no problem", "np", "done", "hi", "hello", "hey",
  "danke", "danke schön", "merci", "merci beaucoup", "gracias", "grazie", "obrigado",
  "obrigada", "спасибо", "谢谢", "好的", "ありがとう", "ありがとうございます", "了解",
  "감사합니다",
]);
/** The longest acknowledgement phrase, in words. */
const ACK_PHRASE_WORDS = Math.max(...[...ACKNOWLEDGEMENTS].map((phrase) => phrase.split(" ").length));
/** An acknowledgement with no words at all ("👍", "🙏🎉"). */
const ACK_EMOJI = ["\u{1f44d}", "\u{1f44c}", "\u{1f64f}", "\u2705", "\u{1f389}", "\u{1f4af}", "\u{1f680}", "\u{1f64c}", "\u{1f44f}"];
/** Longer user text is never looked at as an acknowledgement. */
const ACK_CHARS = 80;

export interface Turn {
  role: "user" | "assistant";
  text: string;
  /** When it was written, in unix seconds (`transcriptTime`); none when the harness said none. */
  at?: number | undefined;
}

/**
 * A message's time in unix seconds, from milliseconds since the epoch (opencode's
 * `time.created`); undefined when it is not a number, before 1970, or more than a day ahead of
 * this machine's clock: the service refuses such a memory, so its exchange is dated when it is
 * stored instead (transcript.py `transcript_time`).
 */
export function transcriptTime(value: unknown): number | undefined {
  if (typeof value !== "number") return undefined;
  const seconds = value / 1000;
  return seconds >= 0 && seconds <= Date.now() / 1000 + MAX_FUTURE_S ? seconds : undefined;
}

/** What may stand between "remember" and the fact (and after "that"): spaces and separators. */
const SEPARATOR = `[${SPACE}:,.\u2013\u2014\uff1a\uff0c\u3001-]`;
/**
 * A prompt asking to store something: "remember …", "Remember: …", "remember that …",
 * "REMEMBER — …", "remember：…", or the word in German, French, Spanish, Portuguese, Italian,
 * Russian, Chinese, Japanese or Korean (transcript.py REMEMBER; whitespace and word characters
 * as Python's `\s` and `\w` see them). What follows is the fact (`remembered` says when).
 */
const REMEMBER = new RegExp(
  `^[${SPACE}]*(?:(?:remember|merke?[${SPACE}]+dir|retiens|souviens-toi|recuerda|lembre-se` +
    `|lembra-te|ricorda|запомни)(?![\\p{L}\\p{N}_])|(?:记住|記住|覚えて(?:おいて|おけ|ください)?` +
    `|기억해(?:[${SPACE}]*(?:줘|둬|주세요|두세요))?)(?=${SEPARATOR}))${SEPARATOR}*` +
    `(?:(?:that|que|dass|che|что)(?:${SEPARATOR}+|$))?(?<rest>[\\s\\S]*)$`,
  "iu",
);
// A whole text in double quotes: how `opencode run` passes an argument holding a space
// (`"` + the argument with each `"` written `\"` + `"`), or quotes a user typed around it
// (curly double quotes, or single quotes, ASCII or curly, with none of their kind inside).
const WRAPPED = new RegExp(
  `^[${SPACE}]*(?:"(?<escaped>(?:[^"\\\\]|\\\\[\\s\\S])*)"|\u201c(?<curly>[^\u201c\u201d]*)\u201d` +
    `|'(?<single>[^']*)'|\u2018(?<curlySingle>[^\u2018\u2019]*)\u2019)[${SPACE}]*$`,
);
/** The first sentence of a text: up to `.` `!` `?` before a space or the end, or a CJK stop. */
const FIRST_SENTENCE = new RegExp(`^[\\s\\S]*?(?:[.!?](?=[${SPACE}]|$)|[\u3002\uff01\uff1f]|$)`);
/** Words a "remember" prompt's rest that asks opens with ("remember which port we chose."). */
const ASKING_WORDS: ReadonlySet<string> = new Set(["what", "which", "whether"]);
/** Something to store has a letter or a digit (Python's `[^\W_]`). */
const HAS_WORD = /[\p{L}\p{N}]/u;
const WORD = /[\p{L}\p{N}]+/gu;

// Blocks that are not the conversation: injected memories (never stored again), reminders,
// slash-command wrappers, hook output, environment and instruction preambles.
const NOT_CONVERSATION = new RegExp(
  "<(semantic-memory|system-reminder|command-name|command-message|command-args|" +
    "local-command-stdout|local-command-stderr|local-command-caveat|hook_result|" +
    "environment_context|user_instructions|skills_instructions)\\b[^>]*>" +
    "[\\s\\S]*?</\\1\\s*>",
  "gi",
);

/** The conversation text without injected or harness-generated blocks. */
export function clean(text: string): string {
  return strip(text.replace(NOT_CONVERSATION, ""));
}

/**
 * `text` without the quotes wrapped around all of it (any number of times: `opencode run
 * '"remember that …"'` wraps the typed quotes once more); anything else as it is. Double quotes
 * (`\\"` inside is a quote), curly double quotes, and single quotes, ASCII or curly, with no
 * quote of their kind inside (so `'x' and 'y'` stays). The quotes are not the prompt:
 * "remember" detection and recall see the words inside.
 */
export function unquote(text: string): string {
  for (;;) {
    const found = WRAPPED.exec(text);
    if (found === null) return text;
    const groups = found.groups ?? {};
    const escaped = groups["escaped"];
    const inner = escaped !== undefined
      ? escaped.replaceAll('\\"', '"')
      : (groups["curly"] ?? groups["single"] ?? groups["curlySingle"] ?? "");
    if (!strip(inner)) return text;
    text = inner;
  }
}

/**
 * What a "remember …" prompt asks to store; null for any other prompt, and for one with nothing
 * to store (`remember:`, `remember that`: no letter or digit after the word) or that asks
 * (`asks`: `remember the port we picked? put it in config.yaml`), which are ordinary prompts:
 * recalled for, not stored.
 */
export function remembered(prompt: string): string | null {
  const found = REMEMBER.exec(unquote(prompt));
  if (found === null) return null;
  const fact = strip(unquote(found.groups?.["rest"] ?? ""));
  if (!HAS_WORD.test(fact) || asks(fact)) return null;
  return fact;
}

/**
 * Whether the rest of a "remember" prompt asks what was remembered rather than tells something
 * to remember (transcript.py `_asks`): its first sentence is a question, or it opens with what,
 * which or whether and has no `:` (`remember what we decided: use pnpm` tells).
 */
function asks(rest: string): boolean {
  const first = rstrip(FIRST_SENTENCE.exec(rest)?.[0] ?? "");
  if (first.endsWith("?") || first.endsWith("\uff1f")) return true;
  const opening = wordsOf(slice(rest, 0, 40))[0]; // code points: `rest[:40]`
  return opening !== undefined && ASKING_WORDS.has(opening) && !rest.includes(":") &&
    !rest.includes("\uff1a");
}

/** Lowercased runs of letters and digits. */
function wordsOf(text: string): string[] {
  return text.toLowerCase().match(WORD) ?? [];
}

/** How many distinct words of `text` are not in `known`. */
function newWords(text: string, known: ReadonlySet<string>): number {
  return new Set(wordsOf(text).filter((word) => !known.has(word))).size;
}

/**
 * [user text, assistant text, time] per exchange; replies before any user message form their
 * own. The time is its first user turn's (`Turn.at`; without a user text, its first reply's). A
 * prompt's wrapping quotes go (`unquote`); each message is cut to MESSAGE_CHARS (`capped`). A
 * "remember …" prompt was stored as a fact when it was made: it is left out, and so are the
 * replies that only acknowledge it (`ACK_WORDS`); a longer reply to it is an exchange of its
 * own. An exchange whose user text only acknowledges and whose reply is short (`trivial`) is
 * left out (transcript.py `exchanges`).
 */
export function exchanges(turns: Iterable<Turn>): [string, string, number | undefined][] {
  const out: [string, string, number | undefined][] = [];
  let user: string[] = [];
  let reply: string[] = [];
  let at: number | undefined;
  let fact: Set<string> | null = null; // the words of the latest prompt's fact, if it was one
  const close = (): void => {
    const [asked, answer] = [user.join("\n\n"), reply.join("\n\n")];
    if (!trivial(asked, answer)) out.push([asked, answer, at]);
  };
  for (const turn of turns) {
    let text = clean(turn.text);
    if (!text) continue;
    if (turn.role === "user") {
      if (reply.length) {
        close();
        user = [];
        reply = [];
      }
      const asked = remembered(text);
      fact = asked === null ? null : new Set(wordsOf(asked));
      if (fact === null) {
        if (!user.length) at = turn.at;
        user.push(capped(strip(unquote(text))));
      }
      continue;
    }
    text = capped(text);
    if (fact === null || newWords(text, fact) > ACK_WORDS) {
      if (!user.length && !reply.length) at = turn.at;
      reply.push(text);
    }
  }
  if (user.length || reply.length) close();
  return out;
}

/**
 * A message as a flush keeps it: whole up to MESSAGE_CHARS characters, else its head and tail,
 * half of that each, around `[… N characters left out …]` (transcript.py `capped`). Linear in
 * the text: a pasted log can be megabytes.
 */
export function capped(text: string): string {
  if (text.length <= MESSAGE_CHARS) return text; // never more characters than UTF-16 units
  const size = length(text);
  if (size <= MESSAGE_CHARS) return text;
  const half = Math.floor(MESSAGE_CHARS / 2);
  const head = text.slice(0, advance(text, 0, half, text.length));
  const tail = text.slice(advance(text, 0, size - half, text.length));
  return `${rstrip(head)}\n[… ${size - MESSAGE_CHARS} characters left out …]\n${lstrip(tail)}`;
}

/**
 * Whether an exchange is not worth a memory: its user text only acknowledges (`acknowledges`)
 * and its reply has at most ACK_REPLY_WORDS words. A short question keeps its short answer.
 */
export function trivial(user: string, reply: string): boolean {
  if (!acknowledges(user)) return false;
  let count = 0;
  for (const _ of reply.matchAll(NON_SPACE)) if (++count > ACK_REPLY_WORDS) return false;
  return true;
}

/**
 * Whether a user message only acknowledges or waves the agent on: its words, lowercased, are
 * ACKNOWLEDGEMENTS phrases one after another, or it has no words and an acknowledging emoji.
 * A `?` makes it a question (transcript.py `acknowledges`).
 */
export function acknowledges(text: string): boolean {
  // A pasted log is not counted through: past twice the limit in UTF-16 units it is past it in characters.
  if (text.length > 2 * ACK_CHARS || length(text) > ACK_CHARS) return false;
  if (text.includes("?") || text.includes("\uff1f")) return false;
  const words = wordsOf(text);
  if (!words.length) return ACK_EMOJI.some((emoji) => text.includes(emoji));
  const ends = new Set([0]); // how many words a run of phrases can cover
  for (let start = 0; start < words.length; start++) {
    if (!ends.has(start)) continue;
    for (let size = 1; size <= ACK_PHRASE_WORDS && start + size <= words.length; size++) {
      if (ACKNOWLEDGEMENTS.has(words.slice(start, start + size).join(" "))) ends.add(start + size);
    }
  }
  return ends.has(words.length);
}

/**
 * Whether a whole exchange is a memory: one with a question and its answer is, however short
 * ("which port?" / "5432"), one with either alone when it has MIN_CHUNK_CHARS (transcript.py
 * `_worth`).
 */
function worth(user: string, reply: string, memory: string): boolean {
  return Boolean(user && reply) || length(memory) >= MIN_CHUNK_CHARS;
}

/**
 * The memories a flush stores for these turns, oldest first, without repeats (and without what
 * "remember" prompts stored already: `exchanges`).
 */
export function chunkTurns(turns: Iterable<Turn>, maxChars = CHUNK_CHARS): string[] {
  const chunks = new Set<string>();
  for (const [user, reply] of exchanges(turns)) {
    const pieces = chunkExchange(user, reply, maxChars);
    for (const chunk of pieces) {
      if (pieces.length === 1 ? worth(user, reply, chunk) : length(chunk) >= MIN_CHUNK_CHARS) chunks.add(chunk);
    }
  }
  return [...chunks];
}

/**
 * What a flush sends for one exchange: the memory itself, or the whole exchange for the service
 * to cut; `created_at` (unix seconds) when the conversation said when it began.
 */
export type FlushItem = ({ content: string } | { exchange: { user: string; reply: string } }) & { created_at?: number };

/**
 * The /ingest batch items a flush sends for these turns, oldest first, with how many memories
 * each makes: an exchange `chunkExchange` would cut goes whole (`{exchange: {user, reply}}`), and
 * the service redacts it before it cuts it as `chunkExchange` does (the plugin cannot run the
 * service's secret rules, and a cut through a secret leaves halves that each pass them). The
 * newest exchanges whose memories make up `newest` at most are kept, and one cut by that limit
 * goes whole. Each is dated by its first user turn (`created_at`, none when the conversation said
 * no time). The memories stored are those of `chunkTurns`, redacted as the Python hooks'.
 */
export function flushItems(turns: Iterable<Turn>, newest = Infinity, maxChars = CHUNK_CHARS): [FlushItem, number][] {
  const out: [FlushItem, number][] = [];
  const seen = new Set<string>();
  const pairs = exchanges(turns).map(([user, reply, at]) => ({ user, reply, at, pieces: chunkExchange(user, reply, maxChars) }));
  let first = pairs.length;
  for (let count = 0; first > 0 && count < newest; ) count += pairs[--first]?.pieces.length ?? 0;
  for (const { user, reply, at, pieces } of pairs.slice(first)) {
    const dated = at === undefined ? {} : { created_at: at }; // else the service's clock
    if (pieces.length > 1) {
      out.push([{ exchange: { user, reply }, ...dated }, pieces.length]);
      continue;
    }
    const [chunk] = pieces;
    if (chunk === undefined || !worth(user, reply, chunk) || seen.has(chunk)) continue;
    seen.add(chunk);
    out.push([{ content: chunk, ...dated }, 1]);
  }
  return out;
}

function chunkExchange(user: string, reply: string, maxChars: number): string[] {
  const lines = [...(user ? [`User: ${user}`] : []), ...(reply ? [`Assistant: ${reply}`] : [])];
  const whole = lines.join("\n");
  if (length(whole) <= maxChars) return [whole];
  const head = user ? `(User asked: ${question(user)})\n` : "";
  const [first, ...rest] = splitText(whole, maxChars - length(head));
  return first === undefined ? [] : [first, ...rest.map((piece) => head + piece)];
}

/**
 * The question heading the later pieces of an exchange: the user's words joined by single
 * spaces (`" ".join(user.split())`), cut to `HEAD_CHARS` with an ellipsis. Only the words that
 * reach the head are taken: a prompt can be a pasted log of megabytes.
 */
function question(user: string): string {
  const taken: string[] = [];
  let units = -1; // of the taken words joined
  for (const [word] of user.matchAll(NON_SPACE)) {
    taken.push(word);
    units += 1 + word.length;
    if (units > 2 * HEAD_CHARS) break; // more than HEAD_CHARS characters, astral or not
  }
  const joined = taken.join(" ");
  if (advance(joined, 0, HEAD_CHARS + 1, joined.length) < 0) return joined; // every word, and it fits
  return rstrip(joined.slice(0, advance(joined, 0, HEAD_CHARS - 1, joined.length))) + "…";
}

/**
 * Where a piece may end, coarsest level first; within a level the latest stop wins
 * (transcript.py `_BOUNDARIES`: `。` `！` `？` end a Chinese or Japanese sentence).
 */
const BOUNDARIES: readonly (readonly string[])[] = [
  ["\n\n"], ["\n"], [". ", "\u3002", "\uff01", "\uff1f"], [" "],
];

/** A word as `str.split()` sees it. */
const NON_SPACE = new RegExp(`[^${SPACE}]+`, "g");

/**
 * Text cut into pieces of at most `limit` characters at the coarsest boundary that fits
 * (paragraph, line, sentence, word; a hard cut as the last resort): transcript.py `split_text`,
 * piece for piece. It walks one cursor through the text and looks only at the window of the
 * next piece, so a pasted log of megabytes is cut in time linear in its length (slicing or
 * counting the whole rest once per piece froze opencode for seconds: a flush runs in its
 * process).
 */
export function splitText(text: string, limit: number): string[] {
  limit = Math.max(limit, 1);
  const pieces: string[] = [];
  const end = spaceStart(text, text.length, 0);
  let start = spaceEnd(text, 0, end);
  for (;;) {
    // The rest is text[start:end], stripped; it is cut while it holds more than `limit` characters.
    const windowEnd = advance(text, start, limit + 1, end);
    if (windowEnd < 0) break;
    const cut = start + cutIn(text.slice(start, windowEnd), limit);
    const piece = text.slice(start, spaceStart(text, cut, start));
    if (piece) pieces.push(piece);
    start = spaceEnd(text, cut, end);
  }
  if (start < end) pieces.push(text.slice(start, end));
  return pieces;
}

/**
 * Where (in UTF-16 units) the piece starting `window` ends: after the latest stop of the
 * coarsest level found past a third of `limit` (in characters; a sentence stop is kept with its
 * piece), else `limit` characters in.
 */
function cutIn(window: string, limit: number): number {
  for (const level of BOUNDARIES) {
    let at = -1;
    let boundary = "";
    for (const stop of level) {
      const found = window.lastIndexOf(stop);
      if (found > at) [at, boundary] = [found, stop];
    }
    if (at >= 0 && length(window.slice(0, at)) > Math.floor(limit / 3)) {
      return at + (strip(boundary) ? rstrip(boundary).length : 0);
    }
  }
  return advance(window, 0, limit, window.length);
}

/** The index `count` characters (code points) after `from`, or -1 when `end` comes first. */
function advance(text: string, from: number, count: number, end: number): number {
  let at = from;
  for (let seen = 0; seen < count; seen++) {
    if (at >= end) return -1;
    const unit = text.charCodeAt(at);
    const pair = unit >= 0xd800 && unit <= 0xdbff && at + 1 < end &&
      (text.charCodeAt(at + 1) & 0xfc00) === 0xdc00;
    at += pair ? 2 : 1;
  }
  return at;
}
