/**
 * Which project the agent works in, by the Python hooks' rule (harness/project.py, remotes.py),
 * so that a memory stored from opencode is recalled from Claude Code in the same repository and
 * back: the `origin` remote (else the first remote) normalised to `host/owner/repo`, else the
 * repository's top-level folder name, else the folder's own name. Read straight from `.git`
 * (worktrees and submodules included), without running git, and taken as git takes it: section
 * names in any case, a value's quotes and trailing comment, a shorthand's
 * `url.<base>.insteadOf`, a relative local remote from the repository's top folder.
 *
 * A detected name is always one the service takes (project.py `name_text`, `bounded`): valid
 * text, bytes of a folder's name that are not UTF-8 read as U+FFFD, and at most
 * MAX_PROJECT_CHARS long. A worktree without a remote is named after its main checkout.
 *
 * Paths are spelled as Python's `os.fsdecode` spells them: a byte that is not UTF-8 is the lone
 * surrogate U+DC80..U+DCFF (`fsdecode`), turned back into that byte for the file system
 * (`fsPath`), so a checkout under a folder whose name is not UTF-8 is found as Python finds it.
 */

import { createHash } from "node:crypto";
import { readFileSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { length, strip } from "./text.js";

// git@host:owner/repo.git, git@[fd00::1]:owner/repo.git (remotes.py `scp_like`): an IPv6
// literal is a host whole, as git reads it
const SCP_LIKE = /^(?:[^@/\n]+@)?(\[[^\]/\n]*\]|[^:/\n]+):(?!\/\/)(.+)$/;

/** The most characters (code points, as sent and once composed) the service takes in a
 * project name (limits.py `MAX_PROJECT_CHARS`). */
export const MAX_PROJECT_CHARS = 256;
/** How a name too long for the service is shortened: `…` + its tail + `~` + this many hex
 * digits of the SHA-256 of the whole name (project.py `HASH_CHARS`). */
const HASH_CHARS = 8;

/**
 * The project for a working directory: normalised remote URL, else the repository's top-level
 * folder name (a worktree's: its main checkout's, `mainCheckout`), else the folder's own name.
 * A folder without a name (the filesystem root `/`, a name of blanks, which the service would
 * strip to nothing) is named by its path: without a project, recall there would reach every
 * project and what is remembered there would be global. Always valid text, short enough for
 * the service (`nameText`, `bounded`), as the Python hooks name it.
 */
export function detectProject(cwd: string): string {
  return bounded(detected(cwd));
}

/** `detectProject` before `bounded` (project.py `_detected`). */
function detected(cwd: string): string {
  const start = realPath(expandUser(cwd));
  const [top, gitDir] = findRepository(start);
  if (top !== null && gitDir !== null) {
    const remote = remoteUrl(gitDir);
    const named = remote ? normaliseRemote(fromTop(remote, top)) : "";
    if (strip(named)) return named; // not `https:///`
    const main = mainCheckout(gitDir);
    if (main !== null) return main;
  }
  const folder = nameText(top ?? start);
  const name = basename(folder);
  return strip(name) ? name : strip(folder);
}

/**
 * The name of a linked worktree's repository: its main checkout's folder (the common git dir's
 * parent, as `git worktree list` finds it), or a bare repository's own (`app.git` is `app`, as
 * a remote to it is named); null for any other checkout (project.py `_main_checkout`). Every
 * worktree of a repository without a remote is then one project with its main checkout.
 */
function mainCheckout(gitDir: string): string | null {
  const common = commonDir(gitDir);
  if (common === null) return null;
  let folder = nameText(common);
  if (basename(folder) === ".git") folder = dirname(folder);
  let name = basename(folder);
  if (name.endsWith(".git") && name !== ".git") name = name.slice(0, -".git".length);
  return strip(name) ? name : strip(folder) || null;
}

/**
 * `name` if the service takes it (at most MAX_PROJECT_CHARS code points as sent and once
 * composed, NFC, as the service composes it), else `…<tail>~<hash>`: its last characters, from
 * the first `/` among them where there is one, and a short hash of the whole (composed) name,
 * so two long names that end alike stay two projects and one name is always shortened alike.
 * A name that would then read as a remote's address is `…~<hash>` (project.py `bounded`).
 */
export function bounded(name: string): string {
  const composed = name.normalize("NFC");
  if (length(composed) <= MAX_PROJECT_CHARS) return length(name) <= MAX_PROJECT_CHARS ? name : composed;
  // (no lone surrogate reaches here: `nameText` and the config's strict UTF-8 leave none)
  const digest = createHash("sha256").update(composed, "utf8").digest("hex").slice(0, HASH_CHARS);
  const chars = Array.from(composed); // code points, as Python slices
  let tail = chars.slice(chars.length - (MAX_PROJECT_CHARS - 2 - HASH_CHARS)).join("");
  const slash = tail.indexOf("/");
  if (slash >= 0) tail = tail.slice(slash); // from a component's start
  const short = `\u2026${strip(tail)}~${digest}`;
  // never read as a remote's address (`…x@host:path`), which the service would rename
  return looksLikeRemote(short) ? `\u2026~${digest}` : short;
}

/** Whether a name is a remote's address rather than a name: it has a scheme, is scp-like with
 * a user (`git@host:owner/repo`), or ends in `.git` (remotes.py `looks_like_remote`). */
function looksLikeRemote(name: string): boolean {
  if (name.includes("://") || name.replace(/\/+$/, "").endsWith(".git")) return true;
  const at = name.indexOf("@");
  return at > 0 && !name.slice(0, at).includes("/") && hostAndPath(name, at + 1);
}

/** Whether `([^:/]+):(?!//)(.+)$` matches `url` at `start` (remotes.py `_host_and_path`). */
function hostAndPath(url: string, start: number): boolean {
  let end = start;
  while (end < url.length && url[end] !== ":" && url[end] !== "/") end++;
  if (end === start || end === url.length || url[end] !== ":" || url.startsWith("//", end + 1)) return false;
  let rest = url.slice(end + 1);
  if (rest.endsWith("\n")) rest = rest.slice(0, -1); // `$` matches before a final newline
  return rest !== "" && !rest.includes("\n");
}

/**
 * A relative local remote (`../shared.git`) as the path git reads it as, from the repository's
 * top folder: two unrelated repositories whose remotes are both `../shared.git` are two
 * projects (project.py `_from_top`).
 */
function fromTop(remote: string, top: string): string {
  const path = localPath(remote);
  if (!path || isAbsolute(path) || path.startsWith("~")) return remote;
  return resolve(nameText(top), path); // both as text, as `path` is
}

/** `Path(p).expanduser().resolve()` as text (`nameText`): absolute, symlinks resolved as far
 * as the path exists. */
export function resolvePath(path: string): string {
  return nameText(realPath(expandUser(path)));
}

/** `os.path.expanduser(p)` for the user's own home (`~`, `~/…`). */
function expandUser(path: string): string {
  return path === "~" || path.startsWith("~/") ? join(homedir(), path.slice(1)) : path;
}

/** `os.path.realpath(p)`: absolute, symlinks resolved as far as the path exists, spelled as
 * `fsdecode` spells the file system's bytes. */
function realPath(path: string): string {
  const absolute = resolve(path);
  try {
    return fsdecode(realpathSync(fsPath(absolute), { encoding: "buffer" }));
  } catch {
    // Resolve the part that exists, keep the rest as written (what Python's resolve does).
    const parent = dirname(absolute);
    return parent === absolute ? absolute : join(realPath(parent), basename(absolute));
  }
}

/** A name read from the file system as text: each byte that is not UTF-8 (a `fsdecode` escape)
 * read as U+FFFD, as Node reads such a name (project.py `name_text`). */
export function nameText(name: string): string {
  return ESCAPED.test(name) ? fsPath(name).toString("utf8") : name;
}

/** A lone surrogate U+DC80..U+DCFF: a byte `fsdecode` could not read as UTF-8. */
const ESCAPED = /(?<![\ud800-\udbff])[\udc80-\udcff]/;

/** Bytes as Python's `os.fsdecode` reads them: UTF-8, each byte of a sequence that is not
 * well-formed UTF-8 (surrogates included) as U+DC00 + the byte (`surrogateescape`). */
export function fsdecode(bytes: Uint8Array): string {
  let out = "";
  let from = 0; // start of the well-formed run not yet decoded
  let at = 0;
  while (at < bytes.length) {
    const size = sequence(bytes, at);
    if (size > 0) {
      at += size;
      continue;
    }
    out += Buffer.from(bytes.subarray(from, at)).toString("utf8") + String.fromCharCode(0xdc00 + (bytes[at] as number));
    from = ++at;
  }
  return out + Buffer.from(bytes.subarray(from)).toString("utf8");
}

/** The length of the well-formed UTF-8 sequence at `at` (Unicode's table 3-7), else 0. */
function sequence(bytes: Uint8Array, at: number): number {
  const first = bytes[at] as number;
  if (first < 0x80) return 1;
  let size: number;
  let low = 0x80;
  let high = 0xbf;
  if (first >= 0xc2 && first <= 0xdf) size = 2;
  else if (first >= 0xe0 && first <= 0xef) {
    size = 3;
    if (first === 0xe0) low = 0xa0;
    if (first === 0xed) high = 0x9f; // no surrogates
  } else if (first >= 0xf0 && first <= 0xf4) {
    size = 4;
    if (first === 0xf0) low = 0x90;
    if (first === 0xf4) high = 0x8f;
  } else return 0;
  for (let next = 1; next < size; next++) {
    const byte = bytes[at + next];
    if (byte === undefined || byte < (next === 1 ? low : 0x80) || byte > (next === 1 ? high : 0xbf)) return 0;
  }
  return size;
}

/** A path as the file system's bytes (Python's `os.fsencode`): each `fsdecode` escape back to
 * its byte, the rest UTF-8. */
function fsPath(path: string): Buffer {
  if (!ESCAPED.test(path)) return Buffer.from(path, "utf8");
  const parts: Buffer[] = [];
  let from = 0;
  for (let at = 0; at < path.length; at++) {
    const unit = path.charCodeAt(at);
    const previous = at > 0 ? path.charCodeAt(at - 1) : 0;
    if (unit >= 0xdc80 && unit <= 0xdcff && !(previous >= 0xd800 && previous <= 0xdbff)) {
      parts.push(Buffer.from(path.slice(from, at), "utf8"), Buffer.from([unit - 0xdc00]));
      from = at + 1;
    }
  }
  parts.push(Buffer.from(path.slice(from), "utf8"));
  return Buffer.concat(parts);
}

function kind(path: string): "dir" | "file" | null {
  try {
    const stat = statSync(fsPath(path));
    return stat.isDirectory() ? "dir" : stat.isFile() ? "file" : null;
  } catch {
    return null;
  }
}

/** [top-level folder, git dir] of the repository holding `start`, or [null, null]. */
export function findRepository(start: string): [string | null, string | null] {
  for (let folder = start; ; folder = dirname(folder)) {
    const dotGit = join(folder, ".git");
    const found = kind(dotGit);
    if (found === "dir") return [folder, dotGit];
    if (found === "file") {
      // A worktree or submodule: "gitdir: <path>".
      const text = readPathFile(dotGit);
      if (text !== null && text.startsWith("gitdir:")) {
        const target = strip(text.slice("gitdir:".length));
        return [folder, realPath(isAbsolute(target) ? target : join(folder, target))];
      }
      return [folder, null];
    }
    if (dirname(folder) === folder) return [null, null];
  }
}

/** The `origin` remote's URL (else the first remote's) from the repository's config, as git
 * reads it. */
export function remoteUrl(gitDir: string): string | null {
  // Worktrees keep their config in the main git dir.
  const common = commonDir(gitDir) ?? gitDir;
  const sections = readConfig(join(common, "config"));
  if (sections === null) return null;
  const remotes = [...sections.keys()].filter((name) => name.startsWith('remote "'));
  remotes.sort((a, b) => Number(a !== 'remote "origin"') - Number(b !== 'remote "origin"'));
  for (const name of remotes) {
    const url = gitValue((sections.get(name)?.get("url") ?? "").trim());
    if (url) return rewritten(url, sections);
  }
  return null;
}

/** The main git dir a linked worktree's git dir names in its `commondir` file, else null (a
 * main checkout, a submodule) (project.py `_common_dir`). */
function commonDir(gitDir: string): string | null {
  const pointer = readPathFile(join(gitDir, "commondir"));
  return pointer ? realPath(resolve(gitDir, pointer)) : null;
}

/** Python's `bytes.strip()`: ASCII whitespace. */
const BLANK_BYTES = new Set([0x20, 0x09, 0x0a, 0x0b, 0x0c, 0x0d]);

/** The path git wrote in one of its small files (`.git`'s `gitdir:`, `commondir`), stripped;
 * null when it cannot be read. Read as the file system's bytes (`fsdecode`), not as UTF-8: a
 * checkout under a folder whose name is not UTF-8 is found all the same. */
function readPathFile(path: string): string | null {
  let bytes: Buffer;
  try {
    bytes = readFileSync(fsPath(path));
  } catch {
    return null;
  }
  let start = 0;
  let end = bytes.length;
  while (start < end && BLANK_BYTES.has(bytes[start] as number)) start++;
  while (end > start && BLANK_BYTES.has(bytes[end - 1] as number)) end--;
  return fsdecode(bytes.subarray(start, end));
}

/** section -> key -> first value of a git config file, sections named as git names them
 * (`gitSection`); null when it cannot be read (project.py `_read_config`). */
function readConfig(path: string): Map<string, Map<string, string>> | null {
  let text: string;
  try {
    // Strict UTF-8, as Python reads it: a file that is not gives no remote.
    text = new TextDecoder("utf-8", { fatal: true }).decode(readFileSync(fsPath(path)));
  } catch {
    return null; // missing (Python's parser.read skips it) or not UTF-8
  }
  const sections = parseGitConfig(text);
  if (sections === null) return null;
  const merged = new Map<string, Map<string, string>>();
  for (const [name, options] of sections) {
    const key = gitSection(name);
    const kept = merged.get(key) ?? new Map<string, string>();
    merged.set(key, kept);
    for (const [option, value] of options) if (!kept.has(option)) kept.set(option, value);
  }
  return merged;
}

/** A section header as git reads it: the section's name in any case, a quoted subsection's as
 * written, the old `remote.origin` form in lower case whole (project.py `_git_section`). */
function gitSection(header: string): string {
  const quote = header.indexOf('"');
  if (quote >= 0) return `${strip(header.slice(0, quote)).toLowerCase()} "${header.slice(quote + 1)}`;
  const name = strip(header).toLowerCase();
  const dot = name.indexOf(".");
  return dot >= 0 ? `${name.slice(0, dot)} "${name.slice(dot + 1)}"` : name;
}

const ESCAPES: Readonly<Record<string, string>> = { n: "\n", t: "\t", b: "\b" };

/** A config value as git reads it: quotes gone, a `#` or `;` outside them starting a comment,
 * backslash escapes read, each blank outside quotes a space between words and none at the end
 * (project.py `git_value`). */
export function gitValue(raw: string): string {
  if (!/["\\#;]/.test(raw)) return raw;
  let out = "";
  let gap = "";
  let quoted = false;
  let escaped = false;
  for (const char of raw) {
    if (escaped) {
      out += gap + (ESCAPES[char] ?? char);
      gap = "";
      escaped = false;
    } else if (char === "\\") {
      escaped = true;
    } else if (char === '"') {
      out += gap;
      gap = "";
      quoted = !quoted;
    } else if (quoted) {
      out += char;
    } else if (char === "#" || char === ";") {
      break;
    } else if (" \t\r\n".includes(char)) {
      gap += " ";
    } else {
      out += gap + char;
      gap = "";
    }
  }
  return out;
}

/** A shorthand remote (`gh:acme/app`) with the longest `url.<base>.insteadOf` prefix it starts
 * with replaced by that base; the repository's config and the user's are read. A full URL is
 * kept (project.py `_rewritten`). */
function rewritten(url: string, sections: Map<string, Map<string, string>>): string {
  if (url.includes("://") || url.includes("@")) return url;
  const rules = insteadOf(sections);
  for (const config of userConfigs()) rules.push(...insteadOf(readConfig(config) ?? new Map()));
  let best: [string, string] = ["", ""];
  for (const rule of rules) if (url.startsWith(rule[0]) && rule[0].length > best[0].length) best = rule;
  return best[0] ? best[1] + url.slice(best[0].length) : url;
}

/** [prefix, base] of each `[url "<base>"] insteadOf = <prefix>` in a config. */
function insteadOf(sections: Map<string, Map<string, string>>): [string, string][] {
  const rules: [string, string][] = [];
  for (const [name, options] of sections) {
    const prefix = gitValue((options.get("insteadof") ?? "").trim());
    if (prefix && name.startsWith('url "') && name.endsWith('"')) rules.push([prefix, name.slice(5, -1)]);
  }
  return rules;
}

/** The user's git config files: GIT_CONFIG_GLOBAL, else the XDG one and ~/.gitconfig. */
function userConfigs(): string[] {
  const configured = process.env["GIT_CONFIG_GLOBAL"];
  if (configured) return [configured];
  const xdg = process.env["XDG_CONFIG_HOME"] || join(homedir(), ".config");
  return [join(xdg, "git", "config"), join(homedir(), ".gitconfig")];
}

/**
 * The sections of a git config file as Python's `configparser.RawConfigParser(strict=False)`
 * reads them (the Python rule reads it that way, so this must too): section names as
 * written (`readConfig` names them as git does), option names lower-cased, lines indented
 * deeper than their option continuing its value; null where configparser raises (an option before any section, a line that is
 * neither), so both sides fall back alike. A repeated option keeps its first value, its
 * continuation lines dropped, as project.py's reader keeps it: a remote with several `url`
 * lines (`git remote set-url --add`) is named by the first, the one git fetches from.
 */
export function parseGitConfig(text: string): Map<string, Map<string, string>> | null {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | null = null;
  let lines: string[] | null = null; // the value the option being read collects
  let indentLevel = 0;
  for (const line of text.split(/\r\n|\n|\r/)) {
    const value = line.trim();
    if (value.startsWith("#") || value.startsWith(";")) continue; // a comment line
    if (!value) {
      lines?.push(""); // kept in a value
      continue;
    }
    const indent = line.length - line.trimStart().length;
    if (lines !== null && indent > indentLevel) {
      lines.push(value);
      continue;
    }
    indentLevel = indent;
    const header = /^\[(.+)\]/.exec(value);
    if (header) {
      const name = header[1] as string;
      current = sections.get(name) ?? new Map<string, string[]>();
      sections.set(name, current);
      lines = null;
      continue;
    }
    if (current === null) return null; // MissingSectionHeaderError
    const assignment = /^(.*?)\s*[=:]\s*(.*)$/.exec(value);
    if (!assignment || !assignment[1]) return null; // ParsingError
    const option = assignment[1].trimEnd().toLowerCase();
    lines = [(assignment[2] as string).trim()];
    if (!current.has(option)) current.set(option, lines); // else read, then dropped
  }
  const joined = new Map<string, Map<string, string>>();
  for (const [name, options] of sections) {
    joined.set(name, new Map([...options].map(([key, values]) => [key, values.join("\n").trimEnd()])));
  }
  return joined;
}

/** Hosts whose owner and repository names are case-insensitive (remotes.py `CASELESS_HOSTS`). */
const CASELESS_HOSTS = ["github.com", "gitlab.com", "bitbucket.org", "dev.azure.com"];
/** The hosts' own other names for their SSH service (remotes.py `HOST_ALIASES`). */
const HOST_ALIASES: Readonly<Record<string, string>> = {
  "ssh.github.com": "github.com", "altssh.gitlab.com": "gitlab.com", "altssh.bitbucket.org": "bitbucket.org",
};
/** Azure DevOps' SSH hosts, whose paths are `v3/org/project/repo`. */
const AZURE_SSH_HOSTS = ["ssh.dev.azure.com", "vs-ssh.visualstudio.com"];

/**
 * `host/owner/repo`: no scheme, credentials, port or `.git`, so SSH and HTTPS clones of one
 * repository agree (git@github.com:Acme/web.git == https://github.com/Acme/web); a well-known
 * host alias named as its host (`canonical`); on a host whose names are case-insensitive
 * (CASELESS_HOSTS) in lower case, `.GIT` too. Other hosts' paths are kept as written. An
 * IPv6-literal host keeps its address whole (`[fd00::1]/team/app`). A local remote (a path
 * or a `file://` URL) is its path without `.git` (remotes.py `normalise_remote`).
 */
export function normaliseRemote(raw: string): string {
  const url = raw.trim();
  const local = localPath(url);
  if (local !== null) return removeSuffix(local.replace(/\/+$/, ""), ".git").replace(/\/+$/, "") || local;
  let host: string;
  let path: string;
  const scheme = url.indexOf("://");
  if (scheme >= 0) {
    const rest = url.slice(scheme + 3);
    const slash = rest.indexOf("/");
    const netloc = slash >= 0 ? rest.slice(0, slash) : rest;
    path = slash >= 0 ? rest.slice(slash + 1) : "";
    host = withoutPort(netloc.slice(netloc.lastIndexOf("@") + 1)); // credentials and port go
  } else {
    const scp = SCP_LIKE.exec(url); // scp-like, as it is not local
    host = scp ? (scp[1] as string) : "";
    path = scp ? (scp[2] as string) : url;
  }
  path = path.replace(/^\/+|\/+$/g, "");
  // `.GIT` is `.git` where names are caseless; elsewhere a path is kept as written
  const found = canonical(host.toLowerCase(), withoutGit(path, path.toLowerCase()));
  [host, path] = found ?? [host.toLowerCase(), withoutGit(path, path)];
  return host && path ? `${host}/${path}` : host || path;
}

/** A URL's host without its `:port`; an IPv6 literal (`[fd00::1]:2222`) whole, brackets kept
 * (remotes.py `_without_port`). */
function withoutPort(host: string): string {
  const close = host.indexOf("]");
  if (host.startsWith("[") && close >= 0) return host.slice(0, close + 1);
  return host.split(":")[0] as string;
}

/** `path` without a final `.git` (where `folded`, `path` or its lower case, ends in `.git`)
 * and the slashes before it (remotes.py `_without_git`). */
function withoutGit(path: string, folded: string): string {
  return (folded.endsWith(".git") ? path.slice(0, -".git".length) : path).replace(/\/+$/, "");
}

/** The path of a remote on this machine (a path, or a `file://` URL), else null. */
function localPath(url: string): string | null {
  if (url.startsWith("file://")) return url.slice("file://".length);
  if (url.includes("://") || SCP_LIKE.test(url)) return null;
  return url;
}

/**
 * [host, path] of a repository on a well-known host, named as its HTTPS clone is, else null:
 * a multi-account SSH alias (`github.com-work`), a host's SSH-over-443 name, Azure DevOps'
 * three spellings of one repository (remotes.py `canonical`).
 */
function canonical(lowerHost: string, path: string): [string, string] | null {
  let host = HOST_ALIASES[lowerHost] ?? lowerHost;
  for (const known of CASELESS_HOSTS) if (host.startsWith(`${known}-`)) host = known;
  let parts = path.split("/");
  if (AZURE_SSH_HOSTS.includes(host) && parts.length === 4 && (parts[0] as string).toLowerCase() === "v3") {
    host = "dev.azure.com";
    parts = parts.slice(1);
  } else if (host === "dev.azure.com" && parts.length === 4 && (parts[2] as string).toLowerCase() === "_git") {
    parts.splice(2, 1);
  } else if (host.endsWith(".visualstudio.com") && !AZURE_SSH_HOSTS.includes(host)) {
    if ((parts[0] as string).toLowerCase() === "defaultcollection") parts = parts.slice(1);
    if (parts.length !== 3 || (parts[1] as string).toLowerCase() !== "_git") return null;
    parts = [removeSuffix(host, ".visualstudio.com"), parts[0] as string, parts[2] as string];
    host = "dev.azure.com";
  }
  if (!CASELESS_HOSTS.includes(host)) return null;
  return [host, parts.join("/").toLowerCase()];
}

function removeSuffix(text: string, suffix: string): string {
  return text.endsWith(suffix) ? text.slice(0, -suffix.length) : text;
}
