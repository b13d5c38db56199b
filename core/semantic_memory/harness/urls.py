"""A service URL read without urllib (its import would cost a hook ~5 ms): shared by the
settings' check and the client, which imports the settings."""

from __future__ import annotations


class ServiceURL(tuple):  # a NamedTuple without importing typing
    """(scheme, host, port, path) of a service URL."""

    __slots__ = ()

    def __new__(cls, scheme: str, host: str, port: int, path: str) -> ServiceURL:
        return tuple.__new__(cls, (scheme, host, port, path))

    scheme = property(lambda self: self[0])
    host = property(lambda self: self[1])
    port = property(lambda self: self[2])
    path = property(lambda self: self[3])

    def __repr__(self) -> str:
        return "ServiceURL(scheme={!r}, host={!r}, port={!r}, path={!r})".format(*self)

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def split_url(url: str) -> ServiceURL:
    """scheme://[user@]host[:port][/path] of an http(s) service URL; ValueError otherwise.
    (urllib.parse would cost a hook ~5 ms of imports for these few lines.)"""
    scheme, sep, rest = url.strip().partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {url!r}")
    netloc, slash, path = rest.partition("/")
    netloc = netloc.rsplit("@", 1)[-1]
    if netloc.startswith("["):  # [::1]:8765
        host, _, port = netloc[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = netloc.partition(":")
    if not host or (port and not port.isdigit()):
        raise ValueError(f"not an http(s) URL: {url!r}")
    default = 443 if scheme == "https" else 80
    return ServiceURL(scheme, host.lower(), int(port) if port else default, slash + path)
