"""How a git remote names a project: `host/owner/repo`, so that every clone of one repository
is one project however it was cloned (HTTPS, SSH, an SSH host alias, a `file://` URL or a
plain path) and however a user types it (`--project https://github.com/acme/app.git`).

The hooks (`harness.project`) name a checkout with it and `models.project_name` names what a
user or a harness gives, so both spell a repository alike. Builtins only: a hook has no time
for `re` or pathlib. The opencode plugin's src/project.ts mirrors the hooks' half; tests hold
the two equal.
"""

from __future__ import annotations

#: Hosts whose owner and repository names are case-insensitive: `Acme/App` and `acme/app` are
#: one repository there, so their names are kept in lower case.
CASELESS_HOSTS = ("github.com", "gitlab.com", "bitbucket.org", "dev.azure.com")

#: The hosts' own other names for their SSH service (port 443, through firewalls).
HOST_ALIASES = {"ssh.github.com": "github.com", "altssh.gitlab.com": "gitlab.com",
                "altssh.bitbucket.org": "bitbucket.org"}

#: Azure DevOps' SSH hosts, whose paths are `v3/org/project/repo`.
AZURE_SSH_HOSTS = ("ssh.dev.azure.com", "vs-ssh.visualstudio.com")


def normalise_remote(url: str) -> str:
    """`host/owner/repo`: no scheme, credentials, port or `.git`, so SSH and HTTPS clones of
    one repository agree (git@github.com:Acme/web.git == https://github.com/Acme/web); a
    well-known host alias (`canonical`) named as its host; on a host where names are
    case-insensitive (CASELESS_HOSTS) in lower case, so remotes that differ only in letter
    case agree too (`.GIT` too is `.git` there). Other hosts' paths are kept as written: a
    self-hosted server may tell cases apart. An IPv6-literal host keeps its address whole
    (`[fd00::1]/team/app`): two servers are two projects. A local remote (a path or a
    `file://` URL) is its path without `.git`."""
    url = url.strip()
    path = local_path(url)
    if path is not None:
        return path.rstrip("/").removesuffix(".git").rstrip("/") or path
    if "://" in url:
        rest = url.split("://", 1)[1]
        host, _, path = rest.partition("/")
        host = _without_port(host.rsplit("@", 1)[-1])  # credentials and port go
    else:  # scp-like, as it is not local
        host, path = scp_like(url) or ("", url)
    path = path.strip("/")
    # `.GIT` is `.git` where names are caseless; elsewhere a path is kept as written
    found = canonical(host.lower(), _without_git(path, path.lower()))
    if found is None:
        host, path = host.lower(), _without_git(path, path)
    else:
        host, path = found
    return f"{host}/{path}" if host and path else host or path


def _without_port(host: str) -> str:
    """A URL's host without its `:port`; an IPv6 literal (`[fd00::1]:2222`) whole, brackets
    kept: cut at its first `:` it would name every server of that prefix alike."""
    if host.startswith("[") and "]" in host:
        return host[:host.index("]") + 1]
    return host.split(":", 1)[0]


def _without_git(path: str, folded: str) -> str:
    """`path` without a final `.git` (where `folded`, `path` or its lower case, ends in
    `.git`) and the slashes before it."""
    return (path[:-len(".git")] if folded.endswith(".git") else path).rstrip("/")


def local_path(url: str) -> str | None:
    """The path of a remote on this machine (a path, or a `file://` URL: git reads
    `file:///srv/lib.git` as `/srv/lib.git`), else None (a URL or an scp-like address)."""
    if url.startswith("file://"):
        return url[len("file://"):]
    if "://" in url or scp_like(url) is not None:
        return None
    return url


def canonical(host: str, path: str) -> tuple[str, str] | None:
    """(host, path) of a repository on a well-known host, named as its HTTPS clone is, else
    None. `host` is in lower case. Maps the `~/.ssh/config` alias of a multi-account setup
    (`github.com-work`: the file itself is not read), a host's SSH-over-443 name
    (HOST_ALIASES), and Azure DevOps' three spellings of one repository
    (`dev.azure.com/org/proj/_git/repo`, `ssh.dev.azure.com:v3/org/proj/repo`,
    `org.visualstudio.com/proj/_git/repo`) to `dev.azure.com/org/proj/repo`."""
    host = HOST_ALIASES.get(host, host)
    for known in CASELESS_HOSTS:
        if host.startswith(known + "-"):
            host = known
    parts = path.split("/")
    if host in AZURE_SSH_HOSTS and len(parts) == 4 and parts[0].lower() == "v3":
        host, parts = "dev.azure.com", parts[1:]
    elif host == "dev.azure.com" and len(parts) == 4 and parts[2].lower() == "_git":
        del parts[2]
    elif host.endswith(".visualstudio.com") and host not in AZURE_SSH_HOSTS:
        if parts[0].lower() == "defaultcollection":
            parts = parts[1:]
        if len(parts) != 3 or parts[1].lower() != "_git":
            return None
        host, parts = "dev.azure.com", [host.removesuffix(".visualstudio.com"), parts[0], parts[2]]
    if host not in CASELESS_HOSTS:
        return None
    return host, "/".join(parts).lower()


def canonical_name(name: str) -> str:
    """A `host/path` project name named as `normalise_remote` names that repository's clones
    (`GitHub.com/Acme/App` and `github.com-work/acme/app` are `github.com/acme/app`); any
    other name as it is."""
    host, slash, path = name.partition("/")
    found = canonical(host.lower(), path) if slash else None
    return name if found is None else f"{found[0]}/{found[1]}"


def looks_like_remote(name: str) -> bool:
    """Whether a project name as typed is a remote's address rather than a name: it has a
    scheme (`https://…`), is scp-like with a user (`git@host:owner/repo`), or ends in `.git`."""
    if "://" in name or name.rstrip("/").endswith(".git"):
        return True
    at = name.find("@")
    return at > 0 and "/" not in name[:at] and _host_and_path(name, at + 1) is not None


def scp_like(url: str) -> tuple[str, str] | None:
    """(host, path) of an scp-like address (`git@host:owner/repo.git`, `git@[fd00::1]:o/r`),
    else None: the pattern `^(?:[^@/]+@)?(\\[[^\\]/\\n]*\\]|[^:/]+):(?!//)(.+)$`, matched
    by hand (tests compare the two). An IPv6 literal is a host whole, as git reads it."""
    at = url.find("@")
    if at > 0 and "/" not in url[:at]:
        found = _host_and_path(url, at + 1)
        if found is not None:
            return found
    return _host_and_path(url, 0)


def _host_and_path(url: str, start: int) -> tuple[str, str] | None:
    """`(\\[[^\\]/\\n]*\\]|[^:/]+):(?!//)(.+)$` matched at `start`."""
    if url.startswith("[", start):
        close = url.find("]", start)
        bracketed = url[start:close + 1] if close > 0 else ""
        if bracketed and "/" not in bracketed and "\n" not in bracketed:
            found = _path_after(url, start, close + 1)
            if found is not None:
                return found
    end = start
    while end < len(url) and url[end] not in ":/":
        end += 1
    return _path_after(url, start, end)


def _path_after(url: str, start: int, end: int) -> tuple[str, str] | None:
    """(url[start:end], the path) where `:(?!//)(.+)$` matches at `end`, else None."""
    if end == start or end == len(url) or url[end] != ":" or url.startswith("//", end + 1):
        return None
    rest = url[end + 1:]
    if rest.endswith("\n"):  # `$` matches before a final newline
        rest = rest[:-1]
    if not rest or "\n" in rest:
        return None
    return url[start:end], rest
