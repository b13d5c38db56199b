/**
 * The hook log: one JSON line per action in `hooks.jsonl` beside the db file, the log the
 * Python hooks write (harness/outcomes.py) and `memory-mcp doctor` reads back, so a dead
 * service or a timeout in opencode is as visible as in any other harness.
 */

import { closeSync, mkdirSync, openSync, renameSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";

/** The log is rotated (one generation kept, `hooks.jsonl.1`) past this many bytes. */
export const MAX_LOG_BYTES = 1_000_000;

export type Outcome =
  | "injected"
  | "nothing relevant"
  | "stored"
  | "spooled"
  | "refused"
  | "skipped"
  | "service down"
  | "timeout"
  | "error";

export interface OutcomeEntry {
  harness: string;
  event: string;
  outcome: Outcome;
  detail: string;
  session: string | null;
  project: string | null;
  ms: number;
  /** A problem worth a line whatever the outcome (a malformed `.semantic-memory.toml`). */
  warning?: string;
}

/** Append one outcome; never throws (a log problem must not fail the plugin). */
export function record(path: string, entry: OutcomeEntry): void {
  const line = JSON.stringify({ ts: Math.round(Date.now()) / 1000, ...entry }) + "\n";
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 }); // the data folder: its owner's
    try {
      if (statSync(path).size > MAX_LOG_BYTES) renameSync(path, `${path}.1`);
    } catch {
      // no log yet
    }
    const fd = openSync(path, "a", 0o600);
    try {
      writeSync(fd, line); // one write: lines of concurrent writers stay whole
    } finally {
      closeSync(fd);
    }
  } catch {
    // the log is best effort
  }
}
