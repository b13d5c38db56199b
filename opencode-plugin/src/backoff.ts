/**
 * The hooks' shared back-off (core/semantic_memory/backoff.py; keep both in step): after one
 * action of any harness met a dead or hung service, every harness's hooks skip the network
 * until `until`, spooling their writes and injecting nothing, instead of each paying its whole
 * budget for the same silence. Dead: the connection is refused (or reset, the host unknown).
 * Hung: a request timed out and a probe right after it (`HEAD /`, which the service answers
 * without store work) gets no answer within 0.5 s either (client.ts `answers`). A timeout on a
 * service that answers the probe met a slow one (a write waiting while a purge or an import
 * holds the store's write lock) and starts nothing: the recalls, which only read, still answer.
 * One JSON file beside the db,
 * `{"until": <unix s>, "outcome": "service down" | "timeout", "detail": …, "url": …}`, replaced
 * atomically. It holds for the URL that failed only: a dead MEMORY_PLUGIN_URL in one shell must
 * not silence another shell's live service (same db folder, another URL). The service deletes
 * it when it starts; an action that got an answer from that URL deletes it.
 *
 * The slow mark is its lighter sibling, `hooks.slow.json` in the same folder and the same
 * format (`"outcome": "slow"`): after a request timed out while the service answered the probe
 * (slow, not hung), every harness's writes of the next SLOW_MS go straight to the spool instead
 * of each waiting its whole budget; recalls still try. A write the service takes ends it, and
 * so does the service starting.
 */

import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** The slow mark's file, beside the back-off's (backoff.py SLOW_FILE). */
export const SLOW_FILE = "hooks.slow.json";
/** How long a slow mark holds (backoff.py SLOW_S), at most MEMORY_HOOK_BACKOFF_S. */
export const SLOW_MS = 20_000;

export interface BackOff {
  /** Unix seconds. */
  until: number;
  outcome: "service down" | "timeout";
  detail: string;
}

/** A slow mark in force: until when (unix seconds), and the request that met the slowness. */
export interface SlowMark {
  until: number;
  detail: string;
}

/** The back-off in force now for the service at `url`, or null (no file, run out, unreadable,
 * or another URL's). A file without a URL (an older release's) holds for every URL. */
export function activeBackOff(path: string, url: string, nowS: number = Date.now() / 1000): BackOff | null {
  const data = readState(path);
  if (data === null) return null;
  const { until, outcome, detail } = data;
  const end = Number(until);
  if (until === null || until === undefined || !Number.isFinite(end) || outcome === undefined) return null;
  if (!forUrl(data, url) || nowS >= end) return null;
  return { until: end, outcome: outcome === "timeout" ? "timeout" : "service down", detail: String(detail ?? "") };
}

/** Backs off from the service at `url` for `ms` (0 = never); never throws (an action must
 * still end on time). */
export function startBackOff(path: string, url: string, ms: number, outcome: BackOff["outcome"], detail: string): void {
  writeState(path, url, ms, outcome, detail);
}

/** The slow mark's file beside the back-off file `path`. */
export function slowPath(path: string): string {
  return join(dirname(path), SLOW_FILE);
}

/** The slow mark in force now for the service at `url` (back-off file `path`), or null. */
export function activeSlowMark(path: string, url: string, nowS: number = Date.now() / 1000): SlowMark | null {
  const data = readState(slowPath(path));
  if (data === null || !forUrl(data, url)) return null;
  const end = Number(data.until);
  if (data.until === null || data.until === undefined || !Number.isFinite(end) || nowS >= end) return null;
  return { until: end, detail: String(data.detail ?? "") };
}

/** Marks the service at `url` slow for `ms` (0 = never): writes spool at once. Never throws. */
export function markSlow(path: string, url: string, ms: number, detail: string): void {
  writeState(slowPath(path), url, ms, "slow", detail);
}

/** Ends the slow mark of the service at `url` (one of its writes was taken). */
export function clearSlowMark(path: string, url: string): void {
  clearBackOff(slowPath(path), url);
}

/** How long a slow mark holds under MEMORY_HOOK_BACKOFF_S = `backoffMs` (backoff.py `slow_seconds`). */
export function slowMs(backoffMs: number): number {
  return Math.min(SLOW_MS, backoffMs);
}

function writeState(path: string, url: string, ms: number, outcome: string, detail: string): void {
  if (ms <= 0) return;
  const data = JSON.stringify({
    until: Math.round(Date.now() + ms) / 1000,
    outcome,
    detail: detail.slice(0, 300),
    url,
  });
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 }); // the first action may come before any log
    writeFileSync(tmp, data, { encoding: "utf8", mode: 0o600 });
    renameSync(tmp, path);
  } catch {
    try {
      unlinkSync(tmp);
    } catch {
      // never made
    }
  }
}

/** Ends the back-off: any, and the slow mark too (no `url`), or only one from `url` (an
 * answer from there says nothing of another URL's service). */
export function clearBackOff(path: string, url?: string): void {
  if (url === undefined) unlink(slowPath(path));
  else if (!forUrl(readState(path) ?? {}, url)) return;
  unlink(path);
}

function unlink(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // none
  }
}

function readState(path: string): Record<string, unknown> | null {
  try {
    const data: unknown = JSON.parse(readFileSync(path, "utf8"));
    return typeof data === "object" && data !== null && !Array.isArray(data) ? (data as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function forUrl(data: Record<string, unknown>, url: string): boolean {
  return data.url === undefined || data.url === url;
}
