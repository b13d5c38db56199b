/**
 * Which project the agent works in, by the Python hooks' rule (harness/project.py), so that a
 * memory stored from opencode is recalled from Claude Code in the same repository and back:
 * the `origin` remote (else the first remote) normalised to `host/owner/repo`, else the
 * repository's top-level folder name, else the folder's own name. Read straight from `.git`
 * (worktrees and submodules included), without running git.
 */

import { readFileSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { strip } from "./text.js";

// git@host:owner/repo.git (project.py _SCP_LIKE)
const SCP_LIKE = /^(?:[^@/\n]+@)?([^:/\n]+):(?!\/\/)(.+)$/;

/**
 * The project for a working directory. A folder without a name (the filesystem root `/`, a
 * name of blanks, which the service would strip to nothing) is named by its path: without a
 * project, recall there would reach every project and what is remembered there would be
 * global.
 */
export function detectProject(cwd: string): string {
  const start = resolvePath(cwd);
  const [top, gitDir] = findRepository(start);
  if (gitDir !== null) {
    const remote = remoteUrl(gitDir);
    const named = remote ? normaliseRemote(remote) : "";
    if (strip(named)) return named; // not `https:///`
  }
  const folder = top ?? start;
  const name = basename(folder);
  return strip(name) ? name : strip(folder);
}

/** `Path(p).expanduser().resolve()`: absolute, symlinks resolved as far as the path exists. */
export function resolvePath(path: string): string {
  const expanded = path === "~" || path.startsWith("~/") ? join(homedir(), path.slice(1)) : path;
  const absolute = resolve(expanded);
  try {
    return realpathSync(absolute);
  } catch {
    // Resolve the part that exists, keep the rest as written (what Python's resolve does).
    const parent = dirname(absolute);
    return parent === absolute ? absolute : join(resolvePath(parent), basename(absolute));
  }
}

function kind(path: string): "dir" | "file" | null {
  try {
    const stat = statSync(path);
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
      let text: string;
      try {
        text = readFileSync(dotGit, "utf8").trim();
      } catch {
        return [folder, null];
      }
      if (text.startsWith("gitdir:")) {
        const target = text.slice("gitdir:".length).trim();
        return [folder, resolvePath(isAbsolute(target) ? target : join(folder, target))];
      }
      return [folder, null];
    }
    if (dirname(folder) === folder) return [null, null];
  }
}

/** The `origin` remote's URL (else the first remote's) from the repository's config. */
export function remoteUrl(gitDir: string): string | null {
  let common = gitDir;
  try {
    // Worktrees keep their config in the main git dir.
    const pointer = readFileSync(join(gitDir, "commondir"), "utf8").trim();
    common = resolvePath(resolve(gitDir, pointer));
  } catch {
    // not a worktree
  }
  let text: string;
  try {
    // Strict UTF-8, as Python reads it: a file that is not gives no remote.
    text = new TextDecoder("utf-8", { fatal: true }).decode(readFileSync(join(common, "config")));
  } catch {
    return null; // missing (Python's parser.read skips it) or not UTF-8
  }
  const sections = parseGitConfig(text);
  if (sections === null) return null;
  const remotes = [...sections.keys()].filter((name) => name.startsWith('remote "'));
  remotes.sort((a, b) => Number(a !== 'remote "origin"') - Number(b !== 'remote "origin"'));
  for (const name of remotes) {
    const url = (sections.get(name)?.get("url") ?? "").trim();
    if (url) return url;
  }
  return null;
}

/**
 * The sections of a git config file as Python's `configparser.RawConfigParser(strict=False)`
 * reads them (the Python rule reads it that way, so this must too): section names as
 * written, option names lower-cased, lines indented deeper than their option continuing its
 * value; null where configparser raises (an option before any section, a line that is
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

/** Hosts whose owner and repository names are case-insensitive (project.py `CASELESS_HOSTS`). */
const CASELESS_HOSTS = new Set(["github.com", "gitlab.com", "bitbucket.org"]);

/**
 * `host/owner/repo`: no scheme, credentials, port or `.git`, so SSH and HTTPS clones of one
 * repository agree (git@github.com:Acme/web.git == https://github.com/Acme/web); on a host whose
 * names are case-insensitive (CASELESS_HOSTS) in lower case, so `Acme/App` and `acme/app` agree
 * too. Other hosts' paths are kept as written (project.py `normalise_remote`).
 */
export function normaliseRemote(raw: string): string {
  const url = raw.trim();
  let host: string;
  let path: string;
  const scheme = url.indexOf("://");
  const scp = SCP_LIKE.exec(url);
  if (scheme >= 0) {
    const rest = url.slice(scheme + 3);
    const slash = rest.indexOf("/");
    const netloc = slash >= 0 ? rest.slice(0, slash) : rest;
    path = slash >= 0 ? rest.slice(slash + 1) : "";
    host = (netloc.slice(netloc.lastIndexOf("@") + 1).split(":")[0]) as string;
  } else if (scp) {
    host = scp[1] as string;
    path = scp[2] as string;
  } else {
    // A local path remote.
    return removeSuffix(url.replace(/\/+$/, ""), ".git").replace(/\/+$/, "") || url;
  }
  path = removeSuffix(path.replace(/^\/+|\/+$/g, ""), ".git").replace(/\/+$/, "");
  host = host.toLowerCase();
  if (CASELESS_HOSTS.has(host)) path = path.toLowerCase();
  return host ? `${host}/${path}` : path;
}

function removeSuffix(text: string, suffix: string): string {
  return text.endsWith(suffix) ? text.slice(0, -suffix.length) : text;
}
