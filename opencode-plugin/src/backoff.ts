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
 */

import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

export interface BackOff {
  /** Unix seconds. */
  until: number;
  outcome: "service down" | "timeout";
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

/** Ends the back-off: any (no `url`), or only one from `url` (an answer from there says
 * nothing of another URL's service). */
export function clearBackOff(path: string, url?: string): void {
  if (url !== undefined && !forUrl(readState(path) ?? {}, url)) return;
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
