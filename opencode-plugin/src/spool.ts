/**
 * The write spool (core/semantic_memory/spool.py, whose docstring is the format's spec; keep
 * both in step): a write the service could not take within the action's budget is kept here,
 * and the service replays it at start and every few seconds after, exactly once (it dedups by
 * content hash, so a write that landed late replays as a duplicate).
 *
 * One file per write in `spool/` beside the db, named `<time_ns, 20 digits>-<pid>-<8 hex>.json`
 * so that names sort oldest first, holding
 * `{"v": 1, "ts": <unix s>, "harness": …, "event": …, "path": "/ingest", "body": {…}}`. It is
 * written as `.<name>.tmp`, fsync'd and renamed into place, all synchronously: once
 * `appendSpool` returns the write survives opencode exiting (or the machine losing power).
 *
 * `replaySpool` hands the queued writes to a service that answers (the Python hooks do the
 * same, runner.py `_after_contact`), so a service that does not drain this spool itself (one
 * with another db) still gets them: a replayer claims a file by renaming it to
 * `<name>.claim-<pid>` (one rename wins), deletes it once the service took it, renames it back
 * when the service could not, and moves it to `rejected/` (reason added) when the service
 * refused it as invalid: the whole write (a 4xx), or the memories it refused one by one in a
 * 200 answer (`refusedItems`), the rest being stored. A live write the service refuses is kept
 * there too (`appendSpool` with `rejected`), as the record
 * `{…, "body": {…}, "rejected": <reason>, "rejected_at": <unix s>}`.
 */

import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";

import { isObject } from "./records.js";
import { slice } from "./text.js";

export const SPOOL_VERSION = 1;
/** The folder inside the spool that keeps what the service refused. */
export const REJECTED = "rejected";

/** Unix time in ns: the wall clock at load plus the monotonic clock since (names stay ordered). */
const EPOCH_NS = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();

function timeNs(): bigint {
  return EPOCH_NS + process.hrtime.bigint();
}

export interface SpoolRecord {
  v: number;
  ts: number;
  harness: string;
  event: string;
  path: string;
  body: Record<string, unknown>;
  /** Why the service refused it (records under `rejected/` only), and when. */
  rejected?: string;
  rejected_at?: number;
}

/**
 * Stamps each memory of an /ingest body (one memory, or `{"items": […]}`) with `created_at` =
 * now when it has none, so a replayed memory keeps the time it was made (adapter.py `spool`).
 */
export function stampCreatedAt(body: Record<string, unknown>, ts: number = Date.now() / 1000): void {
  const items = Array.isArray(body["items"]) ? (body["items"] as unknown[]) : [body];
  for (const item of items) {
    if (typeof item === "object" && item !== null && !("created_at" in item)) {
      (item as Record<string, unknown>)["created_at"] = ts;
    }
  }
}

/**
 * Writes one request durably and returns its file; throws when the disk cannot take it (the
 * caller reports the write as lost). `origin.rejected`: the reason the service refused the
 * write; it goes to `rejected/` instead, for a person to see (spool.py `append`).
 */
export function appendSpool(
  folder: string,
  path: string,
  body: Record<string, unknown>,
  origin: { harness?: string; event?: string; rejected?: string } = {},
): string {
  const name = `${timeNs().toString().padStart(20, "0")}-${process.pid}-${randomBytes(4).toString("hex")}`;
  const record: SpoolRecord = {
    v: SPOOL_VERSION,
    ts: Math.round(Date.now()) / 1000,
    harness: origin.harness ?? "",
    event: origin.event ?? "",
    path,
    body,
  };
  if (origin.rejected !== undefined) {
    record.rejected = slice(origin.rejected, 0, 500);
    record.rejected_at = record.ts;
  }
  const directory = origin.rejected !== undefined ? join(folder, REJECTED) : folder;
  const data = Buffer.from(JSON.stringify(record), "utf8");
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const tmp = join(directory, `.${name}.tmp`);
  const final = join(directory, `${name}.json`);
  const fd = openSync(tmp, "wx", 0o600);
  try {
    try {
      for (let offset = 0; offset < data.length; ) offset += writeSync(fd, data, offset);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, final);
  } catch (error) {
    try {
      unlinkSync(tmp);
    } catch {
      // renamed already, or never made
    }
    throw error;
  }
  syncFolder(directory);
  return final;
}

/** Makes the rename itself durable (POSIX; skipped where a folder cannot be opened). */
function syncFolder(folder: string): void {
  let fd: number;
  try {
    fd = openSync(folder, "r");
  } catch {
    return;
  }
  try {
    fsyncSync(fd);
  } catch {
    // not supported here
  } finally {
    closeSync(fd);
  }
}

const CLAIM = ".claim-";

/** The service could not take a write now: it stays queued, and the replay stops. */
export class SpoolRetry extends Error {}
/** The service refused a write as invalid: it moves to `rejected/` with this reason. */
export class SpoolRefused extends Error {}
/** The spool cannot be replayed by this user (a folder or file it may not write or read):
 * nothing is taken or rejected; the reason is logged. */
export class SpoolStuck extends Error {}

/** The queued writes' names, oldest first (claimed and temporary files left out). */
export function pendingSpool(folder: string): string[] {
  try {
    return readdirSync(folder)
      .filter((name) => name.endsWith(".json") && !name.startsWith("."))
      .sort();
  } catch {
    return [];
  }
}

/**
 * Sends the queued writes oldest first until none is left, `send` throws SpoolRetry, or
 * `deadline` (`until()` returns false) passes. `send` resolves with the service's answer once
 * it took the write (stored, or already stored) and throws SpoolRefused when it refused it as
 * invalid; anything else it throws leaves the write queued and is thrown on. The memories of a
 * write the service refused one by one (a 200 answer, an item's status `rejected`: a secret,
 * say) go to `rejected/` with their reasons too, so nothing is dropped silently.
 */
export async function replaySpool(
  folder: string,
  send: (path: string, body: Record<string, unknown>) => Promise<unknown>,
  until: () => boolean,
): Promise<{ sent: number; rejected: number }> {
  let sent = 0;
  let rejected = 0;
  for (const name of pendingSpool(folder)) {
    if (!until()) break;
    const claimed = join(folder, `${name}${CLAIM}${process.pid}`);
    try {
      renameSync(join(folder, name), claimed);
      utimesSync(claimed, new Date(), new Date()); // the claim's age, for a stale-claim sweep
    } catch (error) {
      if (errorCode(error) === "ENOENT") continue; // another replayer took it
      // A folder this user may not write (made by a sudo run): stuck, not taken (spool.py).
      throw new SpoolStuck(`the spool folder ${folder} cannot be replayed: ${String(error)}`);
    }
    let record: SpoolRecord | null;
    try {
      record = readRecord(claimed);
    } catch (error) {
      putBack(folder, name, claimed);
      throw new SpoolStuck(`a spooled write in ${folder} cannot be read: ${String(error)}`);
    }
    if (record === null) {
      reject(folder, name, claimed, "not a spooled write (unreadable JSON)", null);
      rejected += 1;
      continue;
    }
    let answer: unknown;
    try {
      answer = await send(record.path, record.body);
    } catch (error) {
      if (error instanceof SpoolRefused) {
        reject(folder, name, claimed, error.message, record);
        rejected += 1;
        continue;
      }
      putBack(folder, name, claimed);
      if (error instanceof SpoolRetry) break;
      throw error;
    }
    const refused = refusedItems(record.body, answer);
    if (refused !== null) {
      const [body, reason] = refused;
      reject(folder, name, claimed, reason, { ...record, body }); // the rest was taken
      rejected += 1;
      if (body === record.body) continue;
    } else {
      try {
        unlinkSync(claimed);
      } catch {
        // gone already
      }
    }
    sent += 1;
  }
  return { sent, rejected };
}

/**
 * [what of `body` the service refused, why] from its /ingest answer; null when it took
 * everything (spool.py `refused_items`). A batch gives back the refused items alone
 * (`{"items": […]}`); a whole write refused is `body` itself.
 */
export function refusedItems(body: Record<string, unknown>, answer: unknown): [Record<string, unknown>, string] | null {
  if (!isObject(answer)) return null;
  if (answer["status"] === "rejected") return [body, String(answer["reason"] || "refused")];
  const results = answer["results"];
  const items = body["items"];
  if (!Array.isArray(results) || !Array.isArray(items)) return null;
  const refused: unknown[] = [];
  const reasons = new Set<string>();
  items.forEach((item, index) => {
    const result: unknown = results[index];
    if (isObject(result) && result["status"] === "rejected") {
      refused.push(item);
      reasons.add(String(result["reason"] || "refused"));
    }
  });
  if (!refused.length) return null;
  const reason = [...reasons].join("; ");
  return refused.length === items.length ? [body, reason] : [{ ...body, items: refused }, reason];
}

/** The spooled write at `path`; null when it is not one (unreadable JSON). A file this user
 * may not read throws: it is stuck, not invalid. */
function readRecord(path: string): SpoolRecord | null {
  const text = readFileSync(path, "utf8");
  try {
    const record = JSON.parse(text) as SpoolRecord;
    const valid = typeof record === "object" && record !== null && typeof record.path === "string" &&
      typeof record.body === "object" && record.body !== null && !Array.isArray(record.body);
    return valid ? record : null;
  } catch {
    return null;
  }
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

function putBack(folder: string, name: string, claimed: string): void {
  try {
    renameSync(claimed, join(folder, name));
  } catch {
    // a stale-claim sweep puts it back
  }
}

/** Keeps a refused write under `rejected/` with the reason, for `memory-mcp spool list`. */
function reject(folder: string, name: string, claimed: string, reason: string, record: SpoolRecord | null): void {
  const target = join(folder, REJECTED, name);
  try {
    mkdirSync(join(folder, REJECTED), { recursive: true, mode: 0o700 });
    if (record === null) {
      renameSync(claimed, target);
      return;
    }
    const tmp = join(folder, REJECTED, `.${name}.tmp`);
    writeFileSync(tmp, JSON.stringify({
      ...record, rejected: slice(reason, 0, 500), rejected_at: Math.round(Date.now()) / 1000,
    }), { mode: 0o600 });
    renameSync(tmp, target);
    unlinkSync(claimed);
  } catch {
    putBack(folder, name, claimed);
  }
}
