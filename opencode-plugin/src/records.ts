/**
 * What a captured tool call is stored as: `tool(input gist):` and its output, cut to 2,000
 * characters (head and tail), the record format of the Python adapters (harness/adapter.py
 * `capture_record`), so one tool call makes the same memory whichever harness ran it.
 */

import { length, lstrip, rstrip, slice, strip, words } from "./text.js";

/** Longest tool output kept in a capture record (head and tail of longer ones). */
export const CAPTURE_CHARS = 2000;
/** The input keys that say what a call did, first match wins (adapter.py describe_input). */
const GIST_KEYS = ["command", "cmd", "file_path", "filePath", "path", "pattern", "query", "url"];

export interface ToolCall {
  name: string;
  input: unknown;
  output: string;
}

/** The one-line gist of a tool's input: its command, path or query if it has one. */
export function describeInput(value: unknown): string {
  if (isObject(value)) {
    for (const key of GIST_KEYS) {
      const found = value[key];
      if (typeof found === "string") return found;
      if (Array.isArray(found)) return found.map(String).join(" ");
    }
  }
  const text = typeof value === "string" ? value : pythonJson(value);
  return slice(words(text).join(" "), 0, 200);
}

/** `tool(input gist):\n<output>` (head and tail of a long output); a note when it has none. */
export function captureRecord(tool: ToolCall): string {
  let output = strip(tool.output);
  const size = length(output);
  if (size > CAPTURE_CHARS) {
    const half = Math.floor(CAPTURE_CHARS / 2);
    output =
      `${rstrip(slice(output, 0, half))}\n[… ${size - CAPTURE_CHARS} characters cut …]\n` +
      lstrip(slice(output, size - half));
  }
  const gist = slice(words(describeInput(tool.input)).join(" "), 0, 300);
  return output ? `${tool.name}(${gist}):\n${output}` : `${tool.name}(${gist}): (no output)`;
}

/** A JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `json.dumps(value, ensure_ascii=False)`: Python's separators (", " and ": "). */
export function pythonJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(", ")}]`;
  if (isObject(value)) {
    const items = Object.entries(value).filter(([, item]) => item !== undefined);
    return `{${items.map(([key, item]) => `${JSON.stringify(key)}: ${pythonJson(item)}`).join(", ")}}`;
  }
  if (typeof value === "number" && !Number.isFinite(value)) {
    return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
  }
  return JSON.stringify(value) ?? "null";
}
