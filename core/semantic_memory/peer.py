"""Whose process holds the other end of a loopback TCP connection, so that on a machine several
people use, one user's hooks never hand their writes (or their token) to another user's
service, nor inject another user's memories, and a service never serves another user.

A connection over loopback is two sockets on this machine, and Linux tells any process the uid
that owns a socket: the sock_diag netlink interface looks one socket up by its addresses and
ports (about 20 µs; reading `/proc/net/tcp` instead took 3-5 ms, growing with every socket on
the machine). Elsewhere (macOS, Windows, a sandbox without netlink, an address that is not
loopback) the owner is unknown: None, and callers go on as before. Standard library C modules
only: hook processes import it.
"""

from __future__ import annotations

import os

try:  # the C halves: `socket` and `struct` build enum classes and more as they import (lite)
    import _socket
    import _struct
except ImportError:  # not CPython: the owner is unknown
    _socket = _struct = None  # type: ignore[assignment]

#: uid 0 may read every user's files anyway: a root-run service (docker-proxy, a system unit)
#: is one an administrator set up, not another user's.
ROOT = 0
# <linux/netlink.h>, <linux/sock_diag.h>, <linux/inet_diag.h>
_AF_NETLINK, _NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST = 16, 4, 20, 1
_IPPROTO_TCP, _ALL_STATES, _NO_COOKIE = 6, 0xFFFFFFFF, 0xFFFFFFFF
#: Where `idiag_uid` sits in the answer: the 16-byte netlink header, then inet_diag_msg's
#: family, state, timer and retrans bytes, its 48-byte socket id, expires, rqueue and wqueue.
_UID_AT = 16 + 4 + 48 + 12


def trusted(uid: int | None) -> bool:
    """Whether a peer owned by `uid` may be talked to: this user, root, or unknown."""
    if uid is None or not hasattr(os, "getuid"):  # Windows has no uids
        return True
    return uid in (os.getuid(), ROOT)


def owner(address: tuple[str, int], peer: tuple[str, int]) -> int | None:
    """The uid owning the TCP socket whose own address is `address` and whose remote one is
    `peer` (the other end of our connection from `peer` to `address`); None when either is
    not a loopback address or the kernel does not say."""
    host, other = _plain(address[0]), _plain(peer[0])
    if _socket is None or not (_loopback(host) and _loopback(other)):
        return None
    families = [(_socket.AF_INET6, host, other)] if ":" in host + other else [
        (_socket.AF_INET, host, other),  # and a dual-stack socket sees it as mapped IPv6:
        (_socket.AF_INET6, "::ffff:" + host, "::ffff:" + other)]
    for family, mine, theirs in families:
        try:
            uid = _ask(family, (mine, address[1]), (theirs, peer[1]))
        except OSError:  # no netlink here (not Linux, a sandbox): unknown
            return None
        if uid is not None:
            return uid
    return None


def _ask(family: int, own: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """One SOCK_DIAG_BY_FAMILY request for the exact socket: its uid, None when not found."""
    pack = _struct.pack

    def address(host: str) -> bytes:
        packed = _socket.inet_pton(family, host)
        return packed + bytes(16 - len(packed))

    socket_id = pack("!HH16s16s", own[1], remote[1], address(own[0]), address(remote[0])) \
        + pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
    request = pack("=BBBBI", family, _IPPROTO_TCP, 0, 0, _ALL_STATES) + socket_id
    header = pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
    link = _socket.socket(_AF_NETLINK, _socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
    try:
        link.settimeout(0.1)  # the kernel answers at once; never hold a hook or the loop
        link.send(header + request)
        answer = link.recv(8192)
    finally:
        link.close()
    if len(answer) < _UID_AT + 4 or \
            _struct.unpack_from("=H", answer, 4)[0] != _SOCK_DIAG_BY_FAMILY:
        return None  # NLMSG_ERROR: no such socket
    return int(_struct.unpack_from("=I", answer, _UID_AT)[0])


def _plain(host: str) -> str:
    """An IPv4-mapped IPv6 address as its IPv4 address; a scope id dropped."""
    host = host.split("%", 1)[0]
    return host[7:] if host.startswith("::ffff:") and "." in host else host


def _loopback(host: str) -> bool:
    return host.startswith("127.") or host == "::1"
