/**
 * Test support: a real `memory-mcp` service on 127.0.0.1 (port 0, a temp db), plain HTTP
 * calls to it, and servers that fail in the ways a service can (refusing, hanging).
 *
 * The service is the workspace's own: MEMORY_MCP_BIN if set, else `../.venv/bin/memory-mcp`
 * (what `uv sync --all-packages` creates at the repository root), else `memory-mcp` on PATH.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before } from "node:test";

import { MemoryPlugin } from "../src/memory.js";
import type { MessagePart, SessionMessage } from "../src/messages.js";
import { loadSettings, type Settings } from "../src/settings.js";

/** opencode-plugin/ (the tests run from build/test/). */
export const PACKAGE_ROOT = fileURLToPath(new URL("../..", import.meta.url));

export function memoryMcpBin(): string {
  if (process.env["MEMORY_MCP_BIN"]) return process.env["MEMORY_MCP_BIN"];
  const venv = resolve(PACKAGE_ROOT, "..", ".venv", "bin", "memory-mcp");
  return existsSync(venv) ? venv : "memory-mcp";
}

/** The environment without the caller's MEMORY_* (a developer's shell must not leak in). */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("MEMORY_") && value !== undefined) env[key] = value;
  }
  return { ...env, ...extra };
}

export function tempDir(prefix = "sm-opencode-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface Service {
  url: string;
  pid: number;
  dir: string;
  stop(): Promise<void>;
}

/** Spawns `memory-mcp` on port 0 with a db in a temp folder; resolves once it listens. */
export function startService(dir = tempDir()): Promise<Service> {
  const child: ChildProcess = spawn(memoryMcpBin(), [], {
    env: cleanEnv({ MEMORY_DB_PATH: join(dir, "memory.db"), MEMORY_PORT: "0", MEMORY_DEVICE: "cpu" }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolvePromise, reject) => {
    let seen = "";
    const timer = setTimeout(() => {
      child.kill();
      reject(new Error(`memory-mcp did not start: ${stderr.slice(-2000)}`));
    }, 30_000);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.stdout?.on("data", (chunk: Buffer) => {
      seen += chunk.toString();
      const line = seen.split("\n").find((l) => l.startsWith("MEMORY_MCP_LISTENING "));
      if (!line) return;
      clearTimeout(timer);
      const info = JSON.parse(line.slice("MEMORY_MCP_LISTENING ".length)) as { url: string };
      resolvePromise({
        url: info.url,
        pid: child.pid as number,
        dir,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once("exit", () => done());
            child.kill("SIGTERM");
          }),
      });
    });
  });
}

/**
 * A real service for the enclosing `describe`: started before its tests, stopped and its folder
 * removed after. Its fields are there once `before` has run (in the tests, not in the describe).
 */
export function suiteService(): Service {
  const service = {} as Service;
  before(async () => {
    Object.assign(service, await startService());
  });
  after(async () => {
    await service.stop();
    removeDir(service.dir);
  });
  return service;
}

/**
 * A plugin as opencode loads it in `cwd`, told `url` for the service and `dir` for its db
 * folder (where its hook log and spool go); `env` and `options` add to those settings.
 */
export function pluginFor(
  url: string,
  dir: string,
  options: Record<string, unknown> = {},
  env: Record<string, string> = {},
  cwd = "/src/web",
): MemoryPlugin {
  const settings = settingsFor({ MEMORY_PLUGIN_URL: url, MEMORY_DB_PATH: join(dir, "memory.db"), ...env }, options);
  return new MemoryPlugin(settings, cwd, [], () => undefined);
}

/**
 * A user prompt as opencode hands it to the plugin: `chat.message`, then the messages transform
 * before the agent's first model call, with `earlier` (the session's messages before it). The
 * transform decides a "remember …": only then are the spans earlier messages left open known.
 */
export async function prompt(
  plugin: MemoryPlugin,
  sessionID: string,
  parts: MessagePart[],
  earlier: SessionMessage[] = [],
): Promise<void> {
  await plugin.chatMessage(sessionID, parts);
  const id = parts[0]?.messageID ?? `msg_${randomUUID()}`;
  const info = { id, sessionID, role: "user", time: { created: Date.now() } };
  await plugin.messagesTransform([...earlier, { info, parts } as unknown as SessionMessage]);
}

/** A JSON call to the service (the tests' own client, independent of the plugin's). */
export async function call(url: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(url + path, {
    method,
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

export async function store(url: string, content: string, project: string): Promise<string> {
  return (await call(url, "POST", "/ingest", { content, project })).uid as string;
}

export async function memories(url: string, source: string): Promise<any[]> {
  return (await call(url, "GET", `/api/memories?source=${encodeURIComponent(source)}&limit=100`)).items;
}

/** Settings as the plugin would read them from this environment and these options. */
export function settingsFor(env: Record<string, string>, options: Record<string, unknown> = {}): Settings {
  return loadSettings(env, options).settings;
}

export function hookLog(dir: string): Record<string, any>[] {
  const path = join(dir, "hooks.jsonl");
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, any>);
}

/** A port nothing listens on (bound, then closed). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

/** A server that accepts connections and never answers (a hung service). */
export async function hangingServer(): Promise<{ url: string; connections(): number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on("error", () => undefined);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => connections,
    close: () =>
      new Promise<void>((done) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => done());
      }),
  };
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

export interface FakeService {
  url: string;
  /** "METHOD /path" of each request, in arrival order. */
  requests: string[];
  close(): Promise<void>;
}

/**
 * A stand-in for the service whose routes ("METHOD /path") answer their JSON at once, or never
 * ("hang"): as the service answers while a long writer (a purge, an import) holds the store's
 * write lock, reads and `HEAD /` at once, writes not in time. Any other route: a 404.
 */
export async function fakeService(routes: Record<string, Record<string, unknown> | "hang">): Promise<FakeService> {
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = http.createServer((req, res) => {
    const route = `${req.method} ${req.url}`;
    requests.push(route);
    req.resume();
    const answer = routes[route];
    if (answer === "hang") return;
    res.writeHead(answer === undefined ? 404 : 200, { "Content-Type": "application/json" });
    res.end(req.method === "HEAD" ? undefined : JSON.stringify(answer ?? { error: "no such route" }));
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((done) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => done());
      }),
  };
}
