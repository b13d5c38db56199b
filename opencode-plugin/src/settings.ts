/**
 * The plugin's settings: each one from its environment variable, else from the plugin's
 * options (the second element of its `plugin` entry in opencode.json), else the default.
 *
 * The variables are the Python hooks' own (`MEMORY_PLUGIN_*`, `MEMORY_PROJECT`,
 * `MEMORY_HOOK_BUDGET_S`, `MEMORY_DB_PATH`, …), with the same defaults and limits, so one
 * environment configures every harness alike.
 */

import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { stripPrivate } from "./private.js";
import { strip } from "./text.js";

export interface Settings {
  /** The service URL; "" = the discovery file, else http://127.0.0.1:`port`. */
  url: string;
  /** MEMORY_PORT, the service's port: where the plugin looks when nothing else says. */
  port: number;
  /** Bearer token for a token-secured service ("" = none). */
  token: string;
  /** Memories per injection (1..50). */
  limit: number;
  /** The injected block's character budget (>= 500). */
  budgetChars: number;
  /** Lower-cased names of the tools whose output is captured. */
  toolCapture: ReadonlySet<string>;
  /** Start `memory-mcp` (port 0) when no service answers. */
  autostart: boolean;
  /** Write each decision to stderr. */
  debug: boolean;
  /** The project memories are stored under and recalled for ("" = detect from git). */
  project: string;
  /** Wall-clock budget of one action (a recall and its report, a flush, a store), in ms. */
  budgetMs: number;
  /**
   * After an action met a dead or hung service, every harness's hooks skip the network this
   * long (ms; 0 = never): writes go to the spool at once (backoff.ts, spool.ts).
   */
  backoffMs: number;
  /** The service's db file: the hook log (`hooks.jsonl`) and discovery file sit beside it. */
  dbPath: string;
  /** MEMORY_DISCOVERY_FILE: "" = `<db>.server.json`, "off" = none. */
  discoveryFile: string;
  /** The `memory-mcp` executable autostart runs. */
  command: string;
  /** MEMORY_DB_URL (else the text of MEMORY_DB_URL_FILE): the store, when not a db file. */
  dbUrl?: string;
  /**
   * Whether the store is named explicitly (MEMORY_DB_PATH, MEMORY_DB_URL, MEMORY_DB_URL_FILE,
   * or the `dbPath` option): only then is a service found by the port alone told which store
   * is expected there (client.ts `resolveUrl`), as the hooks do (harness/client.py).
   */
  storeNamed?: boolean;
}

export type Options = Readonly<Record<string, unknown>>;
export type Env = Readonly<Record<string, string | undefined>>;

/** A setting that could not be used as given; its default was used instead. */
export interface SettingProblem {
  name: string;
  message: string;
}

const DEFAULT_DB = "~/.local/share/memory-mcp/memory.db";
/** The longest project name the service takes (core/semantic_memory/limits.py). */
const MAX_PROJECT_CHARS = 256;

/** Each setting: its variable, its option key, how to read it, its default. */
interface Field<T> {
  env: string;
  option: string;
  parse: (raw: unknown) => T;
  fallback: T;
}

class BadValue extends Error {}

function text(raw: unknown): string {
  if (typeof raw === "string") return raw.trim();
  if (typeof raw === "number" || typeof raw === "boolean") return String(raw);
  throw new BadValue(`expected a string, got ${JSON.stringify(raw)}`);
}

/** A number's text as given: Python strips other blanks around a number than `trim()` does
 * (U+0085 but not U+FEFF), `pythonInt` and `pythonFloat` strip them. */
function numberText(raw: unknown): string {
  return typeof raw === "string" ? raw : text(raw);
}

/** The blanks Python's `int()` and `float()` strip from around a number (`str.isspace` less
 * U+001C..U+001F, which they keep and then refuse). */
const NUMBER_SPACE = "\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
/** A run of decimal digits, any script's, single `_` between two (Python's `int("1_000")`). */
const DIGITS = "\\p{Nd}(?:_?\\p{Nd})*";
/** What Python's `int(raw)` reads: a sign, digits, the blanks around. */
const PY_INT = new RegExp(`^[${NUMBER_SPACE}]*([+-]?${DIGITS})[${NUMBER_SPACE}]*$`, "u");
/** What Python's `float(raw)` reads: `1.5`, `1.`, `.5`, `1e-3`, `inf`, `nan`, the blanks around. */
const PY_FLOAT = new RegExp(`^[${NUMBER_SPACE}]*([+-]?(?:(?:${DIGITS}(?:\\.(?:${DIGITS})?)?|\\.${DIGITS})`
  + `(?:[eE][+-]?${DIGITS})?|inf|infinity|nan))[${NUMBER_SPACE}]*$`, "iu");
const DIGIT = /^\p{Nd}$/u;

/** `text` with each decimal digit of any script as its ASCII digit and the `_`s gone: Unicode
 * puts each script's digits 0..9 in a row, and one row of them right after another. */
function asciiDigits(text: string): string {
  let out = "";
  for (const char of text) {
    if (char === "_") continue;
    const code = char.codePointAt(0) as number;
    if (code < 0x80 || !DIGIT.test(char)) {
      out += char;
      continue;
    }
    let zero = code;
    while (DIGIT.test(String.fromCodePoint(zero - 1))) zero--;
    out += String((code - zero) % 10);
  }
  return out;
}

/** A setting's value as Python's `int(raw)` reads it (config.py `_parse`), NaN where it
 * refuses it: no `0x10`, `1e1` or `5.0`, which `Number()` would take. */
export function pythonInt(raw: string): number {
  const found = PY_INT.exec(raw);
  return found ? Number(asciiDigits(found[1] as string)) || 0 : Number.NaN; // `-0` is 0
}

/** A setting's value as Python's `float(raw)` reads it (config.py `_parse`), NaN where it
 * refuses it (`0x2`, `1__0`); `inf` and `nan` as Python reads them. */
export function pythonFloat(raw: string): number {
  const found = PY_FLOAT.exec(raw);
  if (!found) return Number.NaN;
  const number = asciiDigits(found[1] as string).toLowerCase();
  const sign = number.startsWith("-") ? -1 : 1;
  const bare = number.replace(/^[+-]/, "");
  if (bare === "nan") return Number.NaN;
  return bare.startsWith("inf") ? sign * Infinity : Number(number);
}

/** A whole number within min..max: an option's number as given, a variable's (or an option's
 * text) as Python reads it (`pythonInt`), so one environment works alike everywhere. */
function integer(min: number, max: number): (raw: unknown) => number {
  return (raw) => {
    const value = typeof raw === "number" ? raw : pythonInt(numberText(raw));
    if (!Number.isInteger(value) || value < min || value > max) {
      const within = max === Infinity ? `${min} or more` : `within ${min}..${max}`;
      throw new BadValue(`must be a whole number ${within}, not ${JSON.stringify(raw)}`);
    }
    return value;
  };
}

/** The Python settings' boolean words (config.py `_parse`). */
function flag(raw: unknown): boolean {
  if (typeof raw === "boolean") return raw;
  const word = text(raw).toLowerCase();
  if (["1", "true", "yes", "on"].includes(word)) return true;
  if (["0", "false", "no", "off"].includes(word)) return false;
  throw new BadValue(`must be one of 1/0, true/false, yes/no, on/off, not ${JSON.stringify(raw)}`);
}

/** MEMORY_HOOK_BUDGET_S: 0.05..60 seconds (harness/settings.py `validate`), in ms. */
function seconds(raw: unknown): number {
  const value = typeof raw === "number" ? raw : pythonFloat(numberText(raw));
  if (!(value >= 0.05 && value <= 60)) {
    throw new BadValue(`must be 0.05..60 seconds, not ${JSON.stringify(raw)}`);
  }
  return Math.round(value * 1000);
}

/** MEMORY_HOOK_BACKOFF_S: 0..3600 seconds (config.py `hook_backoff_s`), in ms. */
function backoffSeconds(raw: unknown): number {
  const value = typeof raw === "number" ? raw : pythonFloat(numberText(raw));
  if (!(value >= 0 && value <= 3600)) {
    throw new BadValue(`must be 0..3600 seconds, not ${JSON.stringify(raw)}`);
  }
  return Math.round(value * 1000);
}

/**
 * MEMORY_PROJECT without the blanks around it (as Python strips them), "" (detect it) when
 * blank; a name the service refuses, as a repository file's `[project] name` is refused (harness/
 * settings.py `project_setting`): every write would be refused. The reason never echoes it.
 */
function projectName(raw: unknown): string {
  const name = strip(typeof raw === "string" ? raw : text(raw));
  if (!name) return "";
  if ([...name].length > MAX_PROJECT_CHARS) throw new BadValue(`must be 1..${MAX_PROJECT_CHARS} characters`);
  if (/[\n\r\t\0]/.test(name)) throw new BadValue("must be one line (no newline, tab or NUL)");
  if (stripPrivate(name) !== name) throw new BadValue("must not hold <private> text");
  return name;
}

/** Comma-separated (or, as an option, a list of) tool names, case-insensitive. */
function toolNames(raw: unknown): ReadonlySet<string> {
  const names = Array.isArray(raw) ? raw.map(text) : text(raw).split(",");
  return new Set(names.map((name) => name.trim().toLowerCase()).filter(Boolean));
}

export function expandHome(path: string): string {
  return path === "~" || path.startsWith("~/") ? join(homedir(), path.slice(1)) : path;
}

const FIELDS: { [K in keyof Settings]: Field<Settings[K]> } = {
  url: { env: "MEMORY_PLUGIN_URL", option: "url", parse: (raw) => text(raw).replace(/\/+$/, ""), fallback: "" },
  port: { env: "MEMORY_PORT", option: "port", parse: integer(0, 65535), fallback: 8765 },
  token: { env: "MEMORY_PLUGIN_TOKEN", option: "token", parse: text, fallback: "" },
  limit: { env: "MEMORY_PLUGIN_LIMIT", option: "limit", parse: integer(1, 50), fallback: 5 },
  budgetChars: {
    env: "MEMORY_PLUGIN_BUDGET_CHARS", option: "budgetChars",
    // The block's wrapper and notice take ~200 characters: below 500 hardly a memory fits.
    // At most what a recall's `budget_chars` takes (core limits.py MAX_BUDGET_CHARS), as the
    // Python settings say (harness/settings.py `validate`).
    parse: integer(500, 1_000_000), fallback: 2000,
  },
  toolCapture: {
    env: "MEMORY_PLUGIN_TOOL_CAPTURE", option: "toolCapture", parse: toolNames, fallback: new Set(),
  },
  autostart: { env: "MEMORY_PLUGIN_AUTOSTART", option: "autostart", parse: flag, fallback: false },
  debug: { env: "MEMORY_PLUGIN_DEBUG", option: "debug", parse: flag, fallback: false },
  project: { env: "MEMORY_PROJECT", option: "project", parse: projectName, fallback: "" },
  budgetMs: { env: "MEMORY_HOOK_BUDGET_S", option: "budgetS", parse: seconds, fallback: 1500 },
  backoffMs: { env: "MEMORY_HOOK_BACKOFF_S", option: "backoffS", parse: backoffSeconds, fallback: 30_000 },
  dbPath: {
    env: "MEMORY_DB_PATH", option: "dbPath", parse: (raw) => expandHome(text(raw)),
    fallback: expandHome(DEFAULT_DB),
  },
  discoveryFile: {
    env: "MEMORY_DISCOVERY_FILE", option: "discoveryFile", parse: text, fallback: "",
  },
  command: { env: "MEMORY_PLUGIN_COMMAND", option: "command", parse: text, fallback: "memory-mcp" },
};

/**
 * The settings for this environment and these options, and what could not be used (a bad
 * value falls back to its default: the plugin still runs, and says so in the hook log).
 */
export function loadSettings(env: Env, options: Options = {}): {
  settings: Settings;
  problems: SettingProblem[];
} {
  const problems: SettingProblem[] = [];
  const values: Partial<Record<keyof Settings, unknown>> = {};
  for (const key of Object.keys(FIELDS) as (keyof Settings)[]) {
    const field = FIELDS[key] as Field<unknown>;
    let value: unknown = field.fallback;
    // The token also comes from MEMORY_TOKEN, the service's own variable (as in the hooks).
    const fromEnv = env[field.env] || (key === "token" ? env["MEMORY_TOKEN"] : undefined);
    const sources: [string, unknown][] = [
      [field.env, fromEnv === "" ? undefined : fromEnv],
      [`option ${field.option}`, options[field.option]],
    ];
    for (const [name, raw] of sources) {
      if (raw === undefined || raw === null) continue;
      try {
        value = field.parse(raw);
      } catch (error) {
        if (!(error instanceof BadValue)) throw error;
        problems.push({ name, message: `${name} ${error.message}; using the default` });
      }
      break;
    }
    values[key] = value;
  }
  const settings = values as Settings;
  settings.dbUrl = dbUrl(env);
  settings.storeNamed = Boolean(env["MEMORY_DB_PATH"] || env["MEMORY_DB_URL"] || env["MEMORY_DB_URL_FILE"]
    || options["dbPath"]);
  return { settings, problems };
}

/** MEMORY_DB_URL, else the first line of the file MEMORY_DB_URL_FILE names (config.py), else "". */
function dbUrl(env: Env): string {
  if (env["MEMORY_DB_URL"]) return env["MEMORY_DB_URL"].trim();
  const file = env["MEMORY_DB_URL_FILE"];
  if (!file) return "";
  try {
    return (readFileSync(expandHome(file), "utf8").trim().split(/\r?\n/)[0] ?? "").trim(); // its first line
  } catch {
    return ""; // the service refuses to start without it: compared as the db file
  }
}

/** Where the hook log lives: `hooks.jsonl` beside the db file (harness/outcomes.py). */
export function hookLogPath(settings: Settings): string {
  return join(dirname(settings.dbPath), "hooks.jsonl");
}

/** The write spool's folder, beside the db file (config.py `spool_path`, spool.py). */
export function spoolPath(settings: Settings): string {
  return join(dirname(settings.dbPath), "spool");
}

/** The user's approvals of repository files' project names, beside the db file
 * (harness/repo_config.py `approvals_file`, written by `memory-mcp allow`). */
export function approvalsPath(settings: Settings): string {
  return join(dirname(settings.dbPath), "repo-approvals.json");
}

/** The hooks' shared back-off state, beside the db file (config.py `backoff_path`). */
export function backoffPath(settings: Settings): string {
  return join(dirname(settings.dbPath), "hooks.backoff.json");
}

/** The discovery file the service writes (service/discovery.py); null when turned off. */
export function discoveryPath(settings: Settings): string | null {
  const configured = settings.discoveryFile;
  if (configured.toLowerCase() === "off") return null;
  if (configured) return expandHome(configured);
  return `${settings.dbPath}.server.json`;
}
