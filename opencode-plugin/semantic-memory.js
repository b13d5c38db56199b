// semantic-memory-mcp's opencode plugin (https://opencode.ai/docs/plugins/).
// Generated from opencode-plugin/src by `npm run build`: edit the sources, not this file.

// src/memory.ts
import { randomBytes as randomBytes2 } from "node:crypto";

// src/autostart.ts
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { dirname as dirname3, join as join3 } from "node:path";

// src/client.ts
import { createHash } from "node:crypto";
import { readFileSync as readFileSync3, realpathSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { connect } from "node:net";
import { basename, dirname as dirname2, join as join2, resolve as resolvePath } from "node:path";
import { performance } from "node:perf_hooks";

// src/peer.ts
import { readFileSync } from "node:fs";
import { isIPv4 } from "node:net";
import { endianness } from "node:os";
var ROOT = 0;
function trusted(uid) {
  if (uid === null || typeof process.getuid !== "function") return true;
  return uid === process.getuid() || uid === ROOT;
}
function owner(own, remote) {
  const [mine, theirs] = [plain(own.address), plain(remote.address)];
  if (!loopback(mine) || !loopback(theirs)) return null;
  const wanted = /* @__PURE__ */ new Set([`${entry(mine, own.port)} ${entry(theirs, remote.port)}`]);
  if (isIPv4(mine) && isIPv4(theirs)) {
    wanted.add(`${entry(mine, own.port, true)} ${entry(theirs, remote.port, true)}`);
  }
  for (const table2 of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text2;
    try {
      text2 = readFileSync(table2, "ascii");
    } catch {
      continue;
    }
    for (const line of text2.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length > 7 && wanted.has(`${fields[1]} ${fields[2]}`)) return Number(fields[7]);
    }
  }
  return null;
}
function plain(address) {
  const host = address.split("%")[0] ?? "";
  return host.startsWith("::ffff:") && host.includes(".") ? host.slice(7) : host;
}
function loopback(host) {
  return host.startsWith("127.") || host === "::1";
}
function entry(host, port, mapped = false) {
  let bytes;
  if (isIPv4(host)) {
    bytes = host.split(".").map(Number);
    if (mapped) bytes = [...new Array(10).fill(0), 255, 255, ...bytes];
  } else {
    bytes = ipv6Bytes(host);
  }
  const little = endianness() === "LE";
  let hex = "";
  for (let i = 0; i < bytes.length; i += 4) {
    const word = bytes.slice(i, i + 4);
    for (const byte of little ? word.reverse() : word) hex += byte.toString(16).padStart(2, "0");
  }
  return `${hex.toUpperCase()}:${port.toString(16).toUpperCase().padStart(4, "0")}`;
}
function ipv6Bytes(host) {
  const [head = "", tail = ""] = host.split("::");
  const groups = (part) => part ? part.split(":").map((g) => parseInt(g, 16)) : [];
  const [front, back] = [groups(head), host.includes("::") ? groups(tail) : []];
  const all = [...front, ...new Array(8 - front.length - back.length).fill(0), ...back];
  return all.flatMap((group) => [group >> 8, group & 255]);
}

// src/text.ts
var SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
var SPACE_CHAR = new RegExp(`[${SPACE}]`);
var RUNS = new RegExp(`[${SPACE}]+`);
var SURROGATE = /[\ud800-\udfff]/;
function strip(text2) {
  const end = spaceStart(text2, text2.length, 0);
  return text2.slice(spaceEnd(text2, 0, end), end);
}
function lstrip(text2) {
  return text2.slice(spaceEnd(text2, 0, text2.length));
}
function rstrip(text2) {
  return text2.slice(0, spaceStart(text2, text2.length, 0));
}
function spaceEnd(text2, from, end) {
  while (from < end && SPACE_CHAR.test(text2.charAt(from))) from++;
  return from;
}
function spaceStart(text2, end, floor) {
  while (end > floor && SPACE_CHAR.test(text2.charAt(end - 1))) end--;
  return end;
}
function words(text2) {
  return text2.split(RUNS).filter(Boolean);
}
function length(text2) {
  if (!SURROGATE.test(text2)) return text2.length;
  let count = 0;
  for (const _ of text2) count++;
  return count;
}
function slice(text2, start, end = Infinity) {
  if (!SURROGATE.test(text2)) return text2.slice(start, end);
  return Array.from(text2).slice(start, end).join("");
}

// src/records.ts
var CAPTURE_CHARS = 2e3;
var GIST_KEYS = ["command", "cmd", "file_path", "filePath", "path", "pattern", "query", "url"];
function describeInput(value) {
  if (isObject(value)) {
    for (const key of GIST_KEYS) {
      const found = value[key];
      if (typeof found === "string") return found;
      if (Array.isArray(found)) return found.map(String).join(" ");
    }
  }
  const text2 = typeof value === "string" ? value : pythonJson(value);
  return slice(words(text2).join(" "), 0, 200);
}
function captureRecord(tool) {
  let output = strip(tool.output);
  const size = length(output);
  if (size > CAPTURE_CHARS) {
    const half = Math.floor(CAPTURE_CHARS / 2);
    output = `${rstrip(slice(output, 0, half))}
[\u2026 ${size - CAPTURE_CHARS} characters cut \u2026]
` + lstrip(slice(output, size - half));
  }
  const gist = slice(words(describeInput(tool.input)).join(" "), 0, 300);
  return output ? `${tool.name}(${gist}):
${output}` : `${tool.name}(${gist}): (no output)`;
}
function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
function pythonJson(value) {
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(", ")}]`;
  if (isObject(value)) {
    const items = Object.entries(value).filter(([, item]) => item !== void 0);
    return `{${items.map(([key, item]) => `${JSON.stringify(key)}: ${pythonJson(item)}`).join(", ")}}`;
  }
  if (typeof value === "number" && !Number.isFinite(value)) {
    return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
  }
  return JSON.stringify(value) ?? "null";
}

// src/settings.ts
import { readFileSync as readFileSync2 } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

// src/private.ts
var WS = "[ \\t\\r\\n\\f\\v]";
var TAG = new RegExp(`<${WS}*(/?)${WS}*pr[i\u0130]vate(?=[ \\t\\r\\n\\f\\v/>])[^>]*>`, "gi");
var TRAILING_WS = /[ \t\r\n\f\v]+$/;
var OPENING = /[<\uff1c\ufe64]/;
var NON_ASCII = /[^\x00-\x7f]/;
var NON_ASCII_CHARS = /[^\x00-\x7f]/gu;
var INVISIBLE = new RegExp("\\p{Default_Ignorable_Code_Point}|\\p{Cf}", "u");
var LATIN_VARIANTS = { a: "\u1D00\u0251", e: "\u1D07", i: "\u026A\u0131", p: "\u1D18", r: "\u0280", t: "\u1D1B", v: "\u1D20" };
var SCRIPT_LOOKALIKES = {
  a: "\u0430\u03B1",
  e: "\u0435\u03B5\u0454",
  i: "\u0456\u03B9",
  p: "\u0440\u03C1",
  r: "\u0433",
  t: "\u0442\u03C4",
  v: "\u03BD\u0475"
};
function table(letters) {
  return new Map(Object.entries(letters).flatMap(([latin, chars]) => [...chars].map((c) => [c, latin])));
}
var VARIANT_OF = table(LATIN_VARIANTS);
var LOOKALIKE_OF = table(SCRIPT_LOOKALIKES);
var VARIANT_CHARS = new RegExp(`[${Object.values(LATIN_VARIANTS).join("")}]`, "g");
var SCRIPT_CHARS = new RegExp(`[${Object.values(SCRIPT_LOOKALIKES).join("")}]`, "g");
var WORD = /[\p{L}\p{Nl}\p{No}]+/gu;
var HAS_LATIN = /[a-zA-Z]/;
var shown = /* @__PURE__ */ new Map();
function readAs(char) {
  let form = shown.get(char);
  if (form === void 0) {
    form = [...char.normalize("NFKC")].filter((c) => !INVISIBLE.test(c)).join("");
    shown.set(char, form);
  }
  return form;
}
function visible(text2) {
  let view = text2.replace(NON_ASCII_CHARS, readAs);
  VARIANT_CHARS.lastIndex = 0;
  if (VARIANT_CHARS.test(view)) view = view.replace(VARIANT_CHARS, (c) => VARIANT_OF.get(c) ?? c);
  SCRIPT_CHARS.lastIndex = 0;
  if (SCRIPT_CHARS.test(view)) {
    view = view.replace(WORD, (word) => {
      const folded = word.replace(SCRIPT_CHARS, (c) => LOOKALIKE_OF.get(c) ?? c);
      return folded !== word && HAS_LATIN.test(word) ? folded : word;
    });
  }
  return view;
}
function origins(text2) {
  const found = [];
  let done = 0;
  for (const match of text2.matchAll(NON_ASCII_CHARS)) {
    const at = match.index ?? 0;
    for (let i = done; i < at; i++) found.push(i);
    for (let n = readAs(match[0]).length; n > 0; n--) found.push(at);
    done = at + match[0].length;
  }
  for (let i = done; i < text2.length; i++) found.push(i);
  return found;
}
function keptSpans(view) {
  const kept = [];
  let depth = 0;
  let position = 0;
  let found = false;
  for (const match of view.matchAll(TAG)) {
    found = true;
    const start = match.index ?? 0;
    if (depth === 0) kept.push([position, start]);
    position = start + match[0].length;
    if (match[1]) depth = Math.max(depth - 1, 0);
    else if (!match[0].slice(0, -1).replace(TRAILING_WS, "").endsWith("/")) depth += 1;
  }
  if (!found) return null;
  if (depth === 0) kept.push([position, view.length]);
  return kept;
}
function stripPrivate(text2) {
  if (!OPENING.test(text2)) return text2;
  const view = NON_ASCII.test(text2) ? visible(text2) : text2;
  if (!view.toLowerCase().includes("vate")) return text2;
  let kept = keptSpans(view);
  if (kept === null) return text2;
  if (view !== text2) {
    const from = origins(text2);
    const after = (i) => from[i] + ((text2.codePointAt(from[i]) ?? 0) > 65535 ? 2 : 1);
    kept = kept.map(([start, end]) => [start ? after(start - 1) : 0, end < from.length ? from[end] : text2.length]);
  }
  return kept.map(([start, end]) => text2.slice(start, end)).join("");
}

// src/settings.ts
var DEFAULT_DB = "~/.local/share/memory-mcp/memory.db";
var MAX_PROJECT_CHARS = 256;
var BadValue = class extends Error {
};
function text(raw) {
  if (typeof raw === "string") return raw.trim();
  if (typeof raw === "number" || typeof raw === "boolean") return String(raw);
  throw new BadValue(`expected a string, got ${JSON.stringify(raw)}`);
}
function numberText(raw) {
  return typeof raw === "string" ? raw : text(raw);
}
var NUMBER_SPACE = "\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
var DIGITS = "\\p{Nd}(?:_?\\p{Nd})*";
var PY_INT = new RegExp(`^[${NUMBER_SPACE}]*([+-]?${DIGITS})[${NUMBER_SPACE}]*$`, "u");
var PY_FLOAT = new RegExp(`^[${NUMBER_SPACE}]*([+-]?(?:(?:${DIGITS}(?:\\.(?:${DIGITS})?)?|\\.${DIGITS})(?:[eE][+-]?${DIGITS})?|inf|infinity|nan))[${NUMBER_SPACE}]*$`, "iu");
var DIGIT = new RegExp("^\\p{Nd}$", "u");
function asciiDigits(text2) {
  let out = "";
  for (const char of text2) {
    if (char === "_") continue;
    const code = char.codePointAt(0);
    if (code < 128 || !DIGIT.test(char)) {
      out += char;
      continue;
    }
    let zero = code;
    while (DIGIT.test(String.fromCodePoint(zero - 1))) zero--;
    out += String((code - zero) % 10);
  }
  return out;
}
function pythonInt(raw) {
  const found = PY_INT.exec(raw);
  return found ? Number(asciiDigits(found[1])) || 0 : Number.NaN;
}
function pythonFloat(raw) {
  const found = PY_FLOAT.exec(raw);
  if (!found) return Number.NaN;
  const number = asciiDigits(found[1]).toLowerCase();
  const sign = number.startsWith("-") ? -1 : 1;
  const bare = number.replace(/^[+-]/, "");
  if (bare === "nan") return Number.NaN;
  return bare.startsWith("inf") ? sign * Infinity : Number(number);
}
function integer(min, max) {
  return (raw) => {
    const value = typeof raw === "number" ? raw : pythonInt(numberText(raw));
    if (!Number.isInteger(value) || value < min || value > max) {
      const within = max === Infinity ? `${min} or more` : `within ${min}..${max}`;
      throw new BadValue(`must be a whole number ${within}, not ${JSON.stringify(raw)}`);
    }
    return value;
  };
}
function flag(raw) {
  if (typeof raw === "boolean") return raw;
  const word = text(raw).toLowerCase();
  if (["1", "true", "yes", "on"].includes(word)) return true;
  if (["0", "false", "no", "off"].includes(word)) return false;
  throw new BadValue(`must be one of 1/0, true/false, yes/no, on/off, not ${JSON.stringify(raw)}`);
}
function seconds(raw) {
  const value = typeof raw === "number" ? raw : pythonFloat(numberText(raw));
  if (!(value >= 0.05 && value <= 60)) {
    throw new BadValue(`must be 0.05..60 seconds, not ${JSON.stringify(raw)}`);
  }
  return Math.round(value * 1e3);
}
function backoffSeconds(raw) {
  const value = typeof raw === "number" ? raw : pythonFloat(numberText(raw));
  if (!(value >= 0 && value <= 3600)) {
    throw new BadValue(`must be 0..3600 seconds, not ${JSON.stringify(raw)}`);
  }
  return Math.round(value * 1e3);
}
function projectName(raw) {
  const name = strip(typeof raw === "string" ? raw : text(raw));
  if (!name) return "";
  if ([...name].length > MAX_PROJECT_CHARS) throw new BadValue(`must be 1..${MAX_PROJECT_CHARS} characters`);
  if (/[\n\r\t\0]/.test(name)) throw new BadValue("must be one line (no newline, tab or NUL)");
  if (stripPrivate(name) !== name) throw new BadValue("must not hold <private> text");
  return name;
}
function toolNames(raw) {
  const names = Array.isArray(raw) ? raw.map(text) : text(raw).split(",");
  return new Set(names.map((name) => name.trim().toLowerCase()).filter(Boolean));
}
function expandHome(path) {
  return path === "~" || path.startsWith("~/") ? join(homedir(), path.slice(1)) : path;
}
var FIELDS = {
  url: { env: "MEMORY_PLUGIN_URL", option: "url", parse: (raw) => text(raw).replace(/\/+$/, ""), fallback: "" },
  port: { env: "MEMORY_PORT", option: "port", parse: integer(0, 65535), fallback: 8765 },
  token: { env: "MEMORY_PLUGIN_TOKEN", option: "token", parse: text, fallback: "" },
  limit: { env: "MEMORY_PLUGIN_LIMIT", option: "limit", parse: integer(1, 50), fallback: 5 },
  budgetChars: {
    env: "MEMORY_PLUGIN_BUDGET_CHARS",
    option: "budgetChars",
    // The block's wrapper and notice take ~200 characters: below 500 hardly a memory fits.
    // At most what a recall's `budget_chars` takes (core limits.py MAX_BUDGET_CHARS), as the
    // Python settings say (harness/settings.py `validate`).
    parse: integer(500, 1e6),
    fallback: 2e3
  },
  toolCapture: {
    env: "MEMORY_PLUGIN_TOOL_CAPTURE",
    option: "toolCapture",
    parse: toolNames,
    fallback: /* @__PURE__ */ new Set()
  },
  autostart: { env: "MEMORY_PLUGIN_AUTOSTART", option: "autostart", parse: flag, fallback: false },
  debug: { env: "MEMORY_PLUGIN_DEBUG", option: "debug", parse: flag, fallback: false },
  project: { env: "MEMORY_PROJECT", option: "project", parse: projectName, fallback: "" },
  budgetMs: { env: "MEMORY_HOOK_BUDGET_S", option: "budgetS", parse: seconds, fallback: 1500 },
  backoffMs: { env: "MEMORY_HOOK_BACKOFF_S", option: "backoffS", parse: backoffSeconds, fallback: 3e4 },
  dbPath: {
    env: "MEMORY_DB_PATH",
    option: "dbPath",
    parse: (raw) => expandHome(text(raw)),
    fallback: expandHome(DEFAULT_DB)
  },
  discoveryFile: {
    env: "MEMORY_DISCOVERY_FILE",
    option: "discoveryFile",
    parse: text,
    fallback: ""
  },
  command: { env: "MEMORY_PLUGIN_COMMAND", option: "command", parse: text, fallback: "memory-mcp" }
};
function loadSettings(env, options = {}) {
  const problems = [];
  const values = {};
  for (const key of Object.keys(FIELDS)) {
    const field = FIELDS[key];
    let value = field.fallback;
    const fromEnv = env[field.env] || (key === "token" ? env["MEMORY_TOKEN"] : void 0);
    const sources = [
      [field.env, fromEnv === "" ? void 0 : fromEnv],
      [`option ${field.option}`, options[field.option]]
    ];
    for (const [name, raw] of sources) {
      if (raw === void 0 || raw === null) continue;
      try {
        value = field.parse(raw);
      } catch (error) {
        if (!(error instanceof BadValue)) throw error;
        problems.push({ name, message: `${name} ${error.message}; using the default` });
      }
      break;
    }
    values[key] = value;
  }
  const settings = values;
  settings.dbUrl = dbUrl(env);
  settings.storeNamed = Boolean(env["MEMORY_DB_PATH"] || env["MEMORY_DB_URL"] || env["MEMORY_DB_URL_FILE"] || options["dbPath"]);
  return { settings, problems };
}
function dbUrl(env) {
  if (env["MEMORY_DB_URL"]) return env["MEMORY_DB_URL"].trim();
  const file = env["MEMORY_DB_URL_FILE"];
  if (!file) return "";
  try {
    return (readFileSync2(expandHome(file), "utf8").trim().split(/\r?\n/)[0] ?? "").trim();
  } catch {
    return "";
  }
}
function hookLogPath(settings) {
  return join(dirname(settings.dbPath), "hooks.jsonl");
}
function spoolPath(settings) {
  return join(dirname(settings.dbPath), "spool");
}
function approvalsPath(settings) {
  return join(dirname(settings.dbPath), "repo-approvals.json");
}
function backoffPath(settings) {
  return join(dirname(settings.dbPath), "hooks.backoff.json");
}
function discoveryPath(settings) {
  const configured = settings.discoveryFile;
  if (configured.toLowerCase() === "off") return null;
  if (configured) return expandHome(configured);
  return `${settings.dbPath}.server.json`;
}

// src/client.ts
var DEFAULT_PORT = 8765;
var DEFAULT_URL = `http://127.0.0.1:${DEFAULT_PORT}`;
var PROBE_MS = 500;
var WAIT_MAX_MS = 864e5;
var ServiceUnavailable = class extends Error {
  constructor(outcome, message) {
    super(message);
    this.outcome = outcome;
  }
  outcome;
};
var ServiceFailed = class extends ServiceUnavailable {
  constructor(status, message, foreign = false) {
    super("error", `HTTP ${status}: ${message}`);
    this.status = status;
    this.foreign = foreign;
  }
  status;
  foreign;
  /**
   * Whether a write that met this answer is worth replaying later: auth (a token being
   * rotated), a request timeout, overload, a server-side failure, or a 404/405 (the service
   * has /ingest, so something else answers on its port) (client.py RETRYABLE_4XX, plus any
   * 5xx). Any other 4xx means the request itself is wrong.
   */
  get retryable() {
    return this.status >= 500 || [401, 403, 404, 405, 408, 429].includes(this.status);
  }
};
var ServiceMisdirected = class extends ServiceUnavailable {
  constructor(message) {
    super("service down", message);
  }
};
var NotTheService = class extends ServiceUnavailable {
  constructor(message) {
    super("error", message);
  }
};
var ServiceForeign = class extends ServiceUnavailable {
  constructor(url, uid) {
    super(
      "service down",
      `${url} is another user's (uid ${uid}): nothing was sent to it; start your own service (MEMORY_PLUGIN_AUTOSTART=1 starts one on a free port, or \`MEMORY_PORT=0 memory-mcp serve\`)`
    );
    this.uid = uid;
  }
  uid;
};
function ownerCheck(target, url, deadline) {
  if (target.protocol !== "http:") return Promise.resolve();
  return new Promise((resolve2, reject2) => {
    const socket = connect({ host: target.hostname.replace(/^\[|\]$/g, ""), port: Number(target.port || 80) });
    const done = (error) => {
      clearTimeout(timer);
      socket.destroy();
      if (error) reject2(error);
      else resolve2();
    };
    const timer = setTimeout(() => done(), Math.max(1, Math.floor(deadline - now())));
    socket.once("error", () => done());
    socket.once("connect", () => {
      const uid = owner(
        { address: socket.remoteAddress ?? "", port: socket.remotePort ?? 0 },
        { address: socket.localAddress ?? "", port: socket.localPort ?? 0 }
      );
      done(uid !== null && !trusted(uid) ? new ServiceForeign(url, uid) : void 0);
    });
  });
}
function now() {
  return performance.now();
}
function resolveUrl(settings) {
  if (settings.url) return { url: settings.url, origin: "MEMORY_PLUGIN_URL", store: null };
  const path = discoveryPath(settings);
  if (path !== null) {
    const info = readDiscovery(path, settings.discoveryFile ? null : settings.dbPath);
    if (info && !info.stale && typeof info.url === "string") {
      return { url: info.url.replace(/\/+$/, ""), origin: `discovery file ${path}`, store: null };
    }
  }
  const found = settings.port && settings.port !== DEFAULT_PORT ? { url: `http://127.0.0.1:${settings.port}`, origin: "MEMORY_PORT" } : { url: DEFAULT_URL, origin: "default" };
  if (!settings.storeNamed) return { ...found, store: null };
  const identity = storeIdentity(settings.dbUrl ?? "", settings.dbPath);
  return { ...found, store: { tag: storeTag(identity), identity } };
}
var SQLITE_PREFIXES = ["sqlite:///", "sqlite://", "sqlite:", "file://"];
function storeIdentity(dbUrl2, dbPath) {
  const url = dbUrl2.trim();
  if (!url) return dbIdentity(dbPath);
  for (const prefix of SQLITE_PREFIXES) {
    if (url.startsWith(prefix)) return dbIdentity(url.slice(prefix.length));
  }
  const sep = url.indexOf("://");
  let scheme = (sep < 0 ? url : url.slice(0, sep)).toLowerCase().split("+")[0];
  if (scheme === "postgres") scheme = "postgresql";
  let rest = sep < 0 ? "" : url.slice(sep + 3);
  const at = rest.lastIndexOf("@");
  const colon = at >= 0 ? rest.slice(0, at).indexOf(":") : -1;
  if (colon >= 0) rest = rest.slice(0, colon) + rest.slice(at);
  const mark = rest.indexOf("?");
  const base = mark < 0 ? rest : rest.slice(0, mark);
  const kept = (mark < 0 ? "" : rest.slice(mark + 1)).split("&").filter((part) => part && !part.split("=")[0].toLowerCase().includes("password"));
  return `${scheme}${sep < 0 ? "" : "://"}${base}${kept.length ? `?${kept.join("&")}` : ""}`;
}
function dbIdentity(path) {
  return realPath(expandHome(path));
}
function storeTag(identity) {
  return createHash("sha256").update(identity, "utf8").digest("hex").slice(0, 16);
}
function readDiscovery(path, db = null) {
  let data;
  try {
    data = JSON.parse(readFileSync3(path, "utf8"));
  } catch {
    return null;
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) return null;
  const info = data;
  return { ...info, stale: !isService(info) || db !== null && !serves(info, db) };
}
function serves(info, db) {
  const published = info["db_path"];
  if (typeof published !== "string") return true;
  return realPath(expandHome(published)) === realPath(expandHome(db));
}
function realPath(path) {
  const absolute = resolvePath(path);
  const missing = [];
  for (let head = absolute; ; head = dirname2(head)) {
    try {
      return join2(realpathSync(head), ...missing);
    } catch {
      if (dirname2(head) === head) return absolute;
      missing.unshift(basename(head));
    }
  }
}
function isService(info) {
  const pid = info["pid"];
  if (!pidAlive(pid)) return false;
  const written = info["proc_start"];
  if (typeof written !== "number" || !Number.isInteger(written)) return true;
  const started = procStart(pid);
  return started === null || started === written;
}
function pidAlive(pid) {
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
}
function procStart(pid) {
  let stat;
  try {
    stat = readFileSync3(`/proc/${pid}/stat`, "latin1");
  } catch {
    return null;
  }
  const field = stat.slice(stat.lastIndexOf(")") + 2).trim().split(/\s+/)[19];
  return field !== void 0 && /^\d+$/.test(field) ? Number(field) : null;
}
function answers(url, token, deadline = now() + PROBE_MS) {
  const remaining = Math.floor(deadline - now());
  let target;
  try {
    target = new URL(url + "/");
  } catch {
    return Promise.resolve(false);
  }
  if (remaining <= 0 || target.protocol !== "http:" && target.protocol !== "https:") return Promise.resolve(false);
  const headers = { Connection: "close", "X-Memory-Harness": "opencode" };
  if (token) headers["Authorization"] = `Bearer ${token}`;
  const transport = target.protocol === "https:" ? https : http;
  const probe = () => new Promise((resolve2) => {
    const req = transport.request(target, { method: "HEAD", headers, agent: false }, (res) => {
      res.resume();
      clearTimeout(timer);
      resolve2(true);
    });
    const timer = setTimeout(() => {
      resolve2(false);
      req.destroy();
    }, remaining);
    req.on("error", () => {
      clearTimeout(timer);
      resolve2(false);
    });
    req.end();
  });
  return ownerCheck(target, url, deadline).then(probe, () => false);
}
function isWrite(method, path) {
  return method === "POST" && path === "/ingest";
}
var ServiceClient = class {
  constructor(url, token, options = {}) {
    this.url = url;
    this.token = token;
    this.offline = options.offline ?? null;
    this.writesHeld = options.writesHeld ?? null;
    this.store = options.store ?? null;
  }
  url;
  token;
  /** The last "service down" / "timeout" a request of this client met on the network. */
  lastFailure = null;
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
  offline;
  /**
   * Every write (POST /ingest) fails with it at once, and only writes (the service's slow
   * mark is in force: backoff.ts); a recall still tries. Null: none.
   */
  writesHeld;
  /** The store expected at this URL (`ServiceAddress.store`), sent as X-Memory-Store; null: none. */
  store;
  get(path, deadline) {
    return this.request("GET", path, void 0, deadline);
  }
  post(path, body, deadline) {
    return this.request("POST", path, body, deadline);
  }
  /** The decoded JSON answer; a ServiceUnavailable naming the failure otherwise. */
  async request(method, path, body, deadline) {
    if (this.offline !== null) throw this.offline;
    if (this.writesHeld !== null && isWrite(method, path)) throw this.writesHeld;
    if (deadline - now() < 1) {
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
  send(method, path, body, deadline) {
    const remaining = Math.floor(deadline - now());
    if (remaining <= 0) {
      return Promise.reject(new ServiceUnavailable("timeout", "no time left in the action's budget"));
    }
    let target;
    try {
      target = new URL(this.url + path);
      if (target.protocol !== "http:" && target.protocol !== "https:") throw new TypeError();
    } catch {
      return Promise.reject(new ServiceUnavailable("error", `not an http(s) URL: ${this.url}`));
    }
    const data = body === void 0 ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body), "utf8");
    const headers = {
      Accept: "application/json",
      Connection: "close",
      "Content-Length": String(data.length),
      // The service leaves out of opencode's recall what opencode loads itself (AGENTS.md).
      "X-Memory-Harness": "opencode",
      // What is left of the budget: the service's recall leaves out a channel slower than
      // that (less a margin for its own work), so the others' answer still arrives in time.
      "X-Memory-Wait-Ms": String(Math.min(remaining, WAIT_MAX_MS))
    };
    if (body !== void 0) headers["Content-Type"] = "application/json";
    if (this.token) headers["Authorization"] = `Bearer ${this.token}`;
    if (this.store !== null) headers["X-Memory-Store"] = this.store.tag;
    const transport = target.protocol === "https:" ? https : http;
    const request = () => new Promise((resolve2, reject2) => {
      let settled = false;
      const settle = (error, value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (error) reject2(error);
        else resolve2(value);
      };
      const req = transport.request(target, { method, headers, agent: false }, (res) => {
        const chunks = [];
        res.on("data", (chunk) => chunks.push(chunk));
        res.on("error", (error) => settle(this.failure(error)));
        res.on("end", () => {
          const raw = Buffer.concat(chunks).toString("utf8");
          let answer = null;
          try {
            answer = raw ? JSON.parse(raw) : null;
          } catch {
            answer = null;
          }
          const status = res.statusCode ?? 0;
          if (status === 421 && this.store !== null && isObject(answer) && "store" in answer) {
            settle(new ServiceMisdirected(`${this.url}: ${String(answer["error"]).split("\n")[0]}; MEMORY_DB_PATH/MEMORY_DB_URL here name ${this.store.identity}`));
          } else if (status >= 400) {
            const message = answer?.error;
            settle(new ServiceFailed(status, String(message ?? raw.slice(-200)), typeof message !== "string"));
          } else if (!isObject(answer)) {
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
  failure(error) {
    const code = error.code;
    if (code === "ECONNREFUSED") {
      return new ServiceUnavailable("service down", `nothing listens at ${this.url} (Connection refused)`);
    }
    if (code && /^(ECONNRESET|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EADDRNOTAVAIL|EPIPE)$/.test(code)) {
      return new ServiceUnavailable("service down", `${this.url}: ${error.message}`);
    }
    return new ServiceUnavailable("error", `${this.url}: ${error.message}`);
  }
};

// src/autostart.ts
var LOCK_FRESH_MS = 2e4;
var LOG_MAX_BYTES = 5e6;
var LISTENING = "MEMORY_MCP_LISTENING ";
var POLL_MS = 50;
async function startService(settings, waitMs) {
  const deadline = now() + waitMs;
  const lock = join3(dirname3(settings.dbPath), "autostart.lock");
  if (takeLock(lock)) {
    return { url: await spawnService(settings, deadline), how: "started" };
  }
  while (now() < deadline) {
    const { url, origin, store } = resolveUrl(settings);
    if (origin !== "default") {
      try {
        await new ServiceClient(url, settings.token, { store }).get("/health", Math.min(deadline, now() + 1e3));
        return { url, how: "found" };
      } catch {
      }
    }
    await sleep(POLL_MS);
  }
  throw new ServiceUnavailable("service down", "another process is starting the service; not up in time");
}
function spawnService(settings, deadline) {
  const env = { ...process.env, MEMORY_DB_PATH: settings.dbPath };
  if (settings.url) {
    const url = new URL(settings.url);
    env["MEMORY_HOST"] = url.hostname.replace(/^\[|\]$/g, "");
    env["MEMORY_PORT"] = url.port || (url.protocol === "https:" ? "443" : "80");
  } else {
    env["MEMORY_PORT"] = "0";
  }
  const logPath = join3(dirname3(settings.dbPath), "service.log");
  mkdirSync(dirname3(logPath), { recursive: true, mode: 448 });
  rotateLog(logPath);
  const log = openSync(logPath, "a", 384);
  return new Promise((resolve2, reject2) => {
    let settled = false;
    let seen = "";
    const child = spawn(settings.command, ["serve"], {
      env,
      detached: true,
      // its own session: it outlives opencode and opencode's process group
      stdio: ["ignore", "pipe", log]
    });
    closeSync(log);
    const settle = (error, url) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.stdout?.destroy();
      child.unref();
      if (error) reject2(error);
      else resolve2(url);
    };
    const down = (message) => new ServiceUnavailable("service down", message);
    const timer = setTimeout(
      () => settle(down(`started ${settings.command} (pid ${child.pid}); not listening in time, see ${logPath}`)),
      Math.max(deadline - now(), 1)
    );
    child.on("error", (error) => settle(down(`cannot start ${settings.command}: ${error.message}`)));
    child.on("exit", (code) => settle(down(`${settings.command} exited with code ${code}; see ${logPath}`)));
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk) => {
      seen += chunk;
      for (const line of seen.split("\n").slice(0, -1)) {
        if (!line.startsWith(LISTENING)) continue;
        try {
          const info = JSON.parse(line.slice(LISTENING.length));
          if (typeof info.url === "string") return settle(null, info.url.replace(/\/+$/, ""));
        } catch {
        }
      }
    });
  });
}
function rotateLog(path) {
  try {
    if (statSync(path).size > LOG_MAX_BYTES) renameSync(path, `${path}.1`);
  } catch {
  }
}
function takeLock(path) {
  mkdirSync(dirname3(path), { recursive: true, mode: 448 });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, "wx", 384);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return true;
    } catch (error) {
      if (error.code !== "EEXIST") return false;
      try {
        if (Date.now() - statSync(path).mtimeMs < LOCK_FRESH_MS) return false;
        unlinkSync(path);
      } catch {
      }
    }
  }
  return false;
}
function sleep(ms) {
  return new Promise((resolve2) => setTimeout(resolve2, ms));
}

// src/backoff.ts
import { mkdirSync as mkdirSync2, readFileSync as readFileSync4, renameSync as renameSync2, unlinkSync as unlinkSync2, writeFileSync } from "node:fs";
import { basename as basename2, dirname as dirname4, join as join4 } from "node:path";
var SLOW_FILE = "hooks.slow.json";
var SLOW_MS = 2e4;
function activeBackOff(path, url, nowS = Date.now() / 1e3) {
  const data = readState(path);
  if (data === null) return null;
  const { until, outcome, detail } = data;
  const end = Number(until);
  if (until === null || until === void 0 || !Number.isFinite(end) || outcome === void 0) return null;
  if (!forUrl(data, url) || nowS >= end) return null;
  return { until: end, outcome: outcome === "timeout" ? "timeout" : "service down", detail: String(detail ?? "") };
}
function startBackOff(path, url, ms, outcome, detail) {
  writeState(path, url, ms, outcome, detail);
}
function slowPath(path) {
  return join4(dirname4(path), SLOW_FILE);
}
function activeSlowMark(path, url, nowS = Date.now() / 1e3) {
  const data = readState(slowPath(path));
  if (data === null || !forUrl(data, url)) return null;
  const end = Number(data.until);
  if (data.until === null || data.until === void 0 || !Number.isFinite(end) || nowS >= end) return null;
  return { until: end, detail: String(data.detail ?? "") };
}
function markSlow(path, url, ms, detail) {
  writeState(slowPath(path), url, ms, "slow", detail);
}
function clearSlowMark(path, url) {
  clearBackOff(slowPath(path), url);
}
function slowMs(backoffMs) {
  return Math.min(SLOW_MS, backoffMs);
}
function writeState(path, url, ms, outcome, detail) {
  if (ms <= 0) return;
  const data = JSON.stringify({
    until: Math.round(Date.now() + ms) / 1e3,
    outcome,
    detail: detail.slice(0, 300),
    url
  });
  const tmp = join4(dirname4(path), `.${basename2(path)}.${process.pid}.tmp`);
  try {
    mkdirSync2(dirname4(path), { recursive: true, mode: 448 });
    writeFileSync(tmp, data, { encoding: "utf8", mode: 384 });
    renameSync2(tmp, path);
  } catch {
    try {
      unlinkSync2(tmp);
    } catch {
    }
  }
}
function clearBackOff(path, url) {
  if (url === void 0) unlink(slowPath(path));
  else if (!forUrl(readState(path) ?? {}, url)) return;
  unlink(path);
}
function unlink(path) {
  try {
    unlinkSync2(path);
  } catch {
  }
}
function readState(path) {
  try {
    const data = JSON.parse(readFileSync4(path, "utf8"));
    return typeof data === "object" && data !== null && !Array.isArray(data) ? data : null;
  } catch {
    return null;
  }
}
function forUrl(data, url) {
  return data.url === void 0 || data.url === url;
}

// src/transcript.ts
var CHUNK_CHARS = 1200;
var MIN_CHUNK_CHARS = 40;
var HEAD_CHARS = 160;
var MESSAGE_CHARS = 32e3;
var ACK_REPLY_WORDS = 12;
var MAX_FUTURE_S = 86400;
var ACK_WORDS = 20;
var ACKNOWLEDGEMENTS = /* @__PURE__ */ new Set([
  "ok",
  "okay",
  "okey",
  "k",
  "kk",
  "thanks",
  "thank you",
  "thank you very much",
  "thanks a lot",
  "thanks so much",
  "thanks very much",
  "many thanks",
  "thx",
  "ty",
  "tysm",
  "cheers",
  "continue",
  "go on",
  "carry on",
  "keep going",
  "lgtm",
  "looks good",
  "sounds good",
  "all good",
  "great",
  "nice",
  "cool",
  "perfect",
  "good",
  "awesome",
  "excellent",
  "fine",
  "alright",
  "all right",
  "got it",
  "works for me",
  "that works",
  "makes sense",
  "nice work",
  "good job",
  "great job",
  "well done",
  "no problem",
  "np",
  "done",
  "hi",
  "hello",
  "hey",
  "danke",
  "danke sch\xF6n",
  "merci",
  "merci beaucoup",
  "gracias",
  "grazie",
  "obrigado",
  "obrigada",
  "\u0441\u043F\u0430\u0441\u0438\u0431\u043E",
  "\u8C22\u8C22",
  "\u597D\u7684",
  "\u3042\u308A\u304C\u3068\u3046",
  "\u3042\u308A\u304C\u3068\u3046\u3054\u3056\u3044\u307E\u3059",
  "\u4E86\u89E3",
  "\uAC10\uC0AC\uD569\uB2C8\uB2E4"
]);
var ACK_PHRASE_WORDS = Math.max(...[...ACKNOWLEDGEMENTS].map((phrase) => phrase.split(" ").length));
var ACK_EMOJI = ["\u{1F44D}", "\u{1F44C}", "\u{1F64F}", "\u2705", "\u{1F389}", "\u{1F4AF}", "\u{1F680}", "\u{1F64C}", "\u{1F44F}"];
var ACK_CHARS = 80;
function transcriptTime(value) {
  if (typeof value !== "number") return void 0;
  const seconds2 = value / 1e3;
  return seconds2 >= 0 && seconds2 <= Date.now() / 1e3 + MAX_FUTURE_S ? seconds2 : void 0;
}
var SEPARATOR = `[${SPACE}:,.\u2013\u2014\uFF1A\uFF0C\u3001-]`;
var REMEMBER = new RegExp(
  `^[${SPACE}]*(?:(?:remember|merke?[${SPACE}]+dir|retiens|souviens-toi|recuerda|lembre-se|lembra-te|ricorda|\u0437\u0430\u043F\u043E\u043C\u043D\u0438)(?![\\p{L}\\p{N}_])|(?:\u8BB0\u4F4F|\u8A18\u4F4F|\u899A\u3048\u3066(?:\u304A\u3044\u3066|\u304A\u3051|\u304F\u3060\u3055\u3044)?|\uAE30\uC5B5\uD574(?:[${SPACE}]*(?:\uC918|\uB46C|\uC8FC\uC138\uC694|\uB450\uC138\uC694))?)(?=${SEPARATOR}))${SEPARATOR}*(?:(?:that|que|dass|che|\u0447\u0442\u043E)(?:${SEPARATOR}+|$))?(?<rest>[\\s\\S]*)$`,
  "iu"
);
var WRAPPED = new RegExp(
  `^[${SPACE}]*(?:"(?<escaped>(?:[^"\\\\]|\\\\[\\s\\S])*)"|\u201C(?<curly>[^\u201C\u201D]*)\u201D|'(?<single>[^']*)'|\u2018(?<curlySingle>[^\u2018\u2019]*)\u2019)[${SPACE}]*$`
);
var FIRST_SENTENCE = new RegExp(`^[\\s\\S]*?(?:[.!?](?=[${SPACE}]|$)|[\u3002\uFF01\uFF1F]|$)`);
var ASKING_WORDS = /* @__PURE__ */ new Set(["what", "which", "whether"]);
var HAS_WORD = /[\p{L}\p{N}]/u;
var WORD2 = /[\p{L}\p{N}]+/gu;
var NOT_CONVERSATION = new RegExp(
  "<(semantic-memory|system-reminder|command-name|command-message|command-args|local-command-stdout|local-command-stderr|local-command-caveat|hook_result|environment_context|user_instructions|skills_instructions)\\b[^>]*>[\\s\\S]*?</\\1\\s*>",
  "gi"
);
function clean(text2) {
  return strip(text2.replace(NOT_CONVERSATION, ""));
}
function unquote(text2) {
  for (; ; ) {
    const found = WRAPPED.exec(text2);
    if (found === null) return text2;
    const groups = found.groups ?? {};
    const escaped = groups["escaped"];
    const inner = escaped !== void 0 ? escaped.replaceAll('\\"', '"') : groups["curly"] ?? groups["single"] ?? groups["curlySingle"] ?? "";
    if (!strip(inner)) return text2;
    text2 = inner;
  }
}
function remembered(prompt) {
  const found = REMEMBER.exec(unquote(prompt));
  if (found === null) return null;
  const fact = strip(unquote(found.groups?.["rest"] ?? ""));
  if (!HAS_WORD.test(fact) || asks(fact)) return null;
  return fact;
}
function asks(rest) {
  const first = rstrip(FIRST_SENTENCE.exec(rest)?.[0] ?? "");
  if (first.endsWith("?") || first.endsWith("\uFF1F")) return true;
  const opening = wordsOf(slice(rest, 0, 40))[0];
  return opening !== void 0 && ASKING_WORDS.has(opening) && !rest.includes(":") && !rest.includes("\uFF1A");
}
function wordsOf(text2) {
  return text2.toLowerCase().match(WORD2) ?? [];
}
function newWords(text2, known) {
  return new Set(wordsOf(text2).filter((word) => !known.has(word))).size;
}
function exchanges(turns) {
  const out = [];
  let user = [];
  let reply = [];
  let at;
  let fact = null;
  const close = () => {
    const [asked, answer] = [user.join("\n\n"), reply.join("\n\n")];
    if (!trivial(asked, answer)) out.push([asked, answer, at]);
  };
  for (const turn of turns) {
    let text2 = clean(turn.text);
    if (!text2) continue;
    if (turn.role === "user") {
      if (reply.length) {
        close();
        user = [];
        reply = [];
      }
      const asked = remembered(text2);
      fact = asked === null ? null : new Set(wordsOf(asked));
      if (fact === null) {
        if (!user.length) at = turn.at;
        user.push(capped(strip(unquote(text2))));
      }
      continue;
    }
    text2 = capped(text2);
    if (fact === null || newWords(text2, fact) > ACK_WORDS) {
      if (!user.length && !reply.length) at = turn.at;
      reply.push(text2);
    }
  }
  if (user.length || reply.length) close();
  return out;
}
function capped(text2) {
  if (text2.length <= MESSAGE_CHARS) return text2;
  const size = length(text2);
  if (size <= MESSAGE_CHARS) return text2;
  const half = Math.floor(MESSAGE_CHARS / 2);
  const head = text2.slice(0, advance(text2, 0, half, text2.length));
  const tail = text2.slice(advance(text2, 0, size - half, text2.length));
  return `${rstrip(head)}
[\u2026 ${size - MESSAGE_CHARS} characters left out \u2026]
${lstrip(tail)}`;
}
function trivial(user, reply) {
  if (!acknowledges(user)) return false;
  let count = 0;
  for (const _ of reply.matchAll(NON_SPACE)) if (++count > ACK_REPLY_WORDS) return false;
  return true;
}
function acknowledges(text2) {
  if (text2.length > 2 * ACK_CHARS || length(text2) > ACK_CHARS) return false;
  if (text2.includes("?") || text2.includes("\uFF1F")) return false;
  const words2 = wordsOf(text2);
  if (!words2.length) return ACK_EMOJI.some((emoji) => text2.includes(emoji));
  const ends = /* @__PURE__ */ new Set([0]);
  for (let start = 0; start < words2.length; start++) {
    if (!ends.has(start)) continue;
    for (let size = 1; size <= ACK_PHRASE_WORDS && start + size <= words2.length; size++) {
      if (ACKNOWLEDGEMENTS.has(words2.slice(start, start + size).join(" "))) ends.add(start + size);
    }
  }
  return ends.has(words2.length);
}
function worth(user, reply, memory) {
  return Boolean(user && reply) || length(memory) >= MIN_CHUNK_CHARS;
}
function chunkTurns(turns, maxChars = CHUNK_CHARS) {
  const chunks = /* @__PURE__ */ new Set();
  for (const [user, reply] of exchanges(turns)) {
    const pieces = chunkExchange(user, reply, maxChars);
    for (const chunk of pieces) {
      if (pieces.length === 1 ? worth(user, reply, chunk) : length(chunk) >= MIN_CHUNK_CHARS) chunks.add(chunk);
    }
  }
  return [...chunks];
}
function flushItems(turns, newest = Infinity, maxChars = CHUNK_CHARS) {
  const out = [];
  const seen = /* @__PURE__ */ new Set();
  const pairs = exchanges(turns).map(([user, reply, at]) => ({ user, reply, at, pieces: chunkExchange(user, reply, maxChars) }));
  let first = pairs.length;
  for (let count = 0; first > 0 && count < newest; ) count += pairs[--first]?.pieces.length ?? 0;
  for (const { user, reply, at, pieces } of pairs.slice(first)) {
    const dated = at === void 0 ? {} : { created_at: at };
    if (pieces.length > 1) {
      out.push([{ exchange: { user, reply }, ...dated }, pieces.length]);
      continue;
    }
    const [chunk] = pieces;
    if (chunk === void 0 || !worth(user, reply, chunk) || seen.has(chunk)) continue;
    seen.add(chunk);
    out.push([{ content: chunk, ...dated }, 1]);
  }
  return out;
}
function chunkExchange(user, reply, maxChars) {
  const lines = [...user ? [`User: ${user}`] : [], ...reply ? [`Assistant: ${reply}`] : []];
  const whole = lines.join("\n");
  if (length(whole) <= maxChars) return [whole];
  const head = user ? `(User asked: ${question(user)})
` : "";
  const [first, ...rest] = splitText(whole, maxChars - length(head));
  return first === void 0 ? [] : [first, ...rest.map((piece) => head + piece)];
}
function question(user) {
  const taken = [];
  let units = -1;
  for (const [word] of user.matchAll(NON_SPACE)) {
    taken.push(word);
    units += 1 + word.length;
    if (units > 2 * HEAD_CHARS) break;
  }
  const joined = taken.join(" ");
  if (advance(joined, 0, HEAD_CHARS + 1, joined.length) < 0) return joined;
  return rstrip(joined.slice(0, advance(joined, 0, HEAD_CHARS - 1, joined.length))) + "\u2026";
}
var BOUNDARIES = [
  ["\n\n"],
  ["\n"],
  [". ", "\u3002", "\uFF01", "\uFF1F"],
  [" "]
];
var NON_SPACE = new RegExp(`[^${SPACE}]+`, "g");
function splitText(text2, limit) {
  limit = Math.max(limit, 1);
  const pieces = [];
  const end = spaceStart(text2, text2.length, 0);
  let start = spaceEnd(text2, 0, end);
  for (; ; ) {
    const windowEnd = advance(text2, start, limit + 1, end);
    if (windowEnd < 0) break;
    const cut = start + cutIn(text2.slice(start, windowEnd), limit);
    const piece = text2.slice(start, spaceStart(text2, cut, start));
    if (piece) pieces.push(piece);
    start = spaceEnd(text2, cut, end);
  }
  if (start < end) pieces.push(text2.slice(start, end));
  return pieces;
}
function cutIn(window, limit) {
  for (const level of BOUNDARIES) {
    let at = -1;
    let boundary = "";
    for (const stop of level) {
      const found = window.lastIndexOf(stop);
      if (found > at) [at, boundary] = [found, stop];
    }
    if (at >= 0 && length(window.slice(0, at)) > Math.floor(limit / 3)) {
      return at + (strip(boundary) ? rstrip(boundary).length : 0);
    }
  }
  return advance(window, 0, limit, window.length);
}
function advance(text2, from, count, end) {
  let at = from;
  for (let seen = 0; seen < count; seen++) {
    if (at >= end) return -1;
    const unit = text2.charCodeAt(at);
    const pair = unit >= 55296 && unit <= 56319 && at + 1 < end && (text2.charCodeAt(at + 1) & 64512) === 56320;
    at += pair ? 2 : 1;
  }
  return at;
}

// src/messages.ts
function conversationText(parts) {
  return parts.flatMap((part) => part.type === "text" && !part.synthetic && !part.ignored ? [part.text] : []).join("\n");
}
function messageTurns(messages) {
  const turns = [];
  for (const { info, parts } of messages) {
    if (info.role === "assistant" && info.summary) continue;
    const text2 = conversationText(parts);
    if (text2.trim()) turns.push({ role: info.role, text: text2 });
  }
  return turns;
}
function latestUserText(messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message.info.role !== "user") continue;
    const text2 = conversationText(message.parts);
    if (clean(text2)) return text2;
  }
  return null;
}
function sessionOf(messages) {
  for (const { info } of messages) {
    if (typeof info.sessionID === "string" && info.sessionID) return info.sessionID;
  }
  return null;
}
function isAgentTurn(system) {
  return system.some((part) => part.includes("<env>") && part.includes("</env>"));
}

// src/outcomes.ts
import { closeSync as closeSync2, mkdirSync as mkdirSync3, openSync as openSync2, renameSync as renameSync3, statSync as statSync2, writeSync as writeSync2 } from "node:fs";
import { dirname as dirname5 } from "node:path";
var MAX_LOG_BYTES = 1e6;
function record(path, entry2) {
  const line = JSON.stringify({ ts: Math.round(Date.now()) / 1e3, ...entry2 }) + "\n";
  try {
    mkdirSync3(dirname5(path), { recursive: true, mode: 448 });
    try {
      if (statSync2(path).size > MAX_LOG_BYTES) renameSync3(path, `${path}.1`);
    } catch {
    }
    const fd = openSync2(path, "a", 384);
    try {
      writeSync2(fd, line);
    } finally {
      closeSync2(fd);
    }
  } catch {
  }
}

// src/project.ts
import { createHash as createHash2 } from "node:crypto";
import { readFileSync as readFileSync5, realpathSync as realpathSync2, statSync as statSync3 } from "node:fs";
import { homedir as homedir2 } from "node:os";
import { basename as basename3, dirname as dirname6, isAbsolute, join as join5, resolve } from "node:path";
var SCP_LIKE = /^(?:[^@/\n]+@)?(\[[^\]/\n]*\]|[^:/\n]+):(?!\/\/)(.+)$/;
var MAX_PROJECT_CHARS2 = 256;
var HASH_CHARS = 8;
function detectProject(cwd) {
  return bounded(detected(cwd));
}
function detected(cwd) {
  const start = realPath2(expandUser(cwd));
  const [top, gitDir] = findRepository(start);
  if (top !== null && gitDir !== null) {
    const remote = remoteUrl(gitDir);
    const named = remote ? normaliseRemote(fromTop(remote, top)) : "";
    if (strip(named)) return named;
    const main = mainCheckout(gitDir);
    if (main !== null) return main;
  }
  const folder = nameText(top ?? start);
  const name = basename3(folder);
  return strip(name) ? name : strip(folder);
}
function mainCheckout(gitDir) {
  const common = commonDir(gitDir);
  if (common === null) return null;
  let folder = nameText(common);
  if (basename3(folder) === ".git") folder = dirname6(folder);
  let name = basename3(folder);
  if (name.endsWith(".git") && name !== ".git") name = name.slice(0, -".git".length);
  return strip(name) ? name : strip(folder) || null;
}
function bounded(name) {
  const composed = name.normalize("NFC");
  if (length(composed) <= MAX_PROJECT_CHARS2) return length(name) <= MAX_PROJECT_CHARS2 ? name : composed;
  const digest = createHash2("sha256").update(composed, "utf8").digest("hex").slice(0, HASH_CHARS);
  const chars = Array.from(composed);
  let tail = chars.slice(chars.length - (MAX_PROJECT_CHARS2 - 2 - HASH_CHARS)).join("");
  const slash = tail.indexOf("/");
  if (slash >= 0) tail = tail.slice(slash);
  const short = `\u2026${strip(tail)}~${digest}`;
  return looksLikeRemote(short) ? `\u2026~${digest}` : short;
}
function looksLikeRemote(name) {
  if (name.includes("://") || name.replace(/\/+$/, "").endsWith(".git")) return true;
  const at = name.indexOf("@");
  return at > 0 && !name.slice(0, at).includes("/") && hostAndPath(name, at + 1);
}
function hostAndPath(url, start) {
  let end = start;
  while (end < url.length && url[end] !== ":" && url[end] !== "/") end++;
  if (end === start || end === url.length || url[end] !== ":" || url.startsWith("//", end + 1)) return false;
  let rest = url.slice(end + 1);
  if (rest.endsWith("\n")) rest = rest.slice(0, -1);
  return rest !== "" && !rest.includes("\n");
}
function fromTop(remote, top) {
  const path = localPath(remote);
  if (!path || isAbsolute(path) || path.startsWith("~")) return remote;
  return resolve(nameText(top), path);
}
function resolvePath2(path) {
  return nameText(realPath2(expandUser(path)));
}
function expandUser(path) {
  return path === "~" || path.startsWith("~/") ? join5(homedir2(), path.slice(1)) : path;
}
function realPath2(path) {
  const absolute = resolve(path);
  try {
    return fsdecode(realpathSync2(fsPath(absolute), { encoding: "buffer" }));
  } catch {
    const parent = dirname6(absolute);
    return parent === absolute ? absolute : join5(realPath2(parent), basename3(absolute));
  }
}
function nameText(name) {
  return ESCAPED.test(name) ? fsPath(name).toString("utf8") : name;
}
var ESCAPED = /(?<![\ud800-\udbff])[\udc80-\udcff]/;
function fsdecode(bytes) {
  let out = "";
  let from = 0;
  let at = 0;
  while (at < bytes.length) {
    const size = sequence(bytes, at);
    if (size > 0) {
      at += size;
      continue;
    }
    out += Buffer.from(bytes.subarray(from, at)).toString("utf8") + String.fromCharCode(56320 + bytes[at]);
    from = ++at;
  }
  return out + Buffer.from(bytes.subarray(from)).toString("utf8");
}
function sequence(bytes, at) {
  const first = bytes[at];
  if (first < 128) return 1;
  let size;
  let low = 128;
  let high = 191;
  if (first >= 194 && first <= 223) size = 2;
  else if (first >= 224 && first <= 239) {
    size = 3;
    if (first === 224) low = 160;
    if (first === 237) high = 159;
  } else if (first >= 240 && first <= 244) {
    size = 4;
    if (first === 240) low = 144;
    if (first === 244) high = 143;
  } else return 0;
  for (let next = 1; next < size; next++) {
    const byte = bytes[at + next];
    if (byte === void 0 || byte < (next === 1 ? low : 128) || byte > (next === 1 ? high : 191)) return 0;
  }
  return size;
}
function fsPath(path) {
  if (!ESCAPED.test(path)) return Buffer.from(path, "utf8");
  const parts = [];
  let from = 0;
  for (let at = 0; at < path.length; at++) {
    const unit = path.charCodeAt(at);
    const previous = at > 0 ? path.charCodeAt(at - 1) : 0;
    if (unit >= 56448 && unit <= 56575 && !(previous >= 55296 && previous <= 56319)) {
      parts.push(Buffer.from(path.slice(from, at), "utf8"), Buffer.from([unit - 56320]));
      from = at + 1;
    }
  }
  parts.push(Buffer.from(path.slice(from), "utf8"));
  return Buffer.concat(parts);
}
function kind(path) {
  try {
    const stat = statSync3(fsPath(path));
    return stat.isDirectory() ? "dir" : stat.isFile() ? "file" : null;
  } catch {
    return null;
  }
}
function findRepository(start) {
  for (let folder = start; ; folder = dirname6(folder)) {
    const dotGit = join5(folder, ".git");
    const found = kind(dotGit);
    if (found === "dir") return [folder, dotGit];
    if (found === "file") {
      const text2 = readPathFile(dotGit);
      if (text2 !== null && text2.startsWith("gitdir:")) {
        const target = strip(text2.slice("gitdir:".length));
        return [folder, realPath2(isAbsolute(target) ? target : join5(folder, target))];
      }
      return [folder, null];
    }
    if (dirname6(folder) === folder) return [null, null];
  }
}
function remoteUrl(gitDir) {
  const common = commonDir(gitDir) ?? gitDir;
  const sections = readConfig(join5(common, "config"));
  if (sections === null) return null;
  const remotes = [...sections.keys()].filter((name) => name.startsWith('remote "'));
  remotes.sort((a, b) => Number(a !== 'remote "origin"') - Number(b !== 'remote "origin"'));
  for (const name of remotes) {
    const url = gitValue((sections.get(name)?.get("url") ?? "").trim());
    if (url) return rewritten(url, sections);
  }
  return null;
}
function commonDir(gitDir) {
  const pointer = readPathFile(join5(gitDir, "commondir"));
  return pointer ? realPath2(resolve(gitDir, pointer)) : null;
}
var BLANK_BYTES = /* @__PURE__ */ new Set([32, 9, 10, 11, 12, 13]);
function readPathFile(path) {
  let bytes;
  try {
    bytes = readFileSync5(fsPath(path));
  } catch {
    return null;
  }
  let start = 0;
  let end = bytes.length;
  while (start < end && BLANK_BYTES.has(bytes[start])) start++;
  while (end > start && BLANK_BYTES.has(bytes[end - 1])) end--;
  return fsdecode(bytes.subarray(start, end));
}
function readConfig(path) {
  let text2;
  try {
    text2 = new TextDecoder("utf-8", { fatal: true }).decode(readFileSync5(fsPath(path)));
  } catch {
    return null;
  }
  const sections = parseGitConfig(text2);
  if (sections === null) return null;
  const merged = /* @__PURE__ */ new Map();
  for (const [name, options] of sections) {
    const key = gitSection(name);
    const kept = merged.get(key) ?? /* @__PURE__ */ new Map();
    merged.set(key, kept);
    for (const [option, value] of options) if (!kept.has(option)) kept.set(option, value);
  }
  return merged;
}
function gitSection(header) {
  const quote = header.indexOf('"');
  if (quote >= 0) return `${strip(header.slice(0, quote)).toLowerCase()} "${header.slice(quote + 1)}`;
  const name = strip(header).toLowerCase();
  const dot = name.indexOf(".");
  return dot >= 0 ? `${name.slice(0, dot)} "${name.slice(dot + 1)}"` : name;
}
var ESCAPES = { n: "\n", t: "	", b: "\b" };
function gitValue(raw) {
  if (!/["\\#;]/.test(raw)) return raw;
  let out = "";
  let gap = "";
  let quoted = false;
  let escaped = false;
  for (const char of raw) {
    if (escaped) {
      out += gap + (ESCAPES[char] ?? char);
      gap = "";
      escaped = false;
    } else if (char === "\\") {
      escaped = true;
    } else if (char === '"') {
      out += gap;
      gap = "";
      quoted = !quoted;
    } else if (quoted) {
      out += char;
    } else if (char === "#" || char === ";") {
      break;
    } else if (" 	\r\n".includes(char)) {
      gap += " ";
    } else {
      out += gap + char;
      gap = "";
    }
  }
  return out;
}
function rewritten(url, sections) {
  if (url.includes("://") || url.includes("@")) return url;
  const rules = insteadOf(sections);
  for (const config of userConfigs()) rules.push(...insteadOf(readConfig(config) ?? /* @__PURE__ */ new Map()));
  let best = ["", ""];
  for (const rule of rules) if (url.startsWith(rule[0]) && rule[0].length > best[0].length) best = rule;
  return best[0] ? best[1] + url.slice(best[0].length) : url;
}
function insteadOf(sections) {
  const rules = [];
  for (const [name, options] of sections) {
    const prefix = gitValue((options.get("insteadof") ?? "").trim());
    if (prefix && name.startsWith('url "') && name.endsWith('"')) rules.push([prefix, name.slice(5, -1)]);
  }
  return rules;
}
function userConfigs() {
  const configured = process.env["GIT_CONFIG_GLOBAL"];
  if (configured) return [configured];
  const xdg = process.env["XDG_CONFIG_HOME"] || join5(homedir2(), ".config");
  return [join5(xdg, "git", "config"), join5(homedir2(), ".gitconfig")];
}
function parseGitConfig(text2) {
  const sections = /* @__PURE__ */ new Map();
  let current = null;
  let lines = null;
  let indentLevel = 0;
  for (const line of text2.split(/\r\n|\n|\r/)) {
    const value = line.trim();
    if (value.startsWith("#") || value.startsWith(";")) continue;
    if (!value) {
      lines?.push("");
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
      const name = header[1];
      current = sections.get(name) ?? /* @__PURE__ */ new Map();
      sections.set(name, current);
      lines = null;
      continue;
    }
    if (current === null) return null;
    const assignment = /^(.*?)\s*[=:]\s*(.*)$/.exec(value);
    if (!assignment || !assignment[1]) return null;
    const option = assignment[1].trimEnd().toLowerCase();
    lines = [assignment[2].trim()];
    if (!current.has(option)) current.set(option, lines);
  }
  const joined = /* @__PURE__ */ new Map();
  for (const [name, options] of sections) {
    joined.set(name, new Map([...options].map(([key, values]) => [key, values.join("\n").trimEnd()])));
  }
  return joined;
}
var CASELESS_HOSTS = ["github.com", "gitlab.com", "bitbucket.org", "dev.azure.com"];
var HOST_ALIASES = {
  "ssh.github.com": "github.com",
  "altssh.gitlab.com": "gitlab.com",
  "altssh.bitbucket.org": "bitbucket.org"
};
var AZURE_SSH_HOSTS = ["ssh.dev.azure.com", "vs-ssh.visualstudio.com"];
function normaliseRemote(raw) {
  const url = raw.trim();
  const local = localPath(url);
  if (local !== null) return removeSuffix(local.replace(/\/+$/, ""), ".git").replace(/\/+$/, "") || local;
  let host;
  let path;
  const scheme = url.indexOf("://");
  if (scheme >= 0) {
    const rest = url.slice(scheme + 3);
    const slash = rest.indexOf("/");
    const netloc = slash >= 0 ? rest.slice(0, slash) : rest;
    path = slash >= 0 ? rest.slice(slash + 1) : "";
    host = withoutPort(netloc.slice(netloc.lastIndexOf("@") + 1));
  } else {
    const scp = SCP_LIKE.exec(url);
    host = scp ? scp[1] : "";
    path = scp ? scp[2] : url;
  }
  path = path.replace(/^\/+|\/+$/g, "");
  const found = canonical(host.toLowerCase(), withoutGit(path, path.toLowerCase()));
  [host, path] = found ?? [host.toLowerCase(), withoutGit(path, path)];
  return host && path ? `${host}/${path}` : host || path;
}
function withoutPort(host) {
  const close = host.indexOf("]");
  if (host.startsWith("[") && close >= 0) return host.slice(0, close + 1);
  return host.split(":")[0];
}
function withoutGit(path, folded) {
  return (folded.endsWith(".git") ? path.slice(0, -".git".length) : path).replace(/\/+$/, "");
}
function localPath(url) {
  if (url.startsWith("file://")) return url.slice("file://".length);
  if (url.includes("://") || SCP_LIKE.test(url)) return null;
  return url;
}
function canonical(lowerHost, path) {
  let host = HOST_ALIASES[lowerHost] ?? lowerHost;
  for (const known of CASELESS_HOSTS) if (host.startsWith(`${known}-`)) host = known;
  let parts = path.split("/");
  if (AZURE_SSH_HOSTS.includes(host) && parts.length === 4 && parts[0].toLowerCase() === "v3") {
    host = "dev.azure.com";
    parts = parts.slice(1);
  } else if (host === "dev.azure.com" && parts.length === 4 && parts[2].toLowerCase() === "_git") {
    parts.splice(2, 1);
  } else if (host.endsWith(".visualstudio.com") && !AZURE_SSH_HOSTS.includes(host)) {
    if (parts[0].toLowerCase() === "defaultcollection") parts = parts.slice(1);
    if (parts.length !== 3 || parts[1].toLowerCase() !== "_git") return null;
    parts = [removeSuffix(host, ".visualstudio.com"), parts[0], parts[2]];
    host = "dev.azure.com";
  }
  if (!CASELESS_HOSTS.includes(host)) return null;
  return [host, parts.join("/").toLowerCase()];
}
function removeSuffix(text2, suffix) {
  return text2.endsWith(suffix) ? text2.slice(0, -suffix.length) : text2;
}

// src/repoconfig.ts
import { readFileSync as readFileSync6, statSync as statSync4 } from "node:fs";
import { dirname as dirname7, isAbsolute as isAbsolute2, join as join6 } from "node:path";
var MAX_PROJECT_CHARS3 = 256;
var FILE_NAME = ".semantic-memory.toml";
var MAX_BYTES = 64 * 1024;
var MAX_APPROVALS_BYTES = 4 * 1024 * 1024;
var DEFAULTS = { path: null, capture: true, recall: true, project: null, error: null };
var KEYS = {
  "capture.enabled": "boolean",
  "recall.enabled": "boolean",
  "project.name": "string"
};
var TABLES = /* @__PURE__ */ new Set(["capture", "recall", "project"]);
function configPath(cwd) {
  const start = resolvePath2(cwd);
  const [top] = findRepository(start);
  return join6(top ?? start, FILE_NAME);
}
function loadRepoConfig(cwd, approvals = null) {
  let path;
  let raw;
  try {
    path = configPath(cwd);
    if (!statSync4(path, { throwIfNoEntry: false })?.isFile()) return { ...DEFAULTS };
    raw = readFileSync6(path);
  } catch (error) {
    return { ...DEFAULTS, path: join6(cwd, FILE_NAME), capture: false, error: error.message };
  }
  if (raw.length > MAX_BYTES) return { ...DEFAULTS, path, capture: false, error: `larger than ${MAX_BYTES} bytes` };
  try {
    const text2 = new TextDecoder("utf-8", { fatal: true }).decode(raw);
    const config = { ...parseRepoConfig(text2), path };
    if (config.project === null || allowed(config.project, path, cwd, approvals)) return config;
    return { ...config, project: null, ignored: config.project };
  } catch (error) {
    return { ...DEFAULTS, path, capture: false, error: error.message.split("\n")[0] ?? "unreadable" };
  }
}
function allowed(name, path, cwd, approvals) {
  let detected2 = null;
  try {
    detected2 = detectProject(cwd);
  } catch {
  }
  if (name === detected2) return true;
  return approvals !== null && allowedNames(approvals).get(path) === name;
}
function allowedNames(approvals) {
  const names = /* @__PURE__ */ new Map();
  if (!isAbsolute2(approvals)) return names;
  try {
    const raw = readFileSync6(approvals);
    if (raw.length > MAX_APPROVALS_BYTES) return names;
    const data = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
    const entries = typeof data === "object" && data !== null && !Array.isArray(data) ? data["allowed"] : null;
    if (typeof entries !== "object" || entries === null || Array.isArray(entries)) return names;
    const pairs = Object.entries(entries);
    if (!pairs.every(([, value]) => typeof value === "string")) return names;
    for (const [path, value] of pairs) names.set(path, value);
  } catch {
  }
  return names;
}
function repoWarning(config) {
  if (config.error) return `${config.path}: ${config.error}`;
  if (config.ignored !== void 0 && config.path !== null) {
    return `${config.path}: [project] name "${config.ignored}" is ignored until you allow it: run \`memory-mcp allow ${shellQuote(dirname7(config.path))}\``;
  }
  return null;
}
function shellQuote(text2) {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(text2)) return text2;
  return `'${text2.replace(/'/g, `'"'"'`)}'`;
}
function parseRepoConfig(text2) {
  const config = { ...DEFAULTS };
  let table2 = "";
  const lines = text2.replace(/^\ufeff/, "").split(/\r?\n/);
  lines.forEach((line, index) => {
    const content = line.trim();
    if (!content || content.startsWith("#")) return;
    const header = /^\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(?:#.*)?$/.exec(content);
    if (header && TABLES.has(header[1].replace(/\s/g, ""))) {
      table2 = header[1].replace(/\s/g, "");
      return;
    }
    if (content.startsWith("[")) throw new Error(`line ${index + 1}: unknown table ${content}`);
    const assignment = /^([A-Za-z0-9_.\- ]+?)\s*=\s*(.*)$/.exec(content);
    const key = assignment ? assignment[1].replace(/\s*\.\s*/g, ".") : null;
    const full = key === null ? null : table2 ? `${table2}.${key}` : key;
    if (full === null) throw new Error(`line ${index + 1}: not a key = value line`);
    const kind2 = KEYS[full];
    if (kind2 === void 0) throw new Error(`unknown key ${full}`);
    const value = parseValue(assignment[2]);
    if (typeof value !== kind2) throw new Error(`${full} must be a ${kind2}`);
    if (full === "capture.enabled") config.capture = value;
    else if (full === "recall.enabled") config.recall = value;
    else config.project = projectName2(value.trim());
  });
  return config;
}
function projectName2(name) {
  if (!name) return null;
  if ([...name].length > MAX_PROJECT_CHARS3) throw new Error(`project.name must be 1..${MAX_PROJECT_CHARS3} characters`);
  if (/[\n\r\t\0]/.test(name)) throw new Error("project.name must be one line (no newline, tab or NUL)");
  if (stripPrivate(name) !== name) throw new Error("project.name must not hold <private> text");
  return name;
}
function parseValue(raw) {
  const text2 = raw.trim();
  const bare = /^(true|false)\s*(?:#.*)?$/.exec(text2);
  if (bare) return bare[1] === "true";
  const literal = /^'([^'\n]*)'\s*(?:#.*)?$/.exec(text2);
  if (literal) return literal[1];
  const basic = /^"((?:[^"\\\n]|\\.)*)"\s*(?:#.*)?$/.exec(text2);
  if (basic) return JSON.parse(`"${basic[1].replace(/\\'/g, "'")}"`);
  if (/^[+-]?\d[\d_]*(?:\.\d+)?\s*(?:#.*)?$/.test(text2)) return 0;
  throw new Error(`cannot read the value ${text2.slice(0, 40)}`);
}

// src/spool.ts
import {
  closeSync as closeSync3,
  fsyncSync,
  mkdirSync as mkdirSync4,
  openSync as openSync3,
  readdirSync,
  readFileSync as readFileSync7,
  renameSync as renameSync4,
  unlinkSync as unlinkSync3,
  utimesSync,
  writeFileSync as writeFileSync2,
  writeSync as writeSync3
} from "node:fs";
import { randomBytes } from "node:crypto";
import { join as join7 } from "node:path";
var SPOOL_VERSION = 1;
var REJECTED = "rejected";
var EPOCH_NS = BigInt(Date.now()) * 1000000n - process.hrtime.bigint();
function timeNs() {
  return EPOCH_NS + process.hrtime.bigint();
}
function stampCreatedAt(body, ts = Date.now() / 1e3) {
  const items = Array.isArray(body["items"]) ? body["items"] : [body];
  for (const item of items) {
    if (typeof item === "object" && item !== null && !("created_at" in item)) {
      item["created_at"] = ts;
    }
  }
}
function appendSpool(folder, path, body, origin = {}) {
  const name = `${timeNs().toString().padStart(20, "0")}-${process.pid}-${randomBytes(4).toString("hex")}`;
  const record2 = {
    v: SPOOL_VERSION,
    ts: Math.round(Date.now()) / 1e3,
    harness: origin.harness ?? "",
    event: origin.event ?? "",
    path,
    body
  };
  if (origin.rejected !== void 0) {
    record2.rejected = slice(origin.rejected, 0, 500);
    record2.rejected_at = record2.ts;
  }
  const directory = origin.rejected !== void 0 ? join7(folder, REJECTED) : folder;
  const data = Buffer.from(JSON.stringify(record2), "utf8");
  mkdirSync4(directory, { recursive: true, mode: 448 });
  const tmp = join7(directory, `.${name}.tmp`);
  const final = join7(directory, `${name}.json`);
  const fd = openSync3(tmp, "wx", 384);
  try {
    try {
      for (let offset = 0; offset < data.length; ) offset += writeSync3(fd, data, offset);
      fsyncSync(fd);
    } finally {
      closeSync3(fd);
    }
    renameSync4(tmp, final);
  } catch (error) {
    try {
      unlinkSync3(tmp);
    } catch {
    }
    throw error;
  }
  syncFolder(directory);
  return final;
}
function syncFolder(folder) {
  let fd;
  try {
    fd = openSync3(folder, "r");
  } catch {
    return;
  }
  try {
    fsyncSync(fd);
  } catch {
  } finally {
    closeSync3(fd);
  }
}
var CLAIM = ".claim-";
var SpoolRetry = class extends Error {
};
var SpoolRefused = class extends Error {
};
var SpoolStuck = class extends Error {
};
function pendingSpool(folder) {
  try {
    return readdirSync(folder).filter((name) => name.endsWith(".json") && !name.startsWith(".")).sort();
  } catch {
    return [];
  }
}
async function replaySpool(folder, send, until) {
  let sent = 0;
  let rejected = 0;
  for (const name of pendingSpool(folder)) {
    if (!until()) break;
    const claimed = join7(folder, `${name}${CLAIM}${process.pid}`);
    try {
      renameSync4(join7(folder, name), claimed);
      utimesSync(claimed, /* @__PURE__ */ new Date(), /* @__PURE__ */ new Date());
    } catch (error) {
      if (errorCode(error) === "ENOENT") continue;
      throw new SpoolStuck(`the spool folder ${folder} cannot be replayed: ${String(error)}`);
    }
    let record2;
    try {
      record2 = readRecord(claimed);
    } catch (error) {
      putBack(folder, name, claimed);
      throw new SpoolStuck(`a spooled write in ${folder} cannot be read: ${String(error)}`);
    }
    if (record2 === null) {
      reject(folder, name, claimed, "not a spooled write (unreadable JSON)", null);
      rejected += 1;
      continue;
    }
    let answer;
    try {
      answer = await send(record2.path, record2.body);
    } catch (error) {
      if (error instanceof SpoolRefused) {
        reject(folder, name, claimed, error.message, record2);
        rejected += 1;
        continue;
      }
      putBack(folder, name, claimed);
      if (error instanceof SpoolRetry) break;
      throw error;
    }
    const refused = refusedItems(record2.body, answer);
    if (refused !== null) {
      const [body, reason] = refused;
      reject(folder, name, claimed, reason, { ...record2, body });
      rejected += 1;
      if (body === record2.body) continue;
    } else {
      try {
        unlinkSync3(claimed);
      } catch {
      }
    }
    sent += 1;
  }
  return { sent, rejected };
}
function refusedItems(body, answer) {
  if (!isObject(answer)) return null;
  if (answer["status"] === "rejected") return [body, String(answer["reason"] || "refused")];
  const results = answer["results"];
  const items = body["items"];
  if (!Array.isArray(results) || !Array.isArray(items)) return null;
  const refused = [];
  const reasons = /* @__PURE__ */ new Set();
  items.forEach((item, index) => {
    const result = results[index];
    if (isObject(result) && result["status"] === "rejected") {
      refused.push(item);
      reasons.add(String(result["reason"] || "refused"));
    }
  });
  if (!refused.length) return null;
  const reason = [...reasons].join("; ");
  return refused.length === items.length ? [body, reason] : [{ ...body, items: refused }, reason];
}
function readRecord(path) {
  const text2 = readFileSync7(path, "utf8");
  try {
    const record2 = JSON.parse(text2);
    const valid = typeof record2 === "object" && record2 !== null && typeof record2.path === "string" && typeof record2.body === "object" && record2.body !== null && !Array.isArray(record2.body);
    return valid ? record2 : null;
  } catch {
    return null;
  }
}
function errorCode(error) {
  return error?.code;
}
function putBack(folder, name, claimed) {
  try {
    renameSync4(claimed, join7(folder, name));
  } catch {
  }
}
function reject(folder, name, claimed, reason, record2) {
  const target = join7(folder, REJECTED, name);
  try {
    mkdirSync4(join7(folder, REJECTED), { recursive: true, mode: 448 });
    if (record2 === null) {
      renameSync4(claimed, target);
      return;
    }
    const tmp = join7(folder, REJECTED, `.${name}.tmp`);
    writeFileSync2(tmp, JSON.stringify({
      ...record2,
      rejected: slice(reason, 0, 500),
      rejected_at: Math.round(Date.now()) / 1e3
    }), { mode: 384 });
    renameSync4(tmp, target);
    unlinkSync3(claimed);
  } catch {
    putBack(folder, name, claimed);
  }
}

// src/memory.ts
var HARNESS = "opencode";
var HOOKS = {
  inject: "experimental.chat.system.transform",
  flush: "experimental.session.compacting",
  /** Not hooks: the bus events after which the answered exchanges not yet stored are flushed. */
  idle: "session.idle",
  deleted: "session.deleted",
  remember: "chat.message",
  capture: "tool.execute.after",
  autostart: "autostart",
  /** Not an opencode hook: the plugin handing the spool to a service that answered. */
  replay: "spool replay"
};
var QUERY_CHARS = 2e3;
var FLUSH_BATCH = 500;
var FLUSH_MAX = 5e3;
var SPOOL_MARGIN_MS = 150;
var START_WAIT_MS = 2e4;
var MAX_SESSIONS = 200;
var REPORT_MS = 500;
var inFlight = /* @__PURE__ */ new Map();
var exitGuard = false;
function spoolInFlight() {
  for (const [key, { target, body }] of inFlight) {
    inFlight.delete(key);
    try {
      keep(target, body);
    } catch {
    }
  }
}
function keep(target, body) {
  stampCreatedAt(body);
  appendSpool(target.folder, "/ingest", body, { harness: HARNESS, event: target.event });
}
var Action = class {
  constructor(deadline, service, target) {
    this.deadline = deadline;
    this.service = service;
    this.target = target;
  }
  deadline;
  service;
  target;
  outcome = "skipped";
  detail = "";
  /** How many writes of this action went to the spool, and why the first one did. */
  spooled = 0;
  spoolReason = "";
  done(outcome, detail = "") {
    this.outcome = outcome;
    this.detail = detail;
  }
  /**
   * POSTs `body` to /ingest; null when the service could not take it in time (down, hung,
   * slow, 5xx/401/403/404/405/408/429) and it went to the spool instead, to be stored exactly
   * once later. Once one write of this action was spooled, the next ones are spooled at once. A
   * write the service refuses outright (another 4xx: 413, 422) is kept in `spool/rejected/`
   * with the reason, and answered as a refusal (adapter.py `write`).
   */
  async write(body) {
    if (this.spooled) {
      this.spool(body, this.spoolReason);
      return null;
    }
    const key = {};
    if (!exitGuard) {
      exitGuard = true;
      process.once("exit", spoolInFlight);
    }
    inFlight.set(key, { target: this.target, body });
    try {
      const answer = await this.service.post("/ingest", body, this.deadline - SPOOL_MARGIN_MS);
      return typeof answer === "object" && answer !== null ? answer : {};
    } catch (error) {
      if (!(error instanceof ServiceUnavailable)) throw error;
      if (error instanceof ServiceFailed && !error.retryable) return this.keepRefused(body, error.message);
      this.spool(body, error instanceof ServiceFailed ? error.message : `${error.outcome}: ${error.message}`);
      return null;
    } finally {
      inFlight.delete(key);
    }
  }
  /**
   * Keeps a write the service refused in `spool/rejected/` (`memory-mcp spool list` shows it
   * with `reason`); the refusal, as /ingest words one (adapter.py `keep_refused`).
   */
  keepRefused(body, reason) {
    try {
      appendSpool(this.target.folder, "/ingest", body, { harness: HARNESS, event: this.target.event, rejected: reason });
    } catch (error) {
      throw new Error(`the service refused the write (${reason}) and keeping it failed: ${error.message}`);
    }
    const items = body["items"];
    if (Array.isArray(items)) return { new: 0, duplicate: 0, rejected: items.length };
    return { status: "rejected", reason: `${reason} (kept in spool/rejected/)` };
  }
  spool(body, reason) {
    try {
      keep(this.target, body);
    } catch (error) {
      throw new Error(`spooling failed, the write is lost (${reason}): ${error.message}`);
    }
    this.spooled += 1;
    this.spoolReason ||= reason;
  }
};
var MemoryPlugin = class {
  constructor(settings, directory, problems = [], write = (line) => process.stderr.write(line)) {
    this.settings = settings;
    this.directory = directory;
    this.write = write;
    for (const problem of problems) {
      this.log("settings", "error", problem.message, null, 0);
    }
  }
  settings;
  directory;
  write;
  sessions = /* @__PURE__ */ new Map();
  /** Names this process's contexts: a new opencode process rebuilds every system prompt. */
  processTag = randomBytes2(3).toString("hex");
  pending = /* @__PURE__ */ new Set();
  /** Each context's last injection report in flight: its next recall waits for it (within
   * REPORT_MS), so the service knows what the context holds, as a hook's exit orders it. */
  reports = /* @__PURE__ */ new Map();
  detectedProject;
  starting = null;
  startedUrl = null;
  startNote = "";
  replaying = null;
  /** Why the spool could not be replayed last (SpoolStuck), logged once until it changes. */
  stuck = "";
  repoConfig;
  /** The repository's `.semantic-memory.toml` (read once per process; defaults when none). */
  get repo() {
    if (this.repoConfig === void 0) this.repoConfig = loadRepoConfig(this.directory, approvalsPath(this.settings));
    return this.repoConfig;
  }
  /** MEMORY_PROJECT, else the repository file's `[project] name` if allowed, else detected. */
  get project() {
    if (this.settings.project) return this.settings.project;
    if (this.repo.project) return this.repo.project;
    if (this.detectedProject === void 0) {
      try {
        this.detectedProject = detectProject(this.directory);
      } catch {
        this.detectedProject = null;
      }
    }
    return this.detectedProject;
  }
  // --- opencode hooks ---------------------------------------------------------------------
  /**
   * `chat.message`: a new user message; "remember …" waits for the next messages transform,
   * which stores it unless it is read inside a span an earlier message left open.
   */
  async chatMessage(sessionID, parts) {
    const text2 = conversationText(parts);
    if (!text2.trim()) return;
    const state = this.state(sessionID);
    state.prompt = unquote(text2);
    state.promptCarry = state.open;
    const fact = remembered(text2);
    if (fact !== null) state.remembers.push({ messageID: parts[0]?.messageID, fact });
  }
  /**
   * `experimental.chat.messages.transform`: runs before each agent call with the session's
   * messages, and once during a compaction with exactly the messages it summarises.
   */
  async messagesTransform(messages) {
    const sessionID = sessionOf(messages);
    if (sessionID === null) return;
    const state = this.state(sessionID);
    if (state.flushNext) {
      state.flushNext = false;
      for (const { info } of messages) {
        state.heard.delete(info.id);
        state.flushed.add(info.id);
      }
      state.lead = [];
      const read = withoutPrivate(state, messages);
      await this.decideRemembers(sessionID, state);
      await this.flush(HOOKS.flush, sessionID, state, read.flat());
      return;
    }
    const text2 = latestUserText(messages);
    if (text2 !== null) {
      const first = !state.openBefore.size;
      state.prompt = unquote(text2);
      const read = withoutPrivate(state, messages);
      const at = messages.map((m) => m.info.role === "user" && conversationText(m.parts) === text2).lastIndexOf(true);
      const latest = messages[at];
      state.promptCarry = (latest && state.openBefore.get(latest.info.id)) ?? state.open;
      if (first && at >= 0) this.leadFrom(state, messages.slice(0, at), read.slice(0, at));
    }
    await this.decideRemembers(sessionID, state);
  }
  /**
   * Stores the "remember" prompts `chatMessage` left waiting, each read inside what the messages
   * before it left open (the latest prompt's, for one not among the messages read).
   */
  async decideRemembers(sessionID, state) {
    for (const { messageID, fact } of state.remembers.splice(0)) {
      const carry = (messageID === void 0 ? void 0 : state.openBefore.get(messageID)) ?? state.promptCarry;
      await this.remember(sessionID, state, fact, carry);
    }
  }
  /**
   * The session's messages before the latest prompt (as a new process reads them first), and
   * their turns: those after the last reply left visible become the lead of the next flush.
   */
  leadFrom(state, earlier, read) {
    const lead = earlier.slice(answeredUpTo(read)).filter(({ info }) => !state.heard.has(info.id));
    for (const { info } of lead) state.flushed.add(info.id);
    state.lead = lead;
  }
  /** `experimental.chat.system.transform`: adds this context's memories to an agent call. */
  async systemTransform(sessionID, system) {
    if (!sessionID) return;
    if (!isAgentTurn(system)) {
      this.debug(HOOKS.inject, "not an agent turn (title or compaction call): nothing added");
      return;
    }
    const state = this.state(sessionID);
    await this.decideRemembers(sessionID, state);
    const key = this.contextKey(sessionID, state);
    const query = state.prompt;
    const paused = query && remembered(query) === null ? pausedLine(query, state.promptCarry) : null;
    if (query && remembered(query) === null && state.recalled !== `${key}
${query}`) {
      if (paused === null) state.recalled = `${key}
${query}`;
      await this.inject(key, state, query, state.promptCarry);
    }
    const added = paused === null ? state.added : [...state.added, paused];
    if (added.length) system.push(added.join("\n\n"));
  }
  /** `experimental.session.compacting`: the next messages transform is the one to flush. */
  compacting(sessionID) {
    this.state(sessionID).flushNext = true;
  }
  /**
   * opencode's bus events: a finished compaction starts a new context; the conversation is
   * heard from the message events, and what of it was answered is flushed when the session
   * goes idle (after each agent turn) and when it is deleted, in the background (opencode does
   * not wait for an event's handler; `dispose` and the exit guard do).
   */
  event(type, properties) {
    if (type === "message.updated" || type === "message.part.updated") {
      this.heardOf(properties);
    } else if (type === "message.removed" && typeof properties["sessionID"] === "string") {
      this.sessions.get(properties["sessionID"])?.heard.delete(String(properties["messageID"]));
    } else if (type === HOOKS.idle && typeof properties["sessionID"] === "string") {
      const sessionID = properties["sessionID"];
      const state = this.sessions.get(sessionID);
      if (state !== void 0 && !state.subagent) this.flushHeard(HOOKS.idle, sessionID, state, false);
    } else if (type === "session.compacted" && typeof properties["sessionID"] === "string") {
      const state = this.state(properties["sessionID"]);
      state.compactions += 1;
      state.added = [];
      state.recalled = null;
    } else if (type === HOOKS.deleted) {
      const info = properties["info"];
      const state = typeof info?.id === "string" ? this.sessions.get(info.id) : void 0;
      if (typeof info?.id !== "string" || state === void 0) return;
      this.sessions.delete(info.id);
      if (!state.subagent) this.flushHeard(HOOKS.deleted, info.id, state, true);
    } else if (type === "session.created") {
      const info = properties["info"];
      if (typeof info?.id === "string" && typeof info.parentID === "string") this.state(info.id).subagent = true;
      this.autostart();
    }
  }
  /** `tool.execute.after`: an allow-listed tool's output is stored, without holding the turn. */
  toolExecuted(tool, sessionID, args, output) {
    if (!this.settings.toolCapture.has(tool.toLowerCase())) return;
    const key = this.contextKey(sessionID, this.state(sessionID));
    this.background(this.run(HOOKS.capture, key, async (action) => {
      if (this.optedOut(action, "capture")) return;
      const answer = await action.write({
        content: stripPrivate(captureRecord({ name: tool, input: args, output: stripPrivate(output) })),
        kind: "artifact",
        source: "tool",
        ...this.memoryFields(sessionID, key, slice(`tool:${tool}`, 0, 64))
      });
      if (answer === null) action.done("spooled", `${tool} output (${action.spoolReason})`);
      else if (answer["status"] === "rejected") action.done("refused", String(answer["reason"] ?? ""));
      else action.done("stored", `${tool} output (${String(answer["status"])})`);
    }));
  }
  /** A message event (`message.updated`, `message.part.updated`) kept for the next idle flush. */
  heardOf(properties) {
    const info = properties["info"];
    const part = properties["part"];
    const sessionID = info?.sessionID ?? part?.sessionID;
    const messageID = info?.id ?? part?.messageID;
    if (typeof sessionID !== "string" || typeof messageID !== "string") return;
    if (part !== void 0 && part.type !== "text") return;
    const state = this.state(sessionID);
    if (state.subagent || state.flushed.has(messageID)) return;
    let heard = state.heard.get(messageID);
    if (heard === void 0) state.heard.set(messageID, heard = { info: null, parts: /* @__PURE__ */ new Map() });
    if (info !== void 0) heard.info = info;
    if (part !== void 0) heard.parts.set(part.id, part);
  }
  /**
   * Flushes, in the background, what `state` heard and no flush took: the messages up to the
   * last reply with text in it (`all`: every one, the session is gone), each taken once, after
   * the lead (the prompts whose replies a span hid, which go again joined to the next prompt;
   * a prompt's visible text before `<private>` was lost when only its own hidden reply
   * followed). With nothing new, nothing is sent or logged; what was stored already is answered
   * a duplicate.
   */
  flushHeard(event, sessionID, state, all) {
    const heard = [...state.heard];
    let end = all ? heard.length : 0;
    heard.forEach(([, { info, parts }], at) => {
      if (info?.role === "assistant" && conversationText([...parts.values()]).trim()) end = at + 1;
    });
    if (end === 0) return;
    const messages = [...state.lead];
    for (const [id, { info, parts }] of heard.slice(0, end)) {
      state.heard.delete(id);
      state.flushed.add(id);
      if (info !== null) messages.push({ info, parts: [...parts.values()] });
    }
    const read = withoutPrivate(state, messages);
    state.lead = all ? [] : messages.slice(answeredUpTo(read));
    this.background(this.flush(event, sessionID, state, read.flat()));
  }
  /** Starts the service in the background when autostart is on and nothing answers. */
  autostart() {
    if (!this.settings.autostart || this.starting) return;
    this.starting = this.ensureRunning().finally(() => {
      this.starting = null;
    });
  }
  /** Lets captures, flushes and a spool replay still in flight finish (within one budget) before opencode exits. */
  async dispose() {
    const deadline = new Promise((resolve2) => setTimeout(resolve2, this.settings.budgetMs).unref());
    await Promise.race([Promise.allSettled([...this.pending]), deadline]);
  }
  // --- the actions --------------------------------------------------------------------------
  /**
   * Recalls for `prompt`, a message read inside what earlier ones left open (`carryPrivate`);
   * inside a carried span nothing is recalled, and `systemTransform` tells the model so.
   */
  async inject(key, state, prompt, carry) {
    await this.run(HOOKS.inject, key, async (action) => {
      if (this.optedOut(action, "recall")) return;
      const query = slice(strip(stripPrivateFrom(prompt, carry[0])[0]), 0, QUERY_CHARS);
      if (!query && pausedLine(prompt, carry) !== null) {
        action.done("skipped", "inside a <private> span an earlier message opened: memory paused, the model told");
        return;
      }
      if (!query) {
        action.done("skipped", "nothing but <private> text to recall for");
        return;
      }
      await this.reports.get(key);
      const answer = await this.post(action, "/recall", {
        query,
        k: this.settings.limit,
        project: this.project,
        budget_chars: this.settings.budgetChars,
        session: key,
        relevant_only: true
      });
      const block = typeof answer["block"] === "string" ? answer["block"] : "";
      if (!block) {
        action.done("nothing relevant");
        return;
      }
      state.added.push(block);
      const uids = blockUids(answer);
      this.report(action.service, key, {
        harness: HARNESS,
        hook: HOOKS.inject,
        project: this.project,
        query,
        uids,
        chars: length(block),
        session: key
      });
      action.done("injected", `${uids.length} memories, ${length(block)} chars`);
    });
  }
  /**
   * Posts an injection report without holding the model call (runner.py `_report`). The report
   * is a write: while a long writer (a purge, an import's index merge, another process) holds
   * the store's write lock, the recall before it, a read, answers at once but the report waits,
   * and awaited it cost every model call the whole budget. Telemetry: sent once within
   * REPORT_MS, never spooled or retried; a failure is a debug line, and its own client keeps it
   * out of the back-off (the service answered the recall).
   */
  report(service, key, body) {
    const task = new ServiceClient(service.url, this.settings.token, { store: service.store }).post("/inject/report", body, now() + REPORT_MS).then(
      () => void 0,
      (error) => this.debug(HOOKS.inject, `report failed: ${error.message}`)
    ).finally(() => {
      this.pending.delete(task);
      if (this.reports.get(key) === task) this.reports.delete(key);
    });
    this.pending.add(task);
    this.reports.set(key, task);
  }
  /** Stores a "remember" prompt's fact, read inside `carry` (what the earlier messages left open). */
  async remember(sessionID, state, content, carry) {
    const key = this.contextKey(sessionID, state);
    await this.run(HOOKS.remember, key, async (action) => {
      if (this.optedOut(action, "capture")) return;
      const kept = strip(stripPrivateFrom(content, carry[0])[0]);
      const paused = kept ? null : pausedLine(content, carry);
      if (paused !== null) {
        action.done("skipped", "inside a <private> span an earlier message opened: not remembered, the model told");
        state.added.push(`semantic-memory did NOT store the user's "remember" message: it is not remembered. ${paused}`);
        return;
      }
      if (!kept) {
        action.done("skipped", content ? "nothing but <private> text to remember" : "nothing to remember");
        return;
      }
      const answer = await action.write({
        content: kept,
        kind: "fact",
        source: "chat",
        ...this.memoryFields(sessionID, key)
      });
      if (answer === null) {
        action.done("spooled", `remembered in the spool (${action.spoolReason})`);
        state.added.push(
          `semantic-memory will store the user's "remember" message as a memory as soon as its service can take it; it does not need to be stored again.`
        );
        return;
      }
      if (answer["status"] === "rejected") {
        const reason = String(answer["reason"] ?? "");
        action.done("refused", reason);
        state.added.push(`semantic-memory did NOT store the user's "remember" message (${reason.slice(0, 300)}); it is not remembered.`);
        return;
      }
      const uid = String(answer["uid"]);
      action.done("stored", `remembered (${String(answer["status"])} ${uid})`);
      state.added.push(
        `semantic-memory stored the user's "remember" message as a memory (uid ${uid}); it does not need to be stored again.`
      );
    });
  }
  /**
   * Stores the exchanges of `read`, turns without their private text (`source=compaction`,
   * as the hooks' flushes).
   */
  async flush(event, sessionID, state, read) {
    const key = this.contextKey(sessionID, state);
    await this.run(event, key, async (action) => {
      if (this.optedOut(action, "capture")) return;
      const turns = [...read];
      while (turns.length && turns[turns.length - 1]?.role === "user") turns.pop();
      const items = flushItems(turns, FLUSH_MAX);
      if (!items.length) {
        action.done("skipped", "no conversation to flush");
        return;
      }
      const batches = [[]];
      let size = 0;
      for (const item of items) {
        if (size && size + item[1] > FLUSH_BATCH) {
          batches.push([]);
          size = 0;
        }
        batches[batches.length - 1]?.push(item);
        size += item[1];
      }
      const chunks = items.reduce((sum, [, pieces]) => sum + pieces, 0);
      const counts = { new: 0, duplicate: 0, rejected: 0, spooled: 0 };
      for (const batch of batches) {
        const answer = await action.write({
          items: batch.map(([item]) => ({
            ...item,
            kind: "note",
            source: "compaction",
            ...this.memoryFields(sessionID, key)
          }))
        });
        if (answer === null) {
          counts.spooled += batch.reduce((sum, [, pieces]) => sum + pieces, 0);
          continue;
        }
        for (const name of ["new", "duplicate", "rejected"]) {
          counts[name] += Number(answer[name] ?? 0) || 0;
        }
      }
      const detail = `${chunks} chunks: ${counts.new} new, ${counts.duplicate} already stored, ${counts.rejected} refused`;
      if (counts.spooled) action.done("spooled", `${detail}, ${counts.spooled} spooled (${action.spoolReason})`);
      else action.done("stored", detail);
    });
  }
  // --- plumbing -----------------------------------------------------------------------------
  /** True (and the action skipped) when the repository's file turns `what` off. */
  optedOut(action, what) {
    const repo = this.repo;
    if (repo[what]) return false;
    const why = repo.error ? `unreadable, so nothing is stored (${repo.error})` : `[${what}] enabled = false`;
    action.done("skipped", `${what} off by ${repo.path}: ${why}`);
    return true;
  }
  /**
   * Names what is in a session's context now, for the service's per-context dedup: memories
   * injected into it (or flushed from it, tagged `session:<key>`) are not injected again.
   * A compaction or a new opencode process (which rebuilds the system prompt without what
   * an earlier one added) starts a new context, so what left it can come back.
   */
  contextKey(sessionID, state) {
    const base = `${slice(sessionID, 0, 40)}@${this.processTag}`;
    return state.compactions ? `${base}+${state.compactions}` : base;
  }
  /**
   * What every memory the plugin stores carries (adapter.py `memory_fields`): the project, the
   * tags (the context key among them, so this context is not given it back) and the agent
   * session, in which the service keeps memories in arrival order.
   */
  memoryFields(sessionID, key, ...extraTags) {
    return {
      project: this.project,
      tags: [`harness:${HARNESS}`, slice(`session:${key}`, 0, 64), ...extraTags],
      session: slice(`${HARNESS}:${sessionID}`, 0, 256)
    };
  }
  state(sessionID) {
    let state = this.sessions.get(sessionID);
    if (state === void 0) {
      state = {
        compactions: 0,
        prompt: null,
        recalled: null,
        added: [],
        flushNext: false,
        heard: /* @__PURE__ */ new Map(),
        flushed: /* @__PURE__ */ new Set(),
        subagent: false,
        promptCarry: NO_CARRY,
        openBefore: /* @__PURE__ */ new Map(),
        open: NO_CARRY,
        remembers: [],
        lead: []
      };
    } else {
      this.sessions.delete(sessionID);
    }
    this.sessions.set(sessionID, state);
    const oldest = this.sessions.size > MAX_SESSIONS ? this.sessions.entries().next().value : void 0;
    if (oldest !== void 0) {
      const [oldestID, oldestState] = oldest;
      this.sessions.delete(oldestID);
      if (!oldestState.subagent) this.flushHeard(HOOKS.idle, oldestID, oldestState, true);
    }
    return state;
  }
  /** A task that runs on without holding opencode; `dispose` lets it finish (within a budget). */
  background(task) {
    this.pending.add(task);
    void task.finally(() => this.pending.delete(task));
  }
  async post(action, path, body) {
    const answer = await action.service.post(path, body, action.deadline);
    return typeof answer === "object" && answer !== null ? answer : {};
  }
  /** Runs an action within its budget; whatever happens, one line in the hook log. */
  async run(event, session, body) {
    const started = now();
    const debug = (message) => this.debug(event, message);
    const offline = this.backingOff(this.serviceUrl().url);
    const target = { folder: spoolPath(this.settings), event };
    let { outcome, detail, service } = await this.attempt(started + this.settings.budgetMs, debug, body, target, offline);
    const ms = now() - started;
    if (outcome === "timeout" && event === HOOKS.inject) detail = `${detail} (recall)`;
    if (service !== null && offline === null) {
      const note = await this.afterContact(service);
      if (note) detail = detail ? `${detail}; ${note}` : note;
    }
    if (this.startNote) {
      detail = detail ? `${detail}; ${this.startNote}` : this.startNote;
      this.startNote = "";
    }
    debug(detail ? `${outcome}: ${detail}` : outcome);
    this.log(event, outcome, detail, session, ms);
  }
  /** The action's outcome (its own, or how the service failed it) and the client it used. */
  async attempt(deadline, debug, body, target, offline) {
    let service = null;
    try {
      if (offline === null) await this.waitForStart(deadline);
      const { url, origin, store } = this.serviceUrl();
      debug(`service ${url} (${origin})`);
      service = new ServiceClient(url, this.settings.token, { offline, writesHeld: offline === null ? this.writesHeld(url) : null, store });
      const action = new Action(deadline, service, target);
      await body(action);
      return { outcome: action.outcome, detail: action.detail, service };
    } catch (error) {
      if (error instanceof ServiceUnavailable) return { outcome: error.outcome, detail: error.message, service };
      const { name, message } = error instanceof Error ? error : { name: "Error", message: String(error) };
      return { outcome: "error", detail: slice(`${name}: ${message}`, 0, 500), service };
    }
  }
  /** The error every request of an action meets at once while the hooks back off; else null. */
  backingOff(url) {
    const state = activeBackOff(backoffPath(this.settings), url);
    if (state === null) return null;
    const until = new Date(state.until * 1e3).toTimeString().slice(0, 8);
    return new ServiceUnavailable(
      state.outcome,
      `backing off until ${until}, no request made (the last try: ${state.detail})`
    );
  }
  /**
   * The error every write (not a recall) of an action meets at once while the service's slow
   * mark holds (backoff.ts); else null. Spooled without waiting: the service replays it.
   */
  writesHeld(url) {
    const mark = activeSlowMark(backoffPath(this.settings), url);
    if (mark === null) return null;
    const until = new Date(mark.until * 1e3).toTimeString().slice(0, 8);
    return new ServiceUnavailable(
      "timeout",
      `the service is slow, spooled without waiting (slow mark until ${until}; the last try: ${mark.detail})`
    );
  }
  /**
   * A service that is down or hung starts the shared back-off (runner.py `_after_contact`);
   * one that answered ends it. Hung, not slow: a request that timed out starts it only when
   * the service answers no probe either (`answers`, PROBE_MS). A write waiting behind a long
   * writer (a purge, an import) times out while the service answers, and backing off for it
   * would blank every harness's recalls, which that writer does not hold back; it sets the
   * slow mark instead, so the next writes of every harness spool at once rather than wait
   * their whole budget too, and a write the service takes ends it. What to add to the log
   * line's detail, or "".
   */
  async afterContact(service) {
    const path = backoffPath(this.settings);
    const failure = service.lastFailure;
    const timedOut = failure?.outcome === "timeout";
    const slowFor = slowMs(this.settings.backoffMs);
    if (failure !== null && !service.answered) {
      if (timedOut && this.settings.backoffMs > 0 && await answers(service.url, this.settings.token)) {
        markSlow(path, service.url, slowFor, failure.message);
        return "the service answers a probe: slow, not hung, no back-off";
      }
      startBackOff(path, service.url, this.settings.backoffMs, timedOut ? "timeout" : "service down", failure.message);
    } else if (service.answered) {
      clearBackOff(path, service.url);
      if (timedOut && failure !== null) markSlow(path, service.url, slowFor, failure.message);
      else if (service.wrote) clearSlowMark(path, service.url);
      if (service.succeeded && service.writesHeld === null) this.replay(service);
    }
    return "";
  }
  /**
   * Hands what the spool holds to a service that answered, in the background and within one
   * budget (the service drains its own spool too; this covers one with another db). A write
   * it cannot take now stays queued; one it refuses as invalid goes to `rejected/`, and so do
   * the memories it refuses one by one in a 200 answer.
   */
  replay(service) {
    const folder = spoolPath(this.settings);
    if (this.replaying !== null || !pendingSpool(folder).length) return;
    const started = now();
    const deadline = started + this.settings.budgetMs;
    const client = new ServiceClient(service.url, this.settings.token, { store: service.store });
    const send = async (path, body) => {
      try {
        return await client.post(path, body, deadline);
      } catch (error) {
        if (error instanceof ServiceFailed && !error.retryable) throw new SpoolRefused(error.message);
        if (error instanceof ServiceUnavailable) throw new SpoolRetry(error.message);
        throw error;
      }
    };
    const task = replaySpool(folder, send, () => now() < deadline - 50).then(({ sent, rejected }) => {
      if (!sent && !rejected) return;
      const refused = rejected ? `, ${rejected} refused (see \`memory-mcp spool list\`)` : "";
      this.log(HOOKS.replay, "stored", `${sent} spooled write(s) replayed${refused}`, null, now() - started);
    }).catch((error) => {
      if (!(error instanceof SpoolStuck) || error.message === this.stuck) return;
      this.stuck = error.message;
      this.log(HOOKS.replay, "error", error.message, null, now() - started);
    }).finally(() => {
      this.replaying = null;
      this.pending.delete(task);
    });
    this.replaying = task;
    this.pending.add(task);
  }
  /** MEMORY_PLUGIN_URL, else a live discovery file, else a service autostart started, else the default. */
  serviceUrl() {
    const found = resolveUrl(this.settings);
    if (found.origin === "default" && this.startedUrl) return { url: this.startedUrl, origin: "autostart", store: null };
    return found;
  }
  async ensureRunning() {
    const { url, store } = this.serviceUrl();
    try {
      await new ServiceClient(url, this.settings.token, { store }).get("/health", now() + this.settings.budgetMs);
      return;
    } catch (error) {
      if (!startable(error)) return;
    }
    try {
      const started = await startService(this.settings, START_WAIT_MS);
      this.startedUrl = started.url;
      this.startNote = `autostart: ${started.how} the service at ${started.url}`;
    } catch (error) {
      this.startNote = `autostart failed: ${error.message}`;
    }
    this.debug(HOOKS.autostart, this.startNote);
  }
  /** An action that comes while autostart runs waits for it, within the action's budget. */
  async waitForStart(deadline) {
    if (this.starting === null) return;
    let timer;
    const timeout = new Promise((resolve2) => {
      timer = setTimeout(resolve2, Math.max(deadline - now() - 50, 0));
    });
    await Promise.race([this.starting, timeout]);
    clearTimeout(timer);
  }
  log(event, outcome, detail, session, ms) {
    const warning = repoWarning(this.repo);
    record(hookLogPath(this.settings), {
      harness: HARNESS,
      event,
      outcome,
      detail,
      session,
      project: this.project,
      ms: Math.round(ms * 10) / 10,
      // A malformed repository file, or its project name not allowed yet: one line on every
      // entry, whatever the outcome.
      ...warning === null ? {} : { warning }
    });
  }
  debug(event, message) {
    if (this.settings.debug) this.write(`memory-mcp ${HARNESS} ${event}: ${message}
`);
  }
};
var OPEN_TAG = "<private>";
var CLOSE_TAG = "</private>";
var TAG_END = /[>\ufe65\uff1e]/g;
function stripPrivateFrom(text2, depth) {
  if (depth <= 0 && stripPrivate(text2) === text2) return [text2, 0];
  const read = OPEN_TAG.repeat(Math.max(depth, 0)) + text2;
  let end = 0;
  for (const match of read.matchAll(TAG_END)) end = (match.index ?? 0) + match[0].length;
  const head = read.slice(0, end);
  let open = 0;
  while (!keptEnd(head, open)) open++;
  return [stripPrivate(read), open];
}
var NO_CARRY = [0, 0];
var CARRY_MESSAGES = 2;
function carryPrivate(text2, carry) {
  const [kept, depth] = stripPrivateFrom(text2, carry[0]);
  if (!depth) return [kept, NO_CARRY];
  const carried = carry[0] && !kept ? carry[1] + 1 : 0;
  if (carried >= CARRY_MESSAGES) return [kept, NO_CARRY];
  return [kept, [depth, carried]];
}
function pausedNotice(carry) {
  const left = CARRY_MESSAGES - carry[1] - 1;
  const until = left ? `or after ${left} more message${left !== 1 ? "s" : ""} without it` : "or from the next message on (an unclosed tag is then a mention)";
  return `semantic-memory is paused: an earlier user message opened <private> and none has closed it, so this message is neither recalled for nor stored; memory resumes at </private> ${until}.`;
}
function pausedLine(prompt, carry) {
  if (!carry[0]) return null;
  const [kept, open] = stripPrivateFrom(prompt, carry[0]);
  return !strip(kept) && open ? pausedNotice(carry) : null;
}
function keptEnd(head, open) {
  const closed = `${head}${CLOSE_TAG.repeat(open)}`;
  return stripPrivate(`${closed}.`) === `${stripPrivate(closed)}.`;
}
function withoutPrivate(state, messages) {
  const first = messages[0];
  let carry = (first === void 0 ? void 0 : state.openBefore.get(first.info.id)) ?? state.open;
  const read = [];
  for (const message of messages) {
    state.openBefore.set(message.info.id, carry);
    const at = transcriptTime(message.info.time?.created);
    const turns = [];
    for (const turn of messageTurns([message])) {
      let text2;
      if (turn.role === "user") [text2, carry] = carryPrivate(unquote(turn.text), carry);
      else text2 = carry[0] ? "" : stripPrivate(turn.text);
      turns.push({ ...turn, text: text2, at });
    }
    read.push(turns);
  }
  state.open = carry;
  return read;
}
function answeredUpTo(read) {
  let end = 0;
  read.forEach((turns, at) => {
    if (turns.some((turn) => turn.role === "assistant" && strip(turn.text))) end = at + 1;
  });
  return end;
}
function blockUids(answer) {
  if (Array.isArray(answer["block_uids"])) return answer["block_uids"].map(String);
  const items = Array.isArray(answer["items"]) ? answer["items"] : [];
  return items.flatMap((item) => typeof item?.uid === "string" ? [item.uid] : []);
}
function startable(error) {
  if (error instanceof ServiceFailed) return error.foreign;
  return error instanceof NotTheService || error instanceof ServiceUnavailable && error.outcome === "service down";
}

// src/index.ts
var server = async (input, options) => {
  const { settings, problems } = loadSettings(process.env, options ?? {});
  const memory = new MemoryPlugin(settings, input.directory, problems);
  memory.autostart();
  return {
    "chat.message": async (hook, output) => {
      await memory.chatMessage(hook.sessionID, output.parts);
    },
    "experimental.chat.messages.transform": async (_hook, output) => {
      await memory.messagesTransform(output.messages);
    },
    "experimental.chat.system.transform": async (hook, output) => {
      await memory.systemTransform(hook.sessionID, output.system);
    },
    "experimental.session.compacting": async (hook) => {
      memory.compacting(hook.sessionID);
    },
    "tool.execute.after": async (hook, output) => {
      memory.toolExecuted(hook.tool, hook.sessionID, hook.args, String(output.output ?? ""));
    },
    event: async ({ event }) => {
      memory.event(event.type, event.properties);
    },
    dispose: () => memory.dispose()
  };
};
var index_default = { id: "semantic-memory", server };
export {
  MemoryPlugin,
  appendSpool,
  captureRecord,
  chunkTurns,
  clean,
  index_default as default,
  describeInput,
  detectProject,
  flushItems,
  loadRepoConfig,
  loadSettings,
  normaliseRemote,
  refusedItems,
  remembered,
  replaySpool,
  repoWarning,
  server,
  splitText,
  stripPrivate,
  unquote
};
