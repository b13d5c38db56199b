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
 * `{"until": <unix s>, "outcome": "service down" | "timeout", "detail": …}`, replaced
 * atomically; the service deletes it when it starts, an action that got an answer deletes it.
 */

import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

export interface BackOff {
  /** Unix seconds. */
  until: number;
  outcome: "service down" | "timeout";
  detail: string;
}

/** The back-off in force now, or null (no file, run out, or unreadable). */
export function activeBackOff(path: string, nowS: number = Date.now() / 1000): BackOff | null {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return null;
  }
  if (typeof data !== "object" || data === null) return null;
  const { until, outcome, detail } = data as Record<string, unknown>;
  const end = Number(until);
  if (until === null || until === undefined || !Number.isFinite(end) || outcome === undefined) return null;
  if (nowS >= end) return null;
  return { until: end, outcome: outcome === "timeout" ? "timeout" : "service down", detail: String(detail ?? "") };
}

/** Backs off for `ms` (0 = never); never throws (an action must still end on time). */
export function startBackOff(path: string, ms: number, outcome: BackOff["outcome"], detail: string): void {
  if (ms <= 0) return;
  const data = JSON.stringify({
    until: Math.round(Date.now() + ms) / 1000,
    outcome,
    detail: detail.slice(0, 300),
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

export function clearBackOff(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // none
  }
}
