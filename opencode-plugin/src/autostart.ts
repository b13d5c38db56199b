/**
 * MEMORY_PLUGIN_AUTOSTART=1: when no service answers, start `memory-mcp serve` on a port the
 * OS picks (MEMORY_PORT=0) and read where it listens from its `MEMORY_MCP_LISTENING {json}`
 * line. Like the Python hooks' autostart (harness/autostart.py) the service runs detached (it
 * outlives opencode), logs to `service.log` beside the db (rotated as a service is spawned:
 * `rotateLog`), and a lock file beside the db keeps two starters (this plugin, a hook of another
 * harness) from spawning two services.
 */

import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";

import { ServiceClient, ServiceUnavailable, now, resolveUrl } from "./client.js";
import type { Settings } from "./settings.js";

/** A lock younger than this means another process is starting the service. */
export const LOCK_FRESH_MS = 20_000;
/**
 * A service.log over this many bytes is moved to `service.log.1` (replacing the one before) as
 * a service is spawned (autostart.py LOG_MAX_BYTES): the two stay within about twice this.
 */
export const LOG_MAX_BYTES = 5_000_000;
const LISTENING = "MEMORY_MCP_LISTENING ";
const POLL_MS = 50;

export interface Started {
  url: string;
  /** How it was found: "started" (spawned here) or "found" (another starter's). */
  how: "started" | "found";
}

/** A service URL that answers, started now or by a concurrent starter, within `waitMs`. */
export async function startService(settings: Settings, waitMs: number): Promise<Started> {
  const deadline = now() + waitMs;
  const lock = join(dirname(settings.dbPath), "autostart.lock");
  if (takeLock(lock)) {
    return { url: await spawnService(settings, deadline), how: "started" };
  }
  // Another starter holds the lock: its service shows up in the discovery file.
  while (now() < deadline) {
    const { url, origin, store } = resolveUrl(settings);
    if (origin !== "default") {
      try {
        await new ServiceClient(url, settings.token, { store }).get("/health", Math.min(deadline, now() + 1000));
        return { url, how: "found" };
      } catch {
        // not up yet
      }
    }
    await sleep(POLL_MS);
  }
  throw new ServiceUnavailable("service down", "another process is starting the service; not up in time");
}

/** Spawn the service detached; its URL from the line it prints once it listens. */
function spawnService(settings: Settings, deadline: number): Promise<string> {
  const env: Record<string, string | undefined> = { ...process.env, MEMORY_DB_PATH: settings.dbPath };
  if (settings.url) {
    // The user named the address: serve there.
    const url = new URL(settings.url);
    env["MEMORY_HOST"] = url.hostname.replace(/^\[|\]$/g, "");
    env["MEMORY_PORT"] = url.port || (url.protocol === "https:" ? "443" : "80");
  } else {
    env["MEMORY_PORT"] = "0";
  }
  const logPath = join(dirname(settings.dbPath), "service.log");
  mkdirSync(dirname(logPath), { recursive: true, mode: 0o700 }); // as takeLock makes it
  rotateLog(logPath);
  const log = openSync(logPath, "a", 0o600);
  return new Promise((resolve, reject) => {
    let settled = false;
    let seen = "";
    const child = spawn(settings.command, ["serve"], {
      env,
      detached: true, // its own session: it outlives opencode and opencode's process group
      stdio: ["ignore", "pipe", log],
    });
    closeSync(log); // the child has its own copy
    const settle = (error: Error | null, url?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // The service prints nothing else on stdout; let go of it and of the child.
      child.stdout?.destroy();
      child.unref();
      if (error) reject(error);
      else resolve(url as string);
    };
    const down = (message: string): ServiceUnavailable => new ServiceUnavailable("service down", message);
    const timer = setTimeout(
      () => settle(down(`started ${settings.command} (pid ${child.pid}); not listening in time, see ${logPath}`)),
      Math.max(deadline - now(), 1),
    );
    child.on("error", (error) => settle(down(`cannot start ${settings.command}: ${error.message}`)));
    child.on("exit", (code) => settle(down(`${settings.command} exited with code ${code}; see ${logPath}`)));
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => {
      seen += chunk;
      for (const line of seen.split("\n").slice(0, -1)) {
        if (!line.startsWith(LISTENING)) continue;
        try {
          const info = JSON.parse(line.slice(LISTENING.length)) as { url?: unknown };
          if (typeof info.url === "string") return settle(null, info.url.replace(/\/+$/, ""));
        } catch {
          // a torn line: keep reading
        }
      }
    });
  });
}

/**
 * Move `path` to `<path>.1` when it is over LOG_MAX_BYTES, so every autostart does not append to
 * one file forever (autostart.py `rotate_log`): the service's stderr is a file descriptor, which
 * it cannot rotate itself. Only the spawning starter (it holds the lock) rotates; a service
 * still writing to the old file goes on writing to `.1`.
 */
function rotateLog(path: string): void {
  try {
    if (statSync(path).size > LOG_MAX_BYTES) renameSync(path, `${path}.1`);
  } catch {
    // none yet, or it cannot be moved: appended to as before
  }
}

/** True when this process may spawn (no other starter took the lock within LOCK_FRESH_MS). */
export function takeLock(path: string): boolean {
  // A fresh user's first start may make the data folder: its owner's only, whatever the umask
  // (the log beside the lock quotes what the service was given).
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") return false;
      try {
        if (Date.now() - statSync(path).mtimeMs < LOCK_FRESH_MS) return false;
        unlinkSync(path); // a stale lock
      } catch {
        // gone meanwhile: try again
      }
    }
  }
  return false;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
