// The browse page of semantic-memory-mcp: plain JavaScript, no framework, no build step.
//
// Memory content, projects, queries and tags are untrusted: agents and tools wrote them. The DOM
// is therefore built with createElement and text nodes only (never innerHTML), links are made
// only from our own route names plus encodeURIComponent, and the Content-Security-Policy the
// service sends (script-src 'self', no inline script, no eval) would stop anything that slipped
// through anyway. Every text node and tooltip el() makes shows bidi controls as their code
// points (displayText), so that no stored text is shown in an order other than the stored one.

const TOKEN_KEY = "semantic-memory.token";
/** How long a call may go unanswered before the page says so (a hung service never answers).
    Recall, and a write waiting its turn for the store, answer well within it. */
const REQUEST_TIMEOUT_MS = 10_000;
/** Purge and backfill: minutes on a large store. */
const MAINTENANCE_TIMEOUT_MS = 10 * 60_000;
const PREVIEW_CHARS = 280;
const SVG_NS = "http://www.w3.org/2000/svg";

const state = {
  health: null, // GET /health: version, auth (whether the API needs a token)
  stats: null, // GET /api/stats: refreshed by the overview and by each search (its filters)
  ticket: 0, // bumped per navigation: a slow answer for a view left behind is dropped
  listHash: "#search", // the list a memory was opened from, for "back" and after forgetting
  memoryUid: null, // the memory the memory view shows (its buttons act on it)
  editing: null, // the memory the open editor edits (null: closed)
  // Shown after the navigation under way (which clears the notice otherwise): {message,
  // action}, e.g. "Forgotten" with its Undo.
  nextNotice: null,
};

class AuthNeeded extends Error {}

/** The service refused a request: its one-line `error`, with the status and the whole answer
    (`field` names what to fix; a forgotten memory's 404 says `forgotten`). */
class Refused extends Error {
  constructor(message, status, body) {
    super(message);
    this.status = status;
    this.body = body || {};
  }
}

// --- DOM helpers ----------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

/** Bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069). Obeyed, they
    reorder the text after them ("Trojan Source"): `bidi \u202eexe.txt` would read `bidi txt.exe`,
    a string other than the one stored and given to the agent. */
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;

/** `text` as the page shows it: each bidi control written as its code point (`<U+202E>`), as
    the CLI prints it, so the characters read in the order they are stored. */
const displayText = (text) => String(text).replace(BIDI_CONTROLS, (c) =>
  `<U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}>`);

/** Attributes a person reads (tooltips, screen-reader labels): shown as text is. */
const READ_ATTRS = new Set(["title", "aria-label"]);

function setProps(node, { cls, text, attrs = {}, on = {} } = {}) {
  if (cls) node.setAttribute("class", cls);
  if (text !== undefined && text !== null) node.textContent = displayText(text);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined && value !== false) {
      const shown = value === true ? "" : String(value);
      node.setAttribute(name, READ_ATTRS.has(name) ? displayText(shown) : shown);
    }
  }
  for (const [event, handler] of Object.entries(on)) node.addEventListener(event, handler);
  return node;
}

function addChildren(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : displayText(child)); // strings: text nodes
  }
  return node;
}

/** An HTML element: el("a", {cls, text, attrs, on}, ...children). */
const el = (tag, props, ...children) =>
  addChildren(setProps(document.createElement(tag), props), children);

/** Direction from the text itself (its first strong character), isolated from what is around
    it: an Arabic or Hebrew memory, project or query reads right to left, in its own order. This
    obeys no bidi control and adds none (displayText still shows them as code points). */
const AUTO_DIR = { dir: "auto" };

/** A piece of stored or typed text inside a sentence of the page's own ("Forgotten: …"). */
const userText = (text) => el("span", { text, attrs: AUTO_DIR });

/** An SVG element, the same way. */
const svgEl = (tag, props, ...children) =>
  addChildren(setProps(document.createElementNS(SVG_NS, tag), props), children);

// --- formatting -----------------------------------------------------------------------------

const num = (n) => Number(n || 0).toLocaleString("en-US");
const tokens = (chars) => `~${num(Math.floor((chars || 0) / 4))} tokens`;

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = Number(n || 0);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

function when(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return el("span", { text: iso || "—" });
  const pad = (v) => String(v).padStart(2, "0");
  const shown = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} `
    + `${pad(date.getHours())}:${pad(date.getMinutes())}`;
  return el("time", { text: shown, attrs: { datetime: iso, title: iso } });
}

/** A day the date field picked (YYYY-MM-DD) as the start of that day where the browser is, with
    its offset (2026-05-04T00:00:00+09:00): the page shows local times, and the service reads a
    bare date as UTC midnight. Anything else (7d, from a hand-written address) goes as it is.
    A day that does not exist (2026-13-45, 2026-02-30: a hand-edited address) is refused: Date
    would move it to another day (2027-02-14) and filter by that, with the date field empty. */
function localDayStart(value) {
  const day = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!day) return value;
  const [year, month, date] = day.slice(1).map(Number);
  const start = new Date(2000, 0, 1); // setFullYear: years 0–99 stay themselves (not 19xx)
  start.setFullYear(year, month - 1, date);
  if (start.getFullYear() !== year || start.getMonth() !== month - 1
      || start.getDate() !== date) {
    throw new Error(`since: ${value} is not a day of the calendar (expected YYYY-MM-DD, e.g. `
      + "2026-05-04).");
  }
  const pad = (v) => String(v).padStart(2, "0");
  const offset = -start.getTimezoneOffset(); // minutes east of UTC
  const zone = `${offset < 0 ? "-" : "+"}${pad(Math.floor(Math.abs(offset) / 60))}:`
    + pad(Math.abs(offset) % 60);
  // The clock of `start`, not 00:00: where a DST change skips midnight, the day starts later.
  return `${start.getFullYear()}-${pad(start.getMonth() + 1)}-${pad(start.getDate())}T`
    + `${pad(start.getHours())}:${pad(start.getMinutes())}:00${zone}`;
}

/** Grapheme clusters (an emoji with its modifiers, a flag, a ZWJ family, a letter and its
    accents); where a browser lacks Intl.Segmenter, code points (no half surrogate pair). */
const GRAPHEMES = typeof Intl.Segmenter === "function"
  ? new Intl.Segmenter(undefined, { granularity: "grapheme" }) : null;
const segments = (text) => (GRAPHEMES
  ? Array.from(GRAPHEMES.segment(text), (part) => part.segment) : Array.from(text));

/** `text` on one line, cut to at most `limit` UTF-16 units with "…": cut between graphemes,
    never inside one (a half emoji shows as �), as the CLI and the hooks cut. Only the head is
    segmented: a boundary depends on the text before it and the one code point after (whole:
    one unit more than the cut, or half a flag would end a segment). */
function preview(text, limit = PREVIEW_CHARS) {
  const flat = String(text || "").replace(/\s+/g, " ").trim();
  if (flat.length <= limit) return flat;
  let kept = "";
  for (const part of segments(flat.slice(0, limit + 1))) {
    if (kept.length + part.length > limit - 1) break;
    kept += part;
  }
  return `${kept}…`;
}

const memoryHref = (uid) => `#memory/${encodeURIComponent(uid)}`;
const searchHref = (params) => `#search?${new URLSearchParams(params)}`;
const labelOf = (value) => (value === "" || value === null || value === undefined
  ? "(none)" : value);
/** The global memories, those without a project (`project=` in a search address). */
const NO_PROJECT = "(no project)";

// --- notices and confirmation ---------------------------------------------------------------

/** Run `work` with `button` disabled, so that a second click cannot send its request again
    while the first is under way (Save, Forget…, Undo, Restore, Purge…, Backfill…). A button
    that had the focus gets it back when done: disabling it dropped the focus to the top of the
    page, where the next Tab would start again. */
async function busy(button, work) {
  const hadFocus = document.activeElement === button;
  button.disabled = true;
  try {
    return await work();
  } finally {
    button.disabled = false;
    const lost = !document.activeElement || document.activeElement === document.body;
    if (hadFocus && lost && button.isConnected) button.focus();
  }
}

/** A button whose click runs `run`, disabled meanwhile (busy). */
const actionButton = (label, run, { cls = "link notice-action", attrs = {} } = {}) =>
  el("button", { cls, text: label, attrs: { type: "button", ...attrs },
    on: { click: (event) => busy(event.currentTarget, run) } });

/** Show `message` (a string, or strings and nodes such as userText); `action` ({label, run} or
    {label, href}) adds a button or a link after it (Undo, Open it), there until the next
    notice: the next navigation clears it. The box stays in the page, emptied rather than
    hidden: a live region shown at the moment its text arrives is often not announced. */
function notify(message, kind = "info", action = null) {
  const box = $("notice");
  const empty = !message || (Array.isArray(message) && !message.length);
  let control = null;
  if (!empty && action && action.href) {
    control = el("a", { cls: "notice-action", text: action.label, attrs: { href: action.href } });
  } else if (!empty && action) {
    control = actionButton(action.label, action.run);
  }
  box.replaceChildren(...(empty ? [] : [el("span", { attrs: AUTO_DIR }, message), control]
    .filter(Boolean)));
  box.setAttribute("class", `notice ${kind}`);
}

/** Resolves the question the dialog asks now (`confirmAction`); null when none is open. */
let answerQuestion = null;

/** A modal yes/no question; resolves true when the user confirms. Escape cancels. `warning`
    (if any) says what else the action changes. The focus then goes back to what had it (the
    button that asked), so ask before disabling that button (busy), not while. */
function confirmAction(title, detail, action, warning = "") {
  const dialog = $("confirm-dialog");
  const opener = document.activeElement;
  $("confirm-title").textContent = title;
  $("confirm-detail").textContent = displayText(detail);
  $("confirm-warning").textContent = displayText(warning);
  $("confirm-warning").hidden = !warning;
  $("confirm-ok").textContent = action;
  answerQuestion?.(false);
  return new Promise((resolve) => {
    answerQuestion = (ok) => {
      answerQuestion = null;
      if (dialog.open) dialog.close();
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
      resolve(ok);
    };
    dialog.showModal();
    $("confirm-cancel").focus(); // the safe choice has the focus
  });
}

/** The dialog closed other than by its buttons (Escape). A "close" event is queued, not sent
    at once: one left from the question before (Escape, then Enter on the same button again)
    may arrive while the next question is open, and answered it "no". */
function closedDialog() {
  if (!$("confirm-dialog").open) answerQuestion?.(false);
}

// --- the API --------------------------------------------------------------------------------

const token = () => sessionStorage.getItem(TOKEN_KEY);

/** No answer from the service: refused (not running) or none within `timeoutMs` (hung). A
    write that timed out may still land when the service wakes. */
function unanswered(method, timeoutMs, timedOut) {
  const wait = timedOut ? ` (no answer in ${timeoutMs / 1000} s)` : "";
  const write = timedOut && method && method !== "GET"
    ? " What was sent may still land: reload to see." : "";
  return new Error(`The service at ${location.origin} does not answer${wait} — is memory-mcp `
    + `running?${write}`);
}

async function api(path, { timeoutMs = REQUEST_TIMEOUT_MS, ...options } = {}) {
  const headers = { Accept: "application/json", ...(options.headers || {}) };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const signal = AbortSignal.timeout(timeoutMs); // also bounds reading the answer
  let response;
  let body;
  try {
    response = await fetch(path, { ...options, headers, cache: "no-store", signal });
    body = await response.json().catch((err) => {
      if (err instanceof SyntaxError) return null; // an answer, but not JSON
      throw err;
    });
  } catch {
    throw unanswered(options.method, timeoutMs, signal.aborted);
  }
  if (response.status === 401) {
    const refused = Boolean(token());
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenView(refused ? "That token was refused: enter the service's MEMORY_TOKEN." : "");
    throw new AuthNeeded();
  }
  if (!response.ok) {
    throw new Refused((body && body.error) || `${response.status} ${response.statusText}`,
      response.status, body);
  }
  return body;
}

async function loadStats() {
  if (!state.stats) state.stats = await api("/api/stats");
  return state.stats;
}

// --- auth -----------------------------------------------------------------------------------

const needsToken = () => Boolean(state.health && state.health.auth);

function renderAuthStatus() {
  const box = $("auth-status");
  if (!needsToken()) {
    box.replaceChildren(el("span", { cls: "badge", text: "open (no token)" }));
    return;
  }
  if (!token()) {
    box.replaceChildren(el("span", { cls: "badge warn", text: "token needed" }));
    return;
  }
  box.replaceChildren(
    el("span", { cls: "badge ok", text: "token set" }),
    el("button", {
      cls: "link", text: "Forget token", attrs: { type: "button" },
      on: {
        click: () => {
          sessionStorage.removeItem(TOKEN_KEY);
          state.stats = null;
          showTokenView("");
        },
      },
    }),
  );
}

function showTokenView(error) {
  showView("token");
  renderAuthStatus();
  $("token-error").textContent = error;
  $("token-error").hidden = !error;
  $("token-input").value = "";
  $("token-input").focus();
}

async function submitToken(event) {
  event.preventDefault();
  const value = $("token-input").value.trim();
  if (!/^[!-~]+$/.test(value)) {
    // HTTP headers carry Latin-1 only, and the service's tokens are printable ASCII.
    showTokenView("A token is printable ASCII without spaces.");
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, value);
  state.stats = null;
  try {
    await loadStats(); // proves the token before leaving this view
  } catch (err) {
    if (!(err instanceof AuthNeeded)) showTokenView(err.message);
    return;
  }
  renderAuthStatus();
  await route();
}

// --- views ----------------------------------------------------------------------------------

const VIEWS = ["token", "overview", "search", "memory", "forgotten", "telemetry"];

function showView(name) {
  for (const view of VIEWS) $(`${view}-view`).hidden = view !== name;
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    // A memory is opened from the search view: that tab stays the current one.
    const current = link.dataset.view === (name === "memory" ? "search" : name);
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function card(label, value, note) {
  return el("div", { cls: "card" },
    el("div", { cls: "card-label", text: label }),
    el("div", { cls: "card-value", text: value }),
    note ? el("div", { cls: "card-note", text: note }) : null);
}

function countList(target, counts, filter, extra) {
  const entries = Object.entries(counts || {});
  const items = entries.map(([value, count]) => el("li", {},
    el("a", { text: labelOf(value),
      attrs: { href: searchHref({ [filter]: value }), ...AUTO_DIR } }),
    el("span", { cls: "count", text: num(count) })));
  if (extra) items.push(extra);
  if (!items.length) items.push(el("li", { cls: "empty", text: "None yet." }));
  $(target).replaceChildren(...items);
}

function embedderText(embedder) {
  if (!embedder) return ["none", "no embedder plugin: keyword channels only"];
  if (!embedder.active) return ["off", embedder.reason || "vector channel inactive"];
  return [embedder.model_id || embedder.embedder || "on", embedder.embedder || ""];
}

/** The write spool: what hooks could not hand to the service in time, waiting for replay. */
function spoolCard(spool) {
  if (!spool) return card("Spool", "—");
  const parts = [];
  if (spool.pending && spool.oldest) parts.push(`oldest from ${new Date(spool.oldest * 1000).toLocaleString()}`);
  if (spool.rejected) parts.push(`${num(spool.rejected)} refused`);
  if (!parts.length) parts.push("every hook write has landed");
  return card("Spool", spool.pending ? `${num(spool.pending)} waiting` : "empty", parts.join(" · "));
}

async function renderOverview(ticket) {
  state.stats = null; // the overview always shows fresh numbers (agents write meanwhile)
  const stats = await loadStats();
  if (ticket !== state.ticket) return;
  const injections = stats.injections || {};
  const embedder = stats.embedder;
  const [embedderName, embedderNote] = embedderText(embedder);
  const vectorized = embedder && embedder.active
    ? `${num(stats.vectorized)} of ${num(stats.memories)}` : "—";
  $("overview-cards").replaceChildren(
    card("Memories", num(stats.memories)),
    card("Forgotten", num(stats.forgotten), "removed for good by a purge"),
    card("Vectorized", vectorized, embedder && embedder.active ? "" : "no active embedder"),
    card("Embedding queue", embedder && embedder.active ? num(stats.embedding_queue || 0) : "—",
      stats.embedding_queue ? "stored, found by words; vectors follow" : "every memory embedded"),
    card("Database", bytes(stats.db_bytes), stats.db_path),
    card("Recall", stats.recall_mode === "hybrid" ? "hybrid" : "keyword",
      stats.recall_mode === "hybrid" ? "words and meaning" : "by words only"),
    card("Embedder", embedderName, embedderNote),
    card("Device", stats.device || "—"),
    card("Injections", num(injections.total),
      `${num(injections.last_7_days)} in 7 days · ${tokens(injections.chars)}`),
    spoolCard(stats.spool),
  );
  const idle = embedder && !embedder.active ? embedder.channel : null; // searches nothing
  $("overview-channels").replaceChildren(...(stats.channels || []).map((channel) =>
    el("li", {}, el("strong", { text: channel.name }), ` weight ${channel.weight}`,
      channel.name === idle ? el("span", { cls: "muted", text: " (inactive)" }) : null)));
  countList("overview-kinds", stats.by_kind, "kind");
  countList("overview-sources", stats.by_source, "source");
  const unnamed = stats.without_project
    ? el("li", {}, el("a", { text: NO_PROJECT, attrs: { href: searchHref({ project: "" }) } }),
      el("span", { cls: "count", text: num(stats.without_project) }))
    : null;
  countList("overview-projects", stats.by_project, "project", unnamed);
  // Bulk maintenance answers 403 without MEMORY_TOKEN: offer it only where it can work.
  $("maintenance").hidden = !(needsToken() && token());
  $("maintenance-hint").hidden = needsToken();
}

async function runMaintenance(kind, button) {
  const questions = {
    purge: ["Purge now?", "Forgotten memories are deleted for good, expired artifacts and old "
      + "telemetry are removed, and the file is compacted. This cannot be undone.", "Purge"],
    backfill: ["Backfill vectors now?", "Every memory without a vector is embedded. With a "
      + "large store this takes a while.", "Backfill"],
  };
  if (!(await confirmAction(...questions[kind]))) return;
  const report = $("maintenance-report");
  notify(`${kind === "purge" ? "Purging" : "Backfilling"}…`);
  try {
    const result = await busy(button, () => api(`/api/maintenance/${kind}`, { method: "POST",
      timeoutMs: MAINTENANCE_TIMEOUT_MS }));
    const rows = Object.entries(result).flatMap(([key, value]) => [
      el("dt", { text: key.replaceAll("_", " ") }),
      el("dd", { text: typeof value === "object" ? JSON.stringify(value) : String(value) }),
    ]);
    report.replaceChildren(...rows);
    report.hidden = false;
    notify(`${kind === "purge" ? "Purge" : "Backfill"} done.`, "ok");
  } catch (err) {
    if (!(err instanceof AuthNeeded)) notify(err.message, "error");
    return;
  }
  state.stats = null; // the counts changed
  await renderOverview(state.ticket);
}

// --- search ---------------------------------------------------------------------------------

const FILTERS = ["project", "kind", "source"];
const PAGE_SIZES = ["20", "50", "100"];
/** Recall ranks at most this many memories, and /api/search pages through them only
    (MAX_SEARCH_RESULTS in service/schemas.py); the empty-query list has no such cap. */
const SEARCH_CAP = 200;

/** The filters the address sets, as the API reads them. An empty `project=` stays: it means
    the global memories alone (those without a project); another empty filter means any. */
function chosenFilters(params) {
  const chosen = {};
  for (const name of FILTERS) {
    const value = params.get(name);
    if (value && value.trim()) chosen[name] = value;
    else if (name === "project" && value !== null) chosen[name] = "";
  }
  return chosen;
}

/** The options of a filter: any, then (with `noneLabel`) the memories without one, then the
    values the store holds. `chosen`: undefined for any, "" for none. */
function fillSelect(select, counts, chosen, anyLabel, noneLabel = null) {
  const values = Object.keys(counts || {});
  if (chosen && !values.includes(chosen)) values.unshift(chosen); // e.g. from a link
  // Both "any" and "none" submit no value: the "none" one is told apart by data-none.
  const none = noneLabel
    && el("option", { text: noneLabel, attrs: { value: "", "data-none": true } });
  select.replaceChildren(...[el("option", { text: anyLabel, attrs: { value: "" } }), none,
    ...values.map((value) => el("option", { text: value, attrs: { value, ...AUTO_DIR } }))]
    .filter(Boolean));
  if (none && chosen === "") none.selected = true;
  else select.value = chosen || "";
}

/** The page size the address asks for, if the form offers it. */
const pageSize = (params) => (PAGE_SIZES.includes(params.get("limit"))
  ? params.get("limit") : "20");

/** What a filter's drop-down has chosen: undefined for any, "" for none (no project). */
function selectedFilter(select) {
  const option = select.selectedOptions[0];
  if (!option || (option.value === "" && option.dataset.none === undefined)) return undefined;
  return option.value;
}

/** The filters' choices: the store's projects, kinds and sources, `chosen` selected. */
function fillFilters(stats, chosen) {
  fillSelect($("search-project"), stats.by_project, chosen.project, "Any project", NO_PROJECT);
  fillSelect($("search-kind"), stats.by_kind, chosen.kind, "Any kind");
  fillSelect($("search-source"), stats.by_source, chosen.source, "Any source");
}

/** The form as the address says, the filters' choices as last known (refreshFilters). */
function fillForm(params) {
  $("search-q").value = params.get("q") || "";
  fillFilters(state.stats || {}, chosenFilters(params));
  $("search-since").value = params.get("since") || "";
  $("search-limit").value = pageSize(params);
}

/** The filters' choices as the store holds them now, keeping what each has chosen (the user
    may have changed one meanwhile). */
function refreshFilters(stats) {
  const chosen = {};
  for (const name of FILTERS) chosen[name] = selectedFilter($(`search-${name}`));
  fillFilters(stats, chosen);
}

function submitSearch(event) {
  event.preventDefault();
  const params = new URLSearchParams();
  const noProject = selectedFilter($("search-project")) === "";
  for (const [name, value] of new FormData($("search-form"))) {
    if (name === "project" && noProject) params.set(name, ""); // the global memories alone
    else if (String(value).trim() && !(name === "limit" && value === "20")) {
      params.set(name, value);
    }
  }
  const hash = `#search?${params}`;
  if (location.hash === hash) navigate(); // the same search again: refresh it
  else location.hash = hash;
}

function rankChips(item, channels) {
  if (item.neighbour_of) {
    // Not ranked itself: recall brought it along as the session neighbour of a hit.
    return el("p", { cls: "why" }, el("span", { cls: "rank miss", text: "neighbour of" }),
      el("a", { text: item.neighbour_of, attrs: { href: memoryHref(item.neighbour_of) } }));
  }
  const chips = channels.map((name) => (item.ranks && item.ranks[name]
    ? el("span", { cls: "rank", text: `${name} #${item.ranks[name]}`,
      attrs: { title: `rank ${item.ranks[name]} in the ${name} channel` } })
    : el("span", { cls: "rank miss", text: `${name} –`,
      attrs: { title: `not among the ${name} channel's candidates` } })));
  const cosine = item.signals && item.signals.cosine;
  return el("p", { cls: "why" },
    el("span", { cls: "score", text: `score ${Number(item.score).toFixed(4)}`,
      attrs: { title: "fused score (normalised channel scores; weighted RRF with MEMORY_FUSION=rrf)" } }),
    chips,
    cosine !== undefined ? el("span", { cls: "rank", text: `cosine ${cosine.toFixed(3)}` }) : null);
}

/** A memory's kind, (source,) project and tags as chips, each in the direction of its text. */
const metaTags = (memory, withSource) => [
  el("span", { cls: "tag kind", text: memory.kind, attrs: AUTO_DIR }),
  withSource ? el("span", { cls: "tag", text: memory.source, attrs: AUTO_DIR }) : null,
  memory.project ? el("span", { cls: "tag project", text: memory.project, attrs: AUTO_DIR })
    : null,
  ...(memory.tags || []).map((tag) => el("span", { cls: "tag muted", text: `#${tag}`,
    attrs: AUTO_DIR })),
];

function resultItem(item, channels) {
  return el("li", { cls: "hit" },
    el("a", { cls: "hit-content", text: preview(item.content) || "(empty)",
      attrs: { href: memoryHref(item.uid), ...AUTO_DIR } }),
    el("p", { cls: "meta" }, metaTags(item, true),
      el("span", { cls: "updated" }, "updated ", when(item.updated_at))),
    channels ? rankChips(item, channels) : null);
}

function pager(params, offset, limit, hasMore) {
  const go = (to) => {
    const next = new URLSearchParams(params);
    if (to > 0) next.set("offset", String(to));
    else next.delete("offset");
    location.hash = `#search?${next}`;
  };
  return [
    el("button", { text: "← Previous", attrs: { type: "button", disabled: offset <= 0 },
      on: { click: () => go(Math.max(0, offset - limit)) } }),
    el("button", { text: "Next →", attrs: { type: "button", disabled: !hasMore },
      on: { click: () => go(offset + limit) } }),
  ];
}

/** The line above the results: which ones these are, and why there are no more. Strings and
    nodes: the query is isolated in its own direction (userText). */
function searchSummary(q, offset, shown, data) {
  const quoted = ["“", userText(preview(q, 80)), "”"];
  if (q && !shown) return ["No results for ", quoted, "."];
  const range = shown ? `${num(offset + 1)}–${num(offset + shown)}` : "none";
  if (!q) return `Newest-updated memories: ${range} of ${num(data.total)}.`;
  const capped = offset + shown >= SEARCH_CAP
    ? ` Recall returns at most the ${SEARCH_CAP} best: refine the query or the filters, or `
      + "clear the query to page through every memory, newest first." : "";
  return [`Results ${range} for `, quoted, ", best first: each shows its fused score and its "
    + `rank in every channel (– where a channel did not find it).${capped}`];
}

async function renderSearch(params, ticket) {
  const q = (params.get("q") || "").trim();
  const limit = Number(pageSize(params));
  const offset = Math.max(0, Number.parseInt(params.get("offset") || "0", 10) || 0);
  const query = new URLSearchParams({ limit: String(limit), offset: String(offset) });
  fillForm(params); // the address's search, also when it is refused
  for (const [name, value] of Object.entries(chosenFilters(params))) query.set(name, value);
  if (params.get("since")) query.set("since", localDayStart(params.get("since")));
  if (q) query.set("q", q);
  // The filters' choices are fetched afresh beside the list (agents add projects, kinds and
  // sources meanwhile; /api/stats takes some 20 ms at 50,000 memories).
  state.stats = null;
  const listing = api(`${q ? "/api/search" : "/api/memories"}?${query}`);
  listing.catch(() => {}); // awaited below, unless the stats fail first
  const stats = await loadStats();
  if (ticket !== state.ticket) return;
  refreshFilters(stats);
  const data = await listing;
  if (ticket !== state.ticket) return;
  state.listHash = location.hash || "#search";
  const shown = data.items.length;
  // A live region (role=status): a screen reader says what a search or a page found.
  $("search-summary").replaceChildren(...[searchSummary(q, offset, shown, data)].flat(2)
    .map((part) => (part instanceof Node ? part : displayText(part))));
  const items = data.items.map((item) => resultItem(item, q ? data.channels : null));
  if (!items.length) items.push(el("li", { cls: "empty", text: "Nothing found." }));
  $("search-results").replaceChildren(...items);
  const hasMore = q ? data.has_more : offset + shown < data.total;
  $("search-pager").replaceChildren(...pager(params, offset, limit, hasMore));
}

// --- one memory -----------------------------------------------------------------------------

function injectionsTable(target, rows, withMemories) {
  const head = el("tr", {}, ["When", "Harness", "Hook", "Project", "Query",
    withMemories ? "Memories" : null, "Chars"].filter(Boolean).map((h) => el("th", {
    text: h, attrs: { scope: "col" } })));
  const body = rows.map((row) => el("tr", {},
    el("td", {}, when(row.ts)),
    el("td", { cls: "text", text: labelOf(row.harness), attrs: AUTO_DIR }),
    el("td", { cls: "text", text: labelOf(row.hook), attrs: AUTO_DIR }),
    el("td", { cls: "text", text: labelOf(row.project), attrs: AUTO_DIR }),
    el("td", { cls: "query", text: preview(row.query, 120) || "—", attrs: AUTO_DIR }),
    withMemories ? el("td", { cls: "uids" }, row.uids.map((uid) =>
      el("a", { text: uid.slice(0, 8), attrs: { href: memoryHref(uid), title: uid } }))) : null,
    el("td", { cls: "number", text: num(row.chars) })));
  if (!body.length) {
    body.push(el("tr", {}, el("td", { cls: "empty", text: "No injection recorded.",
      attrs: { colspan: head.children.length } })));
  }
  $(target).replaceChildren(el("thead", {}, head), el("tbody", {}, body));
}

/** Bind the memory view's buttons to `memory`; null disables them (nothing shown to act on). */
function memoryActions(memory) {
  keepDraft(); // the editor of the memory shown before closes: what was typed in it stays
  closeEditor();
  for (const id of ["edit-button", "forget-button"]) $(id).disabled = !memory;
  $("edit-button").onclick = memory && (() => openEditor(memory));
  $("edit-form").onsubmit = (event) => {
    event.preventDefault();
    if (memory) busy($("edit-save"), () => saveEdit(memory));
  };
  $("forget-button").onclick = memory && (() => forget(memory, $("forget-button")));
}

async function renderMemory(uid, ticket) {
  if (uid !== state.memoryUid) clearView("memory"); // another memory's buttons stay off meanwhile
  const path = `/api/memories/${encodeURIComponent(uid)}`;
  // The memory's own error (a forgotten one says so) is the one to show, whichever fails first.
  const [memory, injections] = await Promise.all([api(path),
    api(`${path}/injections?limit=100`).catch((err) => err)]);
  if (injections instanceof Error) throw injections;
  if (ticket !== state.ticket) return;
  $("memory-back").setAttribute("href", state.listHash);
  $("memory-title").textContent = displayText(`Memory ${memory.uid}`);
  $("memory-content").textContent = displayText(memory.content);
  const meta = [["uid", memory.uid], ["kind", memory.kind], ["source", memory.source],
    ["project", labelOf(memory.project)], ["tags", (memory.tags || []).join(", ") || "—"]];
  if (memory.session) meta.push(["session", `${memory.session} (#${memory.seq ?? "?"})`]);
  $("memory-meta").replaceChildren(
    ...meta.flatMap(([key, value]) => [el("dt", { text: key }),
      el("dd", { text: value, attrs: AUTO_DIR })]),
    el("dt", { text: "created" }), el("dd", {}, when(memory.created_at)),
    el("dt", { text: "updated" }), el("dd", {}, when(memory.updated_at)),
    ...supersession(memory));
  $("memory-injections-title").textContent = injections.total === 1
    ? "Injected once" : `Injected ${num(injections.total)} times`;
  injectionsTable("memory-injections", injections.items, false);
  renderRevisions(memory.revisions || []);
  memoryActions(memory);
  state.memoryUid = memory.uid;
  if (drafts.has(memory.uid)) reopenDraft(memory, drafts.get(memory.uid));
  return memory;
}

/** The memory view again (after an edit, an undo): the memory as stored now, or why not. */
async function showMemory(uid) {
  try {
    return await renderMemory(uid, state.ticket);
  } catch (err) {
    if (!(err instanceof AuthNeeded)) failView("memory", err);
    return null;
  }
}

/** "superseded by" (a link and an Undo button) and "supersedes" (links) rows, when any. */
function supersession(memory) {
  const link = (uid) => el("a", { text: uid, attrs: { href: memoryHref(uid) } });
  const rows = [];
  if (memory.superseded_by) {
    rows.push(el("dt", { text: "superseded by" }), el("dd", { cls: "superseded" },
      link(memory.superseded_by), " ",
      actionButton("Undo", () => unsupersede(memory), { cls: "link", attrs: {
        id: "unsupersede-button", title: "Make this memory current again" } })));
  }
  if ((memory.supersedes || []).length) {
    rows.push(el("dt", { text: "supersedes" }),
      el("dd", {}, memory.supersedes.flatMap((uid, i) => (i ? [", ", link(uid)] : [link(uid)]))));
  }
  return rows;
}

async function unsupersede(memory) {
  try {
    await api(`/api/memories/${encodeURIComponent(memory.uid)}/unsupersede`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
  } catch (err) {
    if (!(err instanceof AuthNeeded)) notify(err.message, "error");
    return;
  }
  if (await showMemory(memory.uid)) notify("Current again: recall returns it.", "ok");
}

/** The versions edits replaced, newest first: when each was replaced, and what it said. */
function renderRevisions(revisions) {
  $("memory-revisions-title").textContent = revisions.length
    ? `Earlier versions (${num(revisions.length)})` : "Earlier versions";
  const items = revisions.map((rev) => el("li", { cls: "revision" },
    el("p", { cls: "meta" }, "replaced ", when(rev.replaced_at), " · written ",
      when(rev.updated_at),
      metaTags(rev, false)),
    el("pre", { cls: "content", text: rev.content, attrs: AUTO_DIR })));
  if (!items.length) items.push(el("li", { cls: "empty", text: "None: never edited." }));
  $("memory-revisions").replaceChildren(...items);
}

function closeEditor() {
  state.editing = null;
  $("edit-form").hidden = true;
  $("edit-button").setAttribute("aria-expanded", "false");
  showEditError("");
}

/** Cancel: the editor closes and what was typed in it goes. */
function discardEdit() {
  if (state.editing) drafts.delete(state.editing.uid);
  closeEditor();
}

/** After Save or Cancel the focus goes back to Edit…, if it was in the form (or dropped from it
    to the page by the disabled Save): a hidden form cannot hold it, and the next Tab would
    start wherever the browser chose. A focus the user moved elsewhere meanwhile stays. */
function focusEditButton() {
  const active = document.activeElement;
  if (!active || active === document.body || $("edit-form").contains(active)) {
    $("edit-button").focus();
  }
}

function cancelEdit() {
  discardEdit();
  focusEditButton();
}

/** The edit form's error line ("" hides it), with a button when `action` ({label, run}). */
function showEditError(message, action = null) {
  const box = $("edit-error");
  box.replaceChildren(...[el("span", { text: message }),
    action && actionButton(action.label, action.run)].filter(Boolean));
  box.hidden = !message;
}

const EDIT_FIELDS = ["content", "kind", "project", "tags"];
/** The tags as the form shows them; a tag may hold a comma or spaces, so what the user did not
    touch is never parsed back (editBody). */
const tagsText = (memory) => (memory.tags || []).join(", ");

function openEditor(memory) {
  $("edit-content").value = memory.content;
  $("edit-kind").value = memory.kind;
  $("edit-project").value = memory.project || "";
  $("edit-tags").value = tagsText(memory);
  showEditError("");
  $("edit-form").hidden = false;
  $("edit-button").setAttribute("aria-expanded", "true");
  $("edit-cancel").onclick = cancelEdit;
  $("edit-content").focus();
  state.editing = memory;
}

const typedFields = () => EDIT_FIELDS.map((name) => $(`edit-${name}`).value);

/** Unsaved edits by uid, {typed, version}: an open editor whose text differs from its memory
    is kept when a navigation closes it (another view, another memory, the back button), and
    the memory's view opens it again. Cancel and Save drop it. Only in this tab's memory: a
    reload or a close of the tab asks first (warnOfUnsavedEdits). */
const drafts = new Map();

/** Keep what the open editor holds, if it changed anything. */
function keepDraft() {
  const memory = state.editing;
  if (!memory) return;
  if (editorChanged()) drafts.set(memory.uid, { typed: typedFields(), version: memory.version });
  else drafts.delete(memory.uid);
}

/** The editor again, holding the draft. A Save edits the version shown: where that is not
    the one the draft was typed over, the notice says so. */
function reopenDraft(memory, draft) {
  openEditor(memory);
  EDIT_FIELDS.forEach((name, i) => { $(`edit-${name}`).value = draft.typed[i]; });
  notify(draft.version === memory.version
    ? "Your unsaved edit is back in the form: Save it, or Cancel to drop it."
    : "Above: the version stored now. The form keeps your text: Save replaces that version "
      + "with it.");
}

const editorChanged = () => Boolean(state.editing
  && Object.keys(editBody(state.editing)).length);

/** A reload or a close of the tab would lose the unsaved edits: the browser asks first. */
function warnOfUnsavedEdits(event) {
  if (!drafts.size && !editorChanged()) return;
  event.preventDefault();
  event.returnValue = ""; // what older browsers look for
}

/** The fields the form changed, as PATCH /api/memories/{uid} takes them. */
function editBody(memory) {
  const body = {};
  const content = $("edit-content").value;
  if (content !== memory.content) body.content = content;
  const kind = $("edit-kind").value.trim();
  if (kind !== memory.kind) body.kind = kind;
  const project = $("edit-project").value.trim();
  if (project !== (memory.project || "")) body.project = project; // "": no project
  const tags = $("edit-tags").value;
  if (tags !== tagsText(memory)) {
    body.tags = [...new Set(tags.split(",").map((t) => t.trim()).filter(Boolean))];
  }
  return body;
}

async function saveEdit(memory) {
  const body = editBody(memory);
  if (!Object.keys(body).length) {
    cancelEdit();
    notify("Nothing changed.");
    return;
  }
  let saved;
  try {
    // if_version: refused (409) when the memory changed since this page loaded it (the CLI,
    // an agent, another tab), rather than overwriting that change.
    saved = await api(`/api/memories/${encodeURIComponent(memory.uid)}`, {
      method: "PATCH", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...body, if_version: memory.version }) });
  } catch (err) {
    if (err instanceof AuthNeeded) return;
    const stale = err instanceof Refused && err.body.field === "if_version";
    showEditError(`Not saved: ${err.message}`, stale
      ? { label: "Load the newer version", run: () => reloadKeepingEdits(memory.uid) } : null);
    return;
  }
  state.stats = null; // kinds or projects may have changed
  discardEdit(); // saved: nothing of it is left to keep
  const shown = await showMemory(memory.uid);
  focusEditButton();
  if (!shown) return;
  notify(saved.status === "unchanged" ? "Nothing changed."
    : ["Saved: ", userText(preview(saved.content, 60))], "ok");
}

/** Show the memory as stored now, with the editor still holding what the user typed (its
    draft, reopenDraft): they compare, merge or copy it, and a Save then edits the version they
    see. */
async function reloadKeepingEdits(uid) {
  keepDraft();
  await showMemory(uid);
}

const plural = (n, one, many) => `${num(n)} ${n === 1 ? one : many}`;

/** What forgetting `memory` also changes: the older memories it supersedes are current again
    (recall returns them), as DELETE /api/memories/{uid} then reports in `current_again`. */
function forgetWarning(memory) {
  const older = memory.supersedes || [];
  if (!older.length) return "";
  const shown = older.slice(0, 3).join(", ") + (older.length > 3 ? ", …" : "");
  const them = older.length === 1 ? "it" : "them";
  return `It supersedes ${plural(older.length, "older memory", "older memories")} (${shown}). `
    + `Forgetting it makes ${them} current again: recall returns ${them}. Undo brings this `
    + `memory back but leaves ${them} current.`;
}

/** Ask, then forget `memory`; `button` (Forget…) is disabled while the request is under way,
    not while the question is open, so the focus can go back to it on Cancel. */
async function forget(memory, button) {
  const yes = await confirmAction("Forget this memory?", preview(memory.content, 200), "Forget",
    forgetWarning(memory));
  if (!yes) return;
  let answer;
  try {
    answer = await busy(button, () => api(`/api/memories/${encodeURIComponent(memory.uid)}`,
      { method: "DELETE" }));
  } catch (err) {
    if (!(err instanceof AuthNeeded)) notify(err.message, "error");
    return;
  }
  discardEdit(); // nothing left to edit
  state.stats = null;
  const current = answer.current_again || [];
  state.nextNotice = {
    message: ["Forgotten: ", userText(preview(memory.content, 60)),
      current.length ? ` · ${plural(current.length, "older version is", "older versions are")}`
        + " current again." : ""],
    action: { label: "Undo", run: () => unforget(memory.uid, memory.content) },
  };
  location.hash = state.listHash;
}

/** Take a forget back (POST /api/memories/{uid}/unforget), then show the view again with it. */
async function unforget(uid, content) {
  try {
    await api(`/api/memories/${encodeURIComponent(uid)}/unforget`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
  } catch (err) {
    if (!(err instanceof AuthNeeded)) notify(`Not restored: ${err.message}`, "error");
    return;
  }
  state.stats = null; // the counts changed
  await route();
  notify(["Restored: ", userText(preview(content, 60))], "ok",
    { label: "Open it", href: memoryHref(uid) });
}

// --- forgotten memories ---------------------------------------------------------------------

/** When a service start purges what was forgotten: MEMORY_FORGET_GRACE_DAYS after the forget,
    or never (MEMORY_MAINTENANCE_ON_START off). A purge by hand removes them all sooner. */
function graceText(days) {
  const byHand = "A purge (memory-mcp purge, or Purge… in the overview where the service has a "
    + "token) removes every one at once.";
  if (days === null || days === undefined) {
    return "A forgotten memory stays until a purge by hand (MEMORY_MAINTENANCE_ON_START is off): "
      + `${byHand} Until then, Restore brings it back.`;
  }
  return `A service start purges a forgotten memory ${plural(days, "day", "days")} after its `
    + `forget (MEMORY_FORGET_GRACE_DAYS). ${byHand} Until then, Restore brings it back.`;
}

function forgottenItem(memory) {
  return el("li", { cls: "hit" },
    el("p", { cls: "hit-text", text: preview(memory.content) || "(empty)", attrs: AUTO_DIR }),
    el("p", { cls: "meta" }, metaTags(memory, false),
      el("span", { cls: "updated" }, "forgotten ", when(memory.forgotten_at)),
      el("span", { cls: "updated" }, memory.purged_after
        ? ["purged after ", when(memory.purged_after)] : "kept until a purge")),
    el("div", { cls: "actions" },
      actionButton("Restore", () => unforget(memory.uid, memory.content),
        { cls: null, attrs: { title: `Restore ${memory.uid}` } })));
}

async function renderForgotten(ticket) {
  const data = await api("/api/forgotten?limit=100");
  if (ticket !== state.ticket) return;
  $("forgotten-summary").textContent = graceText(data.grace_days);
  const items = data.items.map(forgottenItem);
  if (!items.length) {
    items.push(el("li", { cls: "empty", text: "Nothing forgotten awaits a purge." }));
  }
  $("forgotten-list").replaceChildren(...items);
  $("forgotten-more").hidden = !data.has_more;
}

// --- telemetry ------------------------------------------------------------------------------

/** Bars of injections per day. Drawn `width` units wide for a box that many pixels wide, so that
    its labels keep their size on a narrow window. */
function perDayChart(days, width) {
  const height = 170;
  const pad = { left: 34, right: 6, top: 10, bottom: 24 };
  const plot = height - pad.top - pad.bottom;
  const max = Math.max(1, ...days.map((d) => d.count));
  const total = days.reduce((sum, d) => sum + d.count, 0);
  const step = (width - pad.left - pad.right) / Math.max(1, days.length);
  const bars = days.map((day, i) => {
    const h = (day.count / max) * plot;
    const tip = `${day.day}: ${num(day.count)} injections, ${num(day.chars)} characters`;
    return svgEl("rect", {
      cls: day.count ? "bar" : "bar zero",
      attrs: {
        x: (pad.left + i * step + 1).toFixed(1),
        y: (pad.top + plot - h).toFixed(1),
        width: Math.max(1, step - 2).toFixed(1),
        height: Math.max(day.count ? 1 : 0.5, h).toFixed(1), // an empty day: a hairline
      },
    }, svgEl("title", {}, tip));
  });
  const label = (x, y, text, anchor) => svgEl("text", { cls: "axis", text,
    attrs: { x, y, "text-anchor": anchor } });
  const first = days.length ? days[0].day : "";
  const last = days.length ? days[days.length - 1].day : "";
  return svgEl("svg", {
    cls: "chart",
    attrs: { viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `Injections per day from ${first} to ${last}: ${total} in all, `
        + `at most ${max} a day` },
  },
  svgEl("line", { cls: "baseline", attrs: { x1: pad.left, x2: width - pad.right,
    y1: pad.top + plot, y2: pad.top + plot } }),
  label(pad.left - 4, pad.top + 8, String(max), "end"),
  label(pad.left - 4, pad.top + plot, "0", "end"),
  label(pad.left, height - 6, first, "start"),
  label(width - pad.right, height - 6, `${last} (UTC)`, "end"),
  bars);
}

function splitTable(target, counts, total, heading) {
  const rows = Object.entries(counts || {}).map(([name, count]) => el("tr", {},
    el("th", { cls: "text", text: labelOf(name), attrs: { scope: "row", ...AUTO_DIR } }),
    el("td", { cls: "number", text: num(count) }),
    el("td", {}, el("meter", { attrs: { min: 0, max: Math.max(1, total), value: count,
      "aria-label": `${labelOf(name)}: ${count} of ${total}` } }))));
  if (!rows.length) rows.push(el("tr", {}, el("td", { cls: "empty", text: "None yet." })));
  $(target).replaceChildren(
    el("thead", {}, el("tr", {}, ["", "Injections", "Share"].map((h, i) =>
      el("th", { text: i ? h : heading, attrs: { scope: "col" } })))),
    el("tbody", {}, rows));
}

async function renderTelemetry(ticket) {
  const data = await api("/api/injections?limit=20");
  if (ticket !== state.ticket) return;
  const s = data.summary;
  $("telemetry-cards").replaceChildren(
    card("Injections", num(s.total)),
    card("Last 7 days", num(s.last_7_days)),
    card("Characters", num(s.chars), tokens(s.chars)),
    card("Characters, 7 days", num(s.last_7_days_chars), tokens(s.last_7_days_chars)),
  );
  const box = $("telemetry-chart");
  box.replaceChildren(perDayChart(s.per_day || [], Math.max(320, box.clientWidth || 800)));
  splitTable("telemetry-harness", s.by_harness, s.total, "Harness");
  splitTable("telemetry-hook", s.by_hook, s.total, "Hook");
  const top = (s.top_memories || []).map((m) => el("li", {},
    m.content === null
      ? el("span", { cls: "muted", text: `${m.uid} (deleted)` })
      : el("a", { text: preview(m.content, 160) || m.uid,
        attrs: { href: memoryHref(m.uid), ...AUTO_DIR } }),
    el("span", { cls: "count", text: `${num(m.injections)}×` })));
  if (!top.length) top.push(el("li", { cls: "empty", text: "Nothing injected yet." }));
  $("telemetry-top").replaceChildren(...top);
  injectionsTable("telemetry-latest", data.items, true);
}

// --- routing --------------------------------------------------------------------------------

/** What each view fills from the service: emptied when its data cannot be had. */
const VIEW_PARTS = {
  overview: ["overview-cards", "overview-channels", "overview-kinds", "overview-sources",
    "overview-projects", "maintenance-report"],
  search: ["search-summary", "search-results", "search-pager"],
  memory: ["memory-content", "memory-meta", "memory-revisions", "memory-injections"],
  forgotten: ["forgotten-summary", "forgotten-list"],
  telemetry: ["telemetry-cards", "telemetry-chart", "telemetry-harness", "telemetry-hook",
    "telemetry-top", "telemetry-latest"],
};

/** A view that failed to load shows nothing of the view before it, and no button of it acts
    on what is no longer shown (a memory's Edit… and Forget… would act on the previous one). */
function clearView(view) {
  for (const id of VIEW_PARTS[view] || []) $(id).replaceChildren();
  if (view === "overview") $("maintenance").hidden = true;
  if (view === "forgotten") $("forgotten-more").hidden = true;
  if (view === "memory") {
    $("memory-title").textContent = "Memory";
    $("memory-revisions-title").textContent = "Earlier versions";
    $("memory-injections-title").textContent = "Injections";
    memoryActions(null);
    state.memoryUid = null;
  }
}

/** Say why `view` could not load, over an empty view; a forgotten memory links to the view
    that can bring it back. */
function failView(view, err) {
  clearView(view);
  const forgotten = err instanceof Refused && err.body.forgotten;
  notify(err.message, "error", forgotten ? { label: "Open the Forgotten view",
    href: "#forgotten" } : null);
}

function parseHash() {
  const raw = location.hash.slice(1);
  const cut = raw.indexOf("?");
  const path = cut < 0 ? raw : raw.slice(0, cut);
  const params = new URLSearchParams(cut < 0 ? "" : raw.slice(cut + 1));
  if (path.startsWith("memory/")) {
    try {
      return { view: "memory", uid: decodeURIComponent(path.slice("memory/".length)) };
    } catch {
      return { view: "overview", params };
    }
  }
  return { view: ["search", "forgotten", "telemetry"].includes(path) ? path : "overview",
    params };
}

async function route() {
  const ticket = ++state.ticket;
  if (needsToken() && !token()) {
    showTokenView("");
    return;
  }
  const where = parseHash();
  showView(where.view);
  renderAuthStatus();
  try {
    if (where.view === "overview") await renderOverview(ticket);
    else if (where.view === "search") await renderSearch(where.params, ticket);
    else if (where.view === "memory") await renderMemory(where.uid, ticket);
    else if (where.view === "forgotten") await renderForgotten(ticket);
    else await renderTelemetry(ticket);
  } catch (err) {
    if (!(err instanceof AuthNeeded) && ticket === state.ticket) failView(where.view, err);
    return;
  }
  if (ticket === state.ticket) {
    // Keyboard and screen-reader users land on the new view's heading.
    $(`${where.view}-title`).focus({ preventScroll: true });
  }
}

/** Go to the view the address names: the notice of the view left behind goes (or the one
    queued for the next view shows), then the view loads. */
function navigate() {
  const next = state.nextNotice;
  state.nextNotice = null;
  notify(next ? next.message : "", "ok", next && next.action);
  route();
}

/** A link to the address already shown (a view's own tab, "Back to the list") changes no
    hash, so no hashchange loads the view: load it again here, as Search and Clear do. Without
    this a view that failed to load (the service was stopped) kept its error once the service
    was back, and one that loaded kept its old numbers. */
function reloadOnSameAddress(event) {
  const link = event.target instanceof Element ? event.target.closest("a[href^='#']") : null;
  if (!link || event.defaultPrevented || event.button !== 0 || event.ctrlKey || event.metaKey
      || event.shiftKey || event.altKey || link.href !== location.href) return;
  event.preventDefault();
  navigate();
}

async function start() {
  $("token-form").addEventListener("submit", submitToken);
  $("search-form").addEventListener("submit", submitSearch);
  $("search-reset").addEventListener("click", () => {
    if (location.hash === "#search") navigate(); // no hashchange to wait for
    else location.hash = "#search";
  });
  document.addEventListener("click", reloadOnSameAddress);
  window.addEventListener("beforeunload", warnOfUnsavedEdits);
  for (const kind of ["purge", "backfill"]) {
    const button = $(`${kind}-button`);
    button.addEventListener("click", () => runMaintenance(kind, button));
  }
  $("confirm-ok").addEventListener("click", () => answerQuestion?.(true));
  $("confirm-cancel").addEventListener("click", () => answerQuestion?.(false));
  $("confirm-dialog").addEventListener("close", closedDialog);
  window.addEventListener("hashchange", navigate);
  try {
    state.health = await api("/health");
    $("version").textContent = `v${state.health.version}`;
  } catch (err) {
    notify(err.message, "error");
    return;
  }
  await route();
}

start();
