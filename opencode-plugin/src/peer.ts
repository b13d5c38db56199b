/**
 * Whose process holds the other end of a loopback TCP connection (peer.py): on a machine
 * several people use, the plugin never hands its writes, prompts or token to another user's
 * process on the service's port. Linux lists every TCP socket with its owner's uid in
 * /proc/net/tcp and /proc/net/tcp6 (Node has no netlink, which peer.py asks instead); elsewhere,
 * or for an address that is not loopback, the owner is unknown (null) and nothing changes.
 */

import { readFileSync } from "node:fs";
import { isIPv4 } from "node:net";
import { endianness } from "node:os";

/** uid 0 reads every user's files anyway: a root-run service is an administrator's. */
const ROOT = 0;

export interface Endpoint {
  address: string;
  port: number;
}

/** Whether a peer owned by `uid` may be talked to: this user, root, or unknown. */
export function trusted(uid: number | null): boolean {
  if (uid === null || typeof process.getuid !== "function") return true;
  return uid === process.getuid() || uid === ROOT;
}

/**
 * The uid owning the TCP socket whose own address is `own` and whose remote one is `remote`;
 * null when either is not loopback or no such socket is listed.
 */
export function owner(own: Endpoint, remote: Endpoint): number | null {
  const [mine, theirs] = [plain(own.address), plain(remote.address)];
  if (!loopback(mine) || !loopback(theirs)) return null;
  const wanted = new Set([`${entry(mine, own.port)} ${entry(theirs, remote.port)}`]);
  if (isIPv4(mine) && isIPv4(theirs)) {
    // a dual-stack socket lists an IPv4 connection as mapped IPv6
    wanted.add(`${entry(mine, own.port, true)} ${entry(theirs, remote.port, true)}`);
  }
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "ascii");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length > 7 && wanted.has(`${fields[1]} ${fields[2]}`)) return Number(fields[7]);
    }
  }
  return null;
}

function plain(address: string): string {
  const host = address.split("%")[0] ?? "";
  return host.startsWith("::ffff:") && host.includes(".") ? host.slice(7) : host;
}

function loopback(host: string): boolean {
  return host.startsWith("127.") || host === "::1";
}

/** `host:port` as the kernel's tables write it: 32-bit words in host byte order, in hex. */
function entry(host: string, port: number, mapped = false): string {
  let bytes: number[];
  if (isIPv4(host)) {
    bytes = host.split(".").map(Number);
    if (mapped) bytes = [...new Array(10).fill(0), 0xff, 0xff, ...bytes];
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

function ipv6Bytes(host: string): number[] {
  const [head = "", tail = ""] = host.split("::");
  const groups = (part: string): number[] => (part ? part.split(":").map((g) => parseInt(g, 16)) : []);
  const [front, back] = [groups(head), host.includes("::") ? groups(tail) : []];
  const all = [...front, ...new Array(8 - front.length - back.length).fill(0), ...back];
  return all.flatMap((group) => [group >> 8, group & 0xff]);
}
