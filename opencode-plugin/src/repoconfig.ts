/**
 * `.semantic-memory.toml`, committed at a repository's top: `[capture] enabled = false` (store
 * nothing from it), `[recall] enabled = false` (inject nothing), `[project] name = "…"` (the
 * project name for every checkout). Found and read as the Python hooks do (harness/
 * repo_config.py): at the top of the repository holding the directory, else in the directory;
 * read only when present. A file that cannot be read or parsed, or that holds any other table
 * or key (`[capure]`, `enable`: most likely an opt-out with a typo), stops capture and leaves
 * recall on.
 *
 * A `[project] name` other than the detected one is used only once the user has allowed that
 * file with that name (`memory-mcp allow`): a cloned repository must not file its content
 * under, and be given the memories of, a project of the user's it names. The approvals are
 * Python's (`repo-approvals.json` beside the db, `{"allowed": {file's path: name}}`); until
 * then the name is `ignored` and the detected one is used.
 *
 * Python parses the whole file with `tomllib`; this reader (no runtime dependencies) knows
 * only what these three keys need: `[table]` headers, `key = value` lines (dotted keys too),
 * booleans and single-line strings, `#` comments. Anything else is an error.
 */

import { readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join } from "node:path";
import { stripPrivate } from "./private.js";
import { detectProject, findRepository, resolvePath } from "./project.js";

/** The longest project name the service takes (core/semantic_memory/limits.py). */
const MAX_PROJECT_CHARS = 256;

export const FILE_NAME = ".semantic-memory.toml";
const MAX_BYTES = 64 * 1024;
/** The user's approvals, beside the db (settings.ts `approvalsPath`). */
export const APPROVALS_FILE = "repo-approvals.json";
const MAX_APPROVALS_BYTES = 4 * 1024 * 1024;

export interface RepoConfig {
  /** The file in effect (null: none, the defaults). */
  path: string | null;
  capture: boolean;
  recall: boolean;
  project: string | null;
  /** The file's project name while the user has not allowed it (absent: none waits). */
  ignored?: string;
  /** Why the file could not be used (then capture is off, recall on). */
  error: string | null;
}

const DEFAULTS: RepoConfig = { path: null, capture: true, recall: true, project: null, error: null };
const KEYS: Record<string, "boolean" | "string"> = {
  "capture.enabled": "boolean",
  "recall.enabled": "boolean",
  "project.name": "string",
};

const TABLES = new Set(["capture", "recall", "project"]);

/** Where the file for `cwd` would be: the repository's top folder, else `cwd` itself. */
export function configPath(cwd: string): string {
  const start = resolvePath(cwd);
  const [top] = findRepository(start);
  return join(top ?? start, FILE_NAME);
}

/** The settings for `cwd`, the file's project name only if the user allowed it in `approvals`
 * (null: nothing is allowed); never throws. */
export function loadRepoConfig(cwd: string, approvals: string | null = null): RepoConfig {
  let path: string;
  let raw: Buffer;
  try {
    path = configPath(cwd);
    if (!statSync(path, { throwIfNoEntry: false })?.isFile()) return { ...DEFAULTS };
    raw = readFileSync(path);
  } catch (error) {
    return { ...DEFAULTS, path: join(cwd, FILE_NAME), capture: false, error: (error as Error).message };
  }
  if (raw.length > MAX_BYTES) return { ...DEFAULTS, path, capture: false, error: `larger than ${MAX_BYTES} bytes` };
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(raw);
    const config = { ...parseRepoConfig(text), path };
    if (config.project === null || allowed(config.project, path, cwd, approvals)) return config;
    return { ...config, project: null, ignored: config.project };
  } catch (error) {
    return { ...DEFAULTS, path, capture: false, error: (error as Error).message.split("\n")[0] ?? "unreadable" };
  }
}

/** Whether the file's project name may be used: it is the detected one, or the user allowed
 * this file with this name (repo_config.py `_allowed`). */
function allowed(name: string, path: string, cwd: string, approvals: string | null): boolean {
  let detected: string | null = null;
  try {
    detected = detectProject(cwd);
  } catch {
    // an unreadable repository: no detected name to match
  }
  if (name === detected) return true;
  return approvals !== null && allowedNames(approvals).get(path) === name;
}

/** file's path -> allowed name from the approvals file; empty when it is missing, cannot be
 * read, or the path is relative (it would be read in the agent's folder, which a repository
 * could fill). */
export function allowedNames(approvals: string): Map<string, string> {
  const names = new Map<string, string>();
  if (!isAbsolute(approvals)) return names;
  try {
    const raw = readFileSync(approvals);
    if (raw.length > MAX_APPROVALS_BYTES) return names;
    const data: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
    const entries = typeof data === "object" && data !== null && !Array.isArray(data)
      ? (data as Record<string, unknown>)["allowed"] : null;
    if (typeof entries !== "object" || entries === null || Array.isArray(entries)) return names;
    const pairs = Object.entries(entries);
    if (!pairs.every(([, value]) => typeof value === "string")) return names; // as Python: all or none
    for (const [path, value] of pairs) names.set(path, value as string);
  } catch {
    // no approvals file yet, or a broken one: nothing is allowed
  }
  return names;
}

/** One line for the hook log when part of the file is not used (repo_config.py `warning`). */
export function repoWarning(config: RepoConfig): string | null {
  if (config.error) return `${config.path}: ${config.error}`;
  if (config.ignored !== undefined && config.path !== null) {
    return `${config.path}: [project] name "${config.ignored}" is ignored until you allow it: ` +
      `run \`memory-mcp allow ${shellQuote(dirname(config.path))}\``;
  }
  return null;
}

/** Python's `shlex.quote`, so the advice can be pasted. */
function shellQuote(text: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(text)) return text;
  return `'${text.replace(/'/g, `'"'"'`)}'`;
}

/** The three keys from the file's text; throws on a malformed line or any other table or key. */
export function parseRepoConfig(text: string): RepoConfig {
  const config: RepoConfig = { ...DEFAULTS };
  let table = "";
  const lines = text.replace(/^\ufeff/, "").split(/\r?\n/);
  lines.forEach((line, index) => {
    const content = line.trim();
    if (!content || content.startsWith("#")) return;
    const header = /^\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(?:#.*)?$/.exec(content);
    if (header && TABLES.has((header[1] as string).replace(/\s/g, ""))) {
      table = (header[1] as string).replace(/\s/g, "");
      return;
    }
    if (content.startsWith("[")) throw new Error(`line ${index + 1}: unknown table ${content}`);
    const assignment = /^([A-Za-z0-9_.\- ]+?)\s*=\s*(.*)$/.exec(content);
    const key = assignment ? (assignment[1] as string).replace(/\s*\.\s*/g, ".") : null;
    const full = key === null ? null : table ? `${table}.${key}` : key;
    if (full === null) throw new Error(`line ${index + 1}: not a key = value line`);
    const kind = KEYS[full];
    if (kind === undefined) throw new Error(`unknown key ${full}`);
    const value = parseValue((assignment as RegExpExecArray)[2] as string);
    if (typeof value !== kind) throw new Error(`${full} must be a ${kind}`);
    if (full === "capture.enabled") config.capture = value as boolean;
    else if (full === "recall.enabled") config.recall = value as boolean;
    else config.project = projectName((value as string).trim());
  });
  return config;
}

/** A blank name is no name; one the service would refuse throws, so capture stops (as in
 * harness/repo_config.py: it would only fill spool/rejected/, and a private one the log). The
 * message never echoes the name. Characters are counted as Python counts them (code points). */
function projectName(name: string): string | null {
  if (!name) return null;
  if ([...name].length > MAX_PROJECT_CHARS) throw new Error(`project.name must be 1..${MAX_PROJECT_CHARS} characters`);
  if (/[\n\r\t\0]/.test(name)) throw new Error("project.name must be one line (no newline, tab or NUL)");
  if (stripPrivate(name) !== name) throw new Error("project.name must not hold <private> text");
  return name;
}

/** A boolean or single-line string value (a trailing comment allowed); throws otherwise. */
function parseValue(raw: string): boolean | string | number {
  const text = raw.trim();
  const bare = /^(true|false)\s*(?:#.*)?$/.exec(text);
  if (bare) return bare[1] === "true";
  const literal = /^'([^'\n]*)'\s*(?:#.*)?$/.exec(text);
  if (literal) return literal[1] as string;
  const basic = /^"((?:[^"\\\n]|\\.)*)"\s*(?:#.*)?$/.exec(text);
  if (basic) return JSON.parse(`"${(basic[1] as string).replace(/\\'/g, "'")}"`) as string;
  if (/^[+-]?\d[\d_]*(?:\.\d+)?\s*(?:#.*)?$/.test(text)) return 0; // a number: the wrong type
  throw new Error(`cannot read the value ${text.slice(0, 40)}`);
}
