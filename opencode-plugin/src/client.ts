/**
 * The REST sidecar client: one request per connection, every call ending by a deadline, and
 * a failure that says how the service failed ("service down", "timeout", "error"), as the
 * Python hooks' client does (harness/client.py). Node built-ins only (node:http works the
 * same under Bun, which runs opencode, and under Node, which runs the tests).
 */

import { createHash } from "node:crypto";
import { readFileSync, realpathSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { connect } from "node:net";
import { basename, dirname, join, resolve as resolvePath } from "node:path";
import { performance } from "node:perf_hooks";

import { owner, trusted } from "./peer.js";
import { isObject } from "./records.js";
import { discoveryPath, expandHome, type Settings } from "./settings.js";

export const DEFAULT_PORT = 8765;
export const DEFAULT_URL = `http://127.0.0.1:${DEFAULT_PORT}`;
/**
 * How long the probe after a timed-out request waits (`answers`; client.py PROBE_S): a service
 * that answers nothing within this, not even a request that needs no store work, is hung.
 */
export const PROBE_MS = 500;
/** The most X-Memory-Wait-Ms says (a day: the service takes 8 digits at most), as client.py. */
const WAIT_MAX_MS = 86_400_000;

/** The outcomes that mean the service could not be used (harness/outcomes.py FAILURES). */
export type FailureOutcome = "service down" | "timeout" | "error";

export class ServiceUnavailable extends Error {
  constructor(
    readonly outcome: FailureOutcome,
    message: string,
  ) {
    super(message);
  }
}

/**
 * An error status reached the caller. `foreign`: the answer was not the service's JSON error
 * (`{"error": "…"}`, every error it sends): another server answered there (client.py).
 */
export class ServiceFailed extends ServiceUnavailable {
  constructor(
    readonly status: number,
    message: string,
    readonly foreign = false,
  ) {
    super("error", `HTTP ${status}: ${message}`);
  }

  /**
   * Whether a write that met this answer is worth replaying later: auth (a token being
   * rotated), a request timeout, overload, a server-side failure, or a 404/405 (the service
   * has /ingest, so something else answers on its port) (client.py RETRYABLE_4XX, plus any
   * 5xx). Any other 4xx means the request itself is wrong.
   */
  get retryable(): boolean {
    return this.status >= 500 || [401, 403, 404, 405, 408, 429].includes(this.status);
  }
}

/**
 * The service found at the port alone serves another store than the one the settings name
 * (it answered 421 to X-Memory-Store; client.py ServiceMisdirected): for this plugin no
 * service is up. Writes go to the spool, for the right service to replay; a recall injects
 * nothing.
 */
export class ServiceMisdirected extends ServiceUnavailable {
  constructor(message: string) {
    super("service down", message);
  }
}

/** Something other than the memory service answered at its address (a web page, a 204). */
export class NotTheService extends ServiceUnavailable {
  constructor(message: string) {
    super("error", message);
  }
}

/**
 * Another OS user's process listens at the service's address (client.py ServiceForeign):
 * nothing was sent to it. For this user it is as if no service were up: writes go to the
 * spool, and autostart starts this user's own on a free port.
 */
export class ServiceForeign extends ServiceUnavailable {
  constructor(url: string, readonly uid: number) {
    super(
      "service down",
      `${url} is another user's (uid ${uid}): nothing was sent to it; start your own service ` +
        "(MEMORY_PLUGIN_AUTOSTART=1 starts one on a free port, or `MEMORY_PORT=0 memory-mcp serve`)",
    );
  }
}

/**
 * Rejects with ServiceForeign when another OS user's process holds `target`'s address
 * (peer.ts), else resolves: asked on a connection of its own that sends nothing, before the
 * request's. (node:http's `createConnection` would check the request's own connection, but
 * Bun, which runs opencode, does not take it.) A connection that fails or takes past
 * `deadline` resolves: the request meets the same and reports it.
 */
function ownerCheck(target: URL, url: string, deadline: number): Promise<void> {
  if (target.protocol !== "http:") return Promise.resolve();
  return new Promise((resolve, reject) => {
    const socket = connect({ host: target.hostname.replace(/^\[|\]$/g, ""), port: Number(target.port || 80) });
    const done = (error?: ServiceForeign): void => {
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(() => done(), Math.max(1, Math.floor(deadline - now())));
    socket.once("error", () => done());
    socket.once("connect", () => {
      const uid = owner(
        { address: socket.remoteAddress ?? "", port: socket.remotePort ?? 0 },
        { address: socket.localAddress ?? "", port: socket.localPort ?? 0 },
      );
      done(uid !== null && !trusted(uid) ? new ServiceForeign(url, uid) : undefined);
    });
  });
}

/** A monotonic clock in milliseconds: deadlines are `now() + budget`. */
export function now(): number {
  return performance.now();
}

/** A store as both sides name it (`storeTag`, `storeIdentity`): the tag goes out as X-Memory-Store. */
export interface ExpectedStore {
  readonly tag: string;
  readonly identity: string;
}

/**
 * Where the service is (`resolveUrl`; client.py ServiceAddress): its URL, where that came from,
 * and the store expected there, which a ServiceClient given it sends as X-Memory-Store (the
 * service answers 421 when it serves another). A value, not state kept per URL: each client
 * gets the store its own settings name.
 */
export interface ServiceAddress {
  readonly url: string;
  readonly origin: string;
  readonly store: ExpectedStore | null;
}

/**
 * The service's address: MEMORY_PLUGIN_URL, else a live discovery file, else MEMORY_PORT on
 * loopback (8765 by default; also when it is 0, the OS's pick that only the discovery file
 * knows), where whoever answers may serve another db: then it carries the store the settings
 * name, if they name one (harness/client.py resolve_address).
 */
export function resolveUrl(settings: Settings): ServiceAddress {
  if (settings.url) return { url: settings.url, origin: "MEMORY_PLUGIN_URL", store: null };
  const path = discoveryPath(settings);
  if (path !== null) {
    // A data folder copied with its discovery file names the original's service: not this
    // db's (unless MEMORY_DISCOVERY_FILE names one several services share).
    const info = readDiscovery(path, settings.discoveryFile ? null : settings.dbPath);
    if (info && !info.stale && typeof info.url === "string") {
      // The file names this db's service: no store to check.
      return { url: info.url.replace(/\/+$/, ""), origin: `discovery file ${path}`, store: null };
    }
  }
  const found = settings.port && settings.port !== DEFAULT_PORT
    ? { url: `http://127.0.0.1:${settings.port}`, origin: "MEMORY_PORT" }
    : { url: DEFAULT_URL, origin: "default" };
  if (!settings.storeNamed) return { ...found, store: null };
  const identity = storeIdentity(settings.dbUrl ?? "", settings.dbPath);
  return { ...found, store: { tag: storeTag(identity), identity } };
}

/** The prefixes a SQLite store URL's file path follows (stores/sqlite.py `path_of`). */
const SQLITE_PREFIXES = ["sqlite:///", "sqlite://", "sqlite:", "file://"];

/**
 * The store a service serves, or a client expects, named alike on both sides (lite.py
 * `store_identity`): a SQLite file by its real path (`dbIdentity`); any other URL without its
 * password (the userinfo's, and every `*password*` query parameter), its scheme without a
 * driver (`postgresql+psycopg`, `postgres`: `postgresql`).
 */
export function storeIdentity(dbUrl: string, dbPath: string): string {
  const url = dbUrl.trim();
  if (!url) return dbIdentity(dbPath);
  for (const prefix of SQLITE_PREFIXES) {
    if (url.startsWith(prefix)) return dbIdentity(url.slice(prefix.length));
  }
  const sep = url.indexOf("://");
  let scheme = (sep < 0 ? url : url.slice(0, sep)).toLowerCase().split("+")[0] as string;
  if (scheme === "postgres") scheme = "postgresql";
  let rest = sep < 0 ? "" : url.slice(sep + 3);
  const at = rest.lastIndexOf("@"); // by position: a password may hold @ / ? #
  const colon = at >= 0 ? rest.slice(0, at).indexOf(":") : -1;
  if (colon >= 0) rest = rest.slice(0, colon) + rest.slice(at);
  const mark = rest.indexOf("?");
  const base = mark < 0 ? rest : rest.slice(0, mark);
  const kept = (mark < 0 ? "" : rest.slice(mark + 1)).split("&")
    .filter((part) => part && !(part.split("=")[0] as string).toLowerCase().includes("password"));
  return `${scheme}${sep < 0 ? "" : "://"}${base}${kept.length ? `?${kept.join("&")}` : ""}`;
}

/** A db file as every process names it: `~` expanded, symlinks resolved (lite.py `db_identity`). */
export function dbIdentity(path: string): string {
  return realPath(expandHome(path));
}

/** The short digest of a `storeIdentity` sent as X-Memory-Store (lite.py `store_tag`). */
export function storeTag(identity: string): string {
  return createHash("sha256").update(identity, "utf8").digest("hex").slice(0, 16);
}

export interface Discovery {
  url?: unknown;
  pid?: unknown;
  /** When the service's process started (`procStart`); absent from older releases' files. */
  proc_start?: unknown;
  /** The process that wrote the file is gone, or its pid is another program's now (`isService`). */
  stale: boolean;
}

/**
 * The service's discovery file (service/discovery.py); null when absent or unreadable. Given
 * `db`, a file naming a service of another db is stale too (lite.py `read_discovery`).
 */
export function readDiscovery(path: string, db: string | null = null): Discovery | null {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return null;
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) return null;
  const info = data as Record<string, unknown>;
  return { ...info, stale: !isService(info) || (db !== null && !serves(info, db)) };
}

/**
 * Whether the service a discovery file names serves `db` (its `db_path`; a file without one,
 * an older release's, is taken for this db's) (lite.py `serves`).
 */
export function serves(info: Record<string, unknown>, db: string): boolean {
  const published = info["db_path"];
  if (typeof published !== "string") return true;
  return realPath(expandHome(published)) === realPath(expandHome(db));
}

/** `path` absolute with its symlinks resolved; a file not there (yet) by its nearest existing
 * folder's real path, as Python's `os.path.realpath` names it. */
function realPath(path: string): string {
  const absolute = resolvePath(path);
  const missing: string[] = [];
  for (let head = absolute; ; head = dirname(head)) {
    try {
      return join(realpathSync(head), ...missing);
    } catch {
      if (dirname(head) === head) return absolute;
      missing.unshift(basename(head));
    }
  }
}

/**
 * Whether the process a discovery file names is still the service that wrote it, not another
 * program the system gave its pid to since (a hard kill, a reboot): its start time
 * (`proc_start`, Linux) must be the one written (lite.py `is_service`, the hooks' and the
 * service's rule). A file without it (an older release's, or written where /proc is missing)
 * can only tell whether the pid lives.
 */
export function isService(info: Record<string, unknown>): boolean {
  const pid = info["pid"];
  if (!pidAlive(pid)) return false;
  const written = info["proc_start"];
  if (typeof written !== "number" || !Number.isInteger(written)) return true;
  const started = procStart(pid);
  return started === null || started === written;
}

export function pidAlive(pid: unknown): pid is number {
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"; // alive, someone else's
  }
}

/**
 * When process `pid` started, in clock ticks since boot (/proc/<pid>/stat's 22nd field): with
 * the pid, unique until the next boot (lite.py `proc_start`). Null without /proc (macOS,
 * Windows) or when unreadable.
 */
export function procStart(pid: number): number | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return null;
  }
  // The 2nd field, the program's name in parentheses, may hold spaces and ")".
  const field = stat.slice(stat.lastIndexOf(")") + 2).trim().split(/\s+/)[19];
  return field !== undefined && /^\d+$/.test(field) ? Number(field) : null;
}

/**
 * Whether the service at `url` answers at all by `deadline` (PROBE_MS from now by default):
 * what tells a slow service from a hung one after a request timed out, and so whether the
 * shared back-off starts (client.py `answers`). The probe is `HEAD /`, the browse page: public
 * and served from memory, it waits on no store lock or query, so a service busy behind a long
 * writer (a purge, an import) or a slow query answers it at once. Any HTTP answer counts.
 * Never throws.
 */
export function answers(url: string, token: string, deadline: number = now() + PROBE_MS): Promise<boolean> {
  const remaining = Math.floor(deadline - now());
  let target: URL;
  try {
    target = new URL(url + "/");
  } catch {
    return Promise.resolve(false);
  }
  if (remaining <= 0 || (target.protocol !== "http:" && target.protocol !== "https:")) return Promise.resolve(false);
  const headers: Record<string, string> = { Connection: "close", "X-Memory-Harness": "opencode" };
  if (token) headers["Authorization"] = `Bearer ${token}`;
  const transport = target.protocol === "https:" ? https : http;
  const probe = (): Promise<boolean> => new Promise((resolve) => {
    const req = transport.request(target, { method: "HEAD", headers, agent: false }, (res) => {
      res.resume(); // the answer is all that counts (a HEAD has no body)
      clearTimeout(timer);
      resolve(true);
    });
    const timer = setTimeout(() => {
      resolve(false);
      req.destroy();
    }, remaining);
    req.on("error", () => {
      clearTimeout(timer);
      resolve(false);
    });
    req.end();
  });
  return ownerCheck(target, url, deadline).then(probe, () => false);
}

/** Whether a request is a write the spool can keep (/ingest): what a slow mark holds back. */
export function isWrite(method: string, path: string): boolean {
  return method === "POST" && path === "/ingest";
}

export class ServiceClient {
  /** The last "service down" / "timeout" a request of this client met on the network. */
  lastFailure: ServiceUnavailable | null = null;
  /** Whether the service answered at least one request (any status). */
  answered = false;
  /** Whether it took at least one (a 2xx answer). */
  succeeded = false;
  /** Whether it took a write (a 2xx answer to POST /ingest): what ends a slow mark. */
  wrote = false;

  /**
   * Every request fails with it at once, without touching the network (the hooks' back-off is
   * in force); null: none.
   */
  readonly offline: ServiceUnavailable | null;
  /**
   * Every write (POST /ingest) fails with it at once, and only writes (the service's slow
   * mark is in force: backoff.ts); a recall still tries. Null: none.
   */
  readonly writesHeld: ServiceUnavailable | null;
  /** The store expected at this URL (`ServiceAddress.store`), sent as X-Memory-Store; null: none. */
  readonly store: ExpectedStore | null;

  constructor(
    readonly url: string,
    private readonly token: string,
    options: { offline?: ServiceUnavailable | null; writesHeld?: ServiceUnavailable | null; store?: ExpectedStore | null } = {},
  ) {
    this.offline = options.offline ?? null;
    this.writesHeld = options.writesHeld ?? null;
    this.store = options.store ?? null;
  }

  get(path: string, deadline: number): Promise<unknown> {
    return this.request("GET", path, undefined, deadline);
  }

  post(path: string, body: unknown, deadline: number): Promise<unknown> {
    return this.request("POST", path, body, deadline);
  }

  /** The decoded JSON answer; a ServiceUnavailable naming the failure otherwise. */
  async request(method: string, path: string, body: unknown, deadline: number): Promise<unknown> {
    if (this.offline !== null) throw this.offline;
    if (this.writesHeld !== null && isWrite(method, path)) throw this.writesHeld;
    if (deadline - now() < 1) {
      // Not the service's doing: no back-off for it.
      throw new ServiceUnavailable("timeout", "no time left in the action's budget");
    }
    try {
      const answer = await this.send(method, path, body, deadline);
      this.answered = true;
      this.succeeded = true;
      if (isWrite(method, path)) this.wrote = true;
      return answer;
    } catch (error) {
      if (error instanceof ServiceFailed) this.answered = true;
      else if (error instanceof ServiceUnavailable && error.outcome !== "error") this.lastFailure = error;
      throw error;
    }
  }

  private send(method: string, path: string, body: unknown, deadline: number): Promise<unknown> {
    const remaining = Math.floor(deadline - now());
    if (remaining <= 0) {
      return Promise.reject(new ServiceUnavailable("timeout", "no time left in the action's budget"));
    }
    let target: URL;
    try {
      target = new URL(this.url + path);
      if (target.protocol !== "http:" && target.protocol !== "https:") throw new TypeError();
    } catch {
      return Promise.reject(new ServiceUnavailable("error", `not an http(s) URL: ${this.url}`));
    }
    const data = body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body), "utf8");
    const headers: Record<string, string> = {
      Accept: "application/json",
      Connection: "close",
      "Content-Length": String(data.length),
      // The service leaves out of opencode's recall what opencode loads itself (AGENTS.md).
      "X-Memory-Harness": "opencode",
      // What is left of the budget: the service's recall leaves out a channel slower than
      // that (less a margin for its own work), so the others' answer still arrives in time.
      "X-Memory-Wait-Ms": String(Math.min(remaining, WAIT_MAX_MS)),
    };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (this.token) headers["Authorization"] = `Bearer ${this.token}`;
    if (this.store !== null) headers["X-Memory-Store"] = this.store.tag;
    const transport = target.protocol === "https:" ? https : http;

    const request = (): Promise<unknown> => new Promise((resolve, reject) => {
      let settled = false;
      const settle = (error: ServiceUnavailable | null, value?: unknown): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (error) reject(error);
        else resolve(value);
      };
      // `agent: false`: no pooled socket outlives the call (and keeps the process alive).
      const req = transport.request(target, { method, headers, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", (error) => settle(this.failure(error)));
        res.on("end", () => {
          const raw = Buffer.concat(chunks).toString("utf8");
          let answer: unknown = null;
          try {
            answer = raw ? JSON.parse(raw) : null;
          } catch {
            answer = null;
          }
          const status = res.statusCode ?? 0;
          if (status === 421 && this.store !== null && isObject(answer) && "store" in answer) {
            settle(new ServiceMisdirected(`${this.url}: ${String(answer["error"]).split("\n")[0]}; `
              + `MEMORY_DB_PATH/MEMORY_DB_URL here name ${this.store.identity}`));
          } else if (status >= 400) {
            const message = (answer as { error?: unknown } | null)?.error;
            settle(new ServiceFailed(status, String(message ?? raw.slice(-200)), typeof message !== "string"));
          } else if (!isObject(answer)) {
            // Every route answers an object: a web page or an empty 204 is something else on
            // the port, and a write it "took" must be spooled (client.py does the same).
            settle(new NotTheService(`${this.url} answered HTTP ${status} without the service's JSON: not the memory service`));
          } else {
            settle(null, answer);
          }
        });
      });
      const timer = setTimeout(() => {
        settle(new ServiceUnavailable("timeout", `${this.url} did not answer within the budget`));
        req.destroy();
      }, remaining);
      req.on("error", (error) => settle(this.failure(error)));
      req.end(data);
    });
    return ownerCheck(target, this.url, deadline).then(request);
  }

  private failure(error: Error): ServiceUnavailable {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ECONNREFUSED") {
      return new ServiceUnavailable("service down", `nothing listens at ${this.url} (Connection refused)`);
    }
    if (code && /^(ECONNRESET|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EADDRNOTAVAIL|EPIPE)$/.test(code)) {
      return new ServiceUnavailable("service down", `${this.url}: ${error.message}`);
    }
    return new ServiceUnavailable("error", `${this.url}: ${error.message}`);
  }
}
