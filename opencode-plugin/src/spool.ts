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
 */

import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";

export const SPOOL_VERSION = 1;

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
 * caller reports the write as lost).
 */
export function appendSpool(
  folder: string,
  path: string,
  body: Record<string, unknown>,
  origin: { harness?: string; event?: string } = {},
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
  const data = Buffer.from(JSON.stringify(record), "utf8");
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const tmp = join(folder, `.${name}.tmp`);
  const final = join(folder, `${name}.json`);
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
  syncFolder(folder);
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
