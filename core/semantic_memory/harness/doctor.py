"""`memory-mcp doctor`: the whole wiring at a glance.

The service (reachable, and with the token the hooks send? which version, which embedder;
a service that refuses the token counts as not reachable: `doctor` exits 1; so does one that
is up but whose store cannot answer, said as such: it recovers by itself, and ending it would
not help), then for each installed harness
adapter: its binary, its hooks and MCP registration in the user and project configs (and a
program or plugin module they name that is gone: a venv deleted, a cache emptied since), and
the last success and last failure of each of its hooks (from the hook log). Last, each harness whose hooks are wired or
have run but that has no adapter (not installed, or installed and refused: its distribution
and the reason named): every one of its hooks fails, and `uninstall` takes them out without
the adapter. opencode's wiring is a plugin entry in its config: the plugin file a wheel's
adapter shipped goes with it (MISSING), and `uninstall` takes the plugin and MCP entries out.
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path
from typing import Any

from .. import backoff, spool
from ..config import Settings
from ..models import iso
from . import install, outcomes, registry
from .client import (
    ServiceClient,
    ServiceFailed,
    ServiceForeign,
    ServiceMisdirected,
    ServiceTimeout,
    ServiceUnavailable,
    answers,
    resolve_address,
    user_name,
)
from .repo_config import approvals_file, load_repo_config, project_for
from .urls import split_url

HEALTH_TIMEOUT_S = 2.0
#: The states of a service that answers but cannot be used, as the service line says them.
UP_BUT = {"store unavailable": "its store is unavailable", "failing": "FAILING",
          "refused": "it REFUSES doctor's request"}
#: A route that needs the token and costs what /health costs (it counts the store too).
TOKEN_PROBE = "/api/memories?limit=1"


def service_report(settings: Settings) -> dict[str, Any]:
    url, origin, store = resolve_address(settings)
    report: dict[str, Any] = {"url": url, "from": origin, "reachable": False,
                              "autostart": settings.plugin_autostart}
    try:
        split_url(url)
    except ValueError:  # hooks refuse this MEMORY_PLUGIN_URL (HookSettings): say so
        off = ": hooks are off" if origin == "MEMORY_PLUGIN_URL" else ""
        report.update(state="invalid", error=f"not an http(s) URL (http://host:port){off}")
        return report
    token = settings.plugin_token or settings.token
    client = ServiceClient(url, time.monotonic() + HEALTH_TIMEOUT_S, token, store=store)
    try:
        health = client.get("/health")
    except ServiceUnavailable as exc:
        report["state"] = state = unreachable_state(exc, url, token)
        if isinstance(exc, ServiceForeign):  # its message's advice is the hooks'
            report["owner"] = user_name(exc.uid)
            report["error"] = (f"another user's process listens there ({report['owner']}); "
                               "nothing was sent to it")
        elif state == "other store":  # the hooks' own words: it is up, for another db
            report["error"] = str(exc)
        elif state == "held":  # never "service down": starting one would not help
            report["error"] = f"another program listens there ({exc})"
        elif isinstance(exc, ServiceFailed):  # the service's own answer: its one line
            report.update(status=exc.status,
                          error=str(exc).removeprefix(f"HTTP {exc.status}: "))
        elif state == "store unavailable":  # /health waits on the store; `HEAD /` did not
            report["error"] = (f"/health got no answer within {HEALTH_TIMEOUT_S:g} s while "
                               "the service answers `HEAD /` at once: a long write or a lock "
                               "holds its store, or its database server is slow or down")
        else:
            report["error"] = f"{exc.outcome}: {exc}"
        return report
    # /health needs no token: a service that wants one answers it all the same, and then
    # refuses every hook's recall (401) while their writes pile up in the spool.
    refused = token_problem(url, token, store) if health.get("auth") else None
    if refused is not None:
        report.update(state=refused, version=health.get("version"),
                      error=f"{refused}: the service requires a Bearer token and "
                            + ("none is set here" if refused == "token missing" else
                               "refuses the one set here")
                            + " (MEMORY_PLUGIN_TOKEN, else MEMORY_TOKEN): hook recalls fail "
                              "with 401 and writes are spooled")
        return report
    embedder = health.get("embedder") or {}
    if embedder.get("active"):
        # What the embedder's info() has: only model_id and dim are promised.
        model = " ".join(str(embedder[k]) for k in ("embedder", "model_id") if embedder.get(k))
        device = embedder.get("device") or embedder.get("device_requested")
        described = (f"{model or 'unnamed'}{f' on {device}' if device else ''}, "
                     f"{embedder.get('vectorized', 0)} vectorized, "
                     f"{embedder.get('missing', 0)} without a vector yet")
    elif embedder:
        described = f"inactive: {embedder.get('reason', 'no model configured')}"
    else:
        described = "none (BM25-only)"
    idle = None if embedder.get("active") else embedder.get("channel")  # it recalls nothing
    channels = [f"{c.get('name')} (inactive)" if c.get("name") == idle else c.get("name")
                for c in health.get("channels", [])]
    report.update(reachable=True, version=health.get("version"), counts=health.get("counts"),
                  channels=channels, embedder=described)
    return report


def unreachable_state(exc: ServiceUnavailable, url: str, token: str = "") -> str:
    """Why /health did not give the service's report, each with its own advice: "other user"
    (another OS user's process listens there: nothing was sent to it); "other store" (a
    memory service found by the port alone serves another db than MEMORY_DB_PATH /
    MEMORY_DB_URL name: the hooks spool rather than write into it); the service's own
    error answer, so it is up: "store unavailable" (503: its store cannot answer for now, a
    database server down or slow, and it recovers by itself), "failing" (any other 5xx: a
    damaged SQLite file, an internal error), "refused" (4xx: this request, e.g. its Host);
    "store unavailable" too when /health timed out but `HEAD /`, which waits on no store, is
    answered (the hooks' probe); "hung" (something takes the connection and answers neither
    in time); "held" (something takes it and is not the service: it closed the connection, or
    answered what the service never does: starting a service would only fail to bind), else
    "down" (nothing listens: start it)."""
    if isinstance(exc, ServiceForeign):
        return "other user"
    if isinstance(exc, ServiceMisdirected):
        return "other store"
    if isinstance(exc, ServiceTimeout):
        return "store unavailable" if answers(url, token) else "hung"
    if isinstance(exc, ServiceFailed) and not exc.foreign:
        if exc.status == 503:
            return "store unavailable"
        return "failing" if exc.status >= 500 else "refused"
    return "held" if _listening(url) else "down"


def _listening(url: str) -> bool:
    """Whether something accepts a TCP connection at `url`'s address (nothing is sent)."""
    try:
        parts = split_url(url)
        socket.create_connection((parts.host, parts.port), HEALTH_TIMEOUT_S).close()
    except (OSError, ValueError):
        return False
    return True


def token_problem(url: str, token: str, store: tuple[str, str] | None = None) -> str | None:
    """"token missing" or "token refused" when a route that needs the token answers 401 to
    this one; None when it is taken (any other answer: that route's own business). `store`:
    the address's (`ServiceAddress.store`), sent as the hooks send it."""
    client = ServiceClient(url, time.monotonic() + HEALTH_TIMEOUT_S, token, store=store)
    try:
        client.get(TOKEN_PROBE)
    except ServiceFailed as exc:
        if exc.status == 401:
            return "token refused" if token else "token missing"
    except ServiceUnavailable:
        pass  # gone or slow since /health: not the token's doing, and /health said it is up
    return None


def harness_report(adapter: Any, settings: Settings, project_dir: Path | None,
                   latest: dict[tuple[str, str], dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Where the adapter's entries are installed (the user's config, and the project's when
    it has its own files there), its binary, and its hooks' latest outcomes."""
    scopes: dict[str, Any] = {}
    seen: list[str] = []
    for scope, folder in (("user", None), ("project", project_dir)):
        if scope == "project" and folder is None:
            continue
        target = install.make_target(adapter.name, settings,
                                     project_dir=str(folder) if folder else None)
        files = adapter.config_files(target)
        paths = [str(f.path) for f in files]
        if scope == "project" and (paths == seen or not any(f.path.exists() for f in files)):
            continue  # a harness configured per user only, or nothing in this project
        seen = paths
        missing = [{"program": named.program, "file": str(named.path), "kind": named.kind}
                   for named in install.named_programs(files) if not named.present()]
        scopes[scope] = {"files": paths, "entries": install.status(files), "missing": missing,
                         "reinstall": f"memory-mcp install {adapter.name}"
                                      + (f" --project {folder}" if folder else "")}
    hooks = {event: outcomes_ for (harness, event), outcomes_ in sorted(latest.items())
             if harness == adapter.name}
    binary = adapter.binary
    return {"harness": adapter.name, "binary": binary and shutil.which(binary),
            "binary_name": binary, "scopes": scopes, "hooks": hooks}


def orphan_reports(adapters: dict[str, Any], project_dir: Path | None,
                   latest: dict[tuple[str, str], dict[str, dict[str, Any]]],
                   settings: Settings) -> list[dict[str, Any]]:
    """Harnesses that are wired (hooks in the user's config folders, those CLAUDE_CONFIG_DIR,
    CODEX_HOME and KIMI_CODE_HOME name too, or the project's; opencode's plugin in its config)
    or have run (the hook log) but that have no adapter: each of their hooks fails, and
    opencode cannot load a plugin file that went with its adapter. Where they are wired, the
    programs and plugin files named there that are gone (`missing`), the command that takes
    the entries out, and (`refused`) why an adapter that is installed was refused, naming its
    distribution: reinstalling a package by a guessed name does not help there."""
    wired: dict[str, dict[str, list[str]]] = {}
    missing: dict[str, dict[str, list[dict[str, str]]]] = {}
    home = Path.home()
    for scope, folder in (("user", home), ("project", project_dir)):
        if folder is None or (scope == "project" and folder.resolve() == home.resolve()):
            continue  # doctor run in the home folder: its files are the user's
        for harness, paths in install.wired_harnesses(folder, user=scope == "user").items():
            if harness in adapters:
                continue
            wired.setdefault(harness, {})[scope] = [str(p) for p in paths]
            target = install.make_target(harness, settings, project_dir=str(
                folder) if scope == "project" else None)
            missing.setdefault(harness, {})[scope] = [
                {"program": named.program, "file": str(named.path), "kind": named.kind}
                for named in install.named_programs(install.orphan_files(target))
                if not named.present()]
    names = sorted((set(wired) | {harness for harness, _ in latest}) - set(adapters))
    refused = {name: registry.refused_adapter(name, settings) for name in names}
    return [{"harness": name, "wired": wired.get(name, {}), "refused": refused[name],
             "wiring": "plugin" if name == install.OPENCODE else "hooks",
             "missing": missing.get(name, {}),
             "fix": _orphan_fix(name, list(wired.get(name, {})), project_dir, refused[name]),
             "hooks": {event: seen for (harness, event), seen in sorted(latest.items())
                       if harness == name}}
            for name in names]


def _orphan_fix(harness: str, scopes: list[str], project_dir: Path | None,
                refused: str | None = None) -> str:
    """The one line that says how to stop the failing hooks of a harness without adapter:
    take them out, or mend the adapter that was refused, else install one."""
    commands = [f"`memory-mcp uninstall {harness}"
                + (f" --project {project_dir}`" if scope == "project" else "`")
                for scope in scopes]
    if commands:
        remove = f"{' and '.join(commands)} take{'s' if len(commands) == 1 else ''} them out"
    else:  # seen in the hook log only: wired in a project other than this one
        remove = (f"`memory-mcp uninstall {harness} --project DIR` in the project whose hooks "
                  "ran takes them out")
    if refused:
        return f"{remove}, or repair or update the adapter installed for it, refused: {refused}"
    return f"{remove}, or install its adapter again (semantic-memory-{harness})"


def report(settings: Settings, adapters: dict[str, Any],
           project_dir: Path | None) -> dict[str, Any]:
    latest = outcomes.latest(settings)
    return {
        "service": service_report(settings),
        "hook_log": str(outcomes.log_path(settings)),
        "spool": spool_report(settings),
        "repository": repo_report(settings, project_dir),
        "harnesses": [harness_report(a, settings, project_dir, latest)
                      for _, a in sorted(adapters.items())],
        "without_adapter": orphan_reports(adapters, project_dir, latest, settings),
    }


def repo_report(settings: Settings, project_dir: Path | None) -> dict[str, Any]:
    """The project folder's `.semantic-memory.toml` in effect, and the project name hooks
    run there would use (MEMORY_PROJECT, else the file's name if allowed, else detected);
    `ignored_name`: the file's name awaiting the user's `memory-mcp allow`."""
    folder = project_dir or Path(".").resolve()
    repo = load_repo_config(folder, approvals_file(settings))
    return {"file": str(repo.path) if repo.path else None, "capture": repo.capture,
            "recall": repo.recall, "project_name": repo.project, "error": repo.error,
            "ignored_name": repo.ignored, "warning": repo.warning(),
            "project": project_for(folder, repo, settings.project),
            "summary": repo.describe()}


def spool_report(settings: Settings) -> dict[str, Any]:
    """The write spool's depth, what keeps this user from replaying it (`blocked`), and the
    hooks' back-off, as a hook would find them now."""
    depth = spool.depth(settings.spool_path)
    url = resolve_address(settings).url
    state = backoff.active(settings.backoff_path, url)
    slow = backoff.slow(settings.backoff_path, url)
    return {"path": str(settings.spool_path), "pending": depth.count, "oldest": depth.oldest,
            "rejected": depth.rejected, "blocked": spool.blocked(settings.spool_path),
            "unwritable": spool.unwritable(settings.spool_path),
            "backoff": None if state is None else {"until": state.until,
                                                   "outcome": state.outcome,
                                                   "detail": state.detail},
            "slow": None if slow is None else {"until": slow.until, "detail": slow.detail}}


def _when(ts: Any) -> str:
    """Unix seconds as every other command prints a time: ISO 8601 UTC (`…T06:32:00+00:00`),
    where local time without its zone read hours off beside them. A hook-log entry without a
    readable time says so rather than stopping the report."""
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        return "an unknown time"
    return iso(ts)


def _spool_lines(info: dict[str, Any]) -> list[str]:
    if info["pending"]:
        oldest = _when(info["oldest"] or 0)
        line = (f"spool     {info['pending']} write(s) waiting for the service, the oldest from "
                f"{oldest} ({info['path']}; `memory-mcp spool` lists them)")
    else:
        line = f"spool     empty ({info['path']})"
    if info["rejected"]:
        line += f"; {info['rejected']} refused by the service (`memory-mcp spool list`)"
    lines = [line]
    if info["blocked"]:  # neither `spool replay` nor a service run as this user can replay
        lines.append(f"          NOT REPLAYED: {info['blocked']}")
    elif info.get("unwritable"):  # nothing waits, and nothing could be kept either
        lines.append(f"          CANNOT SPOOL: {info['unwritable']}")
    if info["backoff"]:
        until = _when(info["backoff"]["until"])
        lines.append(f"back-off  hooks skip the service until {until} "
                     f"({info['backoff']['outcome']}: {info['backoff']['detail']})")
    if info.get("slow"):
        lines.append(f"slow      writes go straight to the spool until "
                     f"{_when(info['slow']['until'])}: the service answered too slowly "
                     f"({info['slow']['detail']})")
    return lines


def _unreachable_advice(service: dict[str, Any]) -> list[str]:
    """What to do: start the service when nothing listens; find the process that holds the
    port when something else accepts connections there (starting another service on that
    port would only fail to bind); start one's own when another user's holds it; nothing to
    end or start when the service is up and only its store cannot answer (it recovers by
    itself). Never "set MEMORY_PLUGIN_AUTOSTART=1" where doctor runs with it set."""
    state = service.get("state")
    if state in ("invalid", "refused"):
        return []  # the line says it all
    if state == "store unavailable":  # ending it would turn a passing outage into a lasting one
        return ["          it recovers by itself once its store answers again (the database "
                "server back, a lock released, a privilege granted): nothing to end or "
                "restart, and a service started while its database is down exits"]
    if state == "failing":
        return ["          every request that needs the store fails until this is mended "
                "(the service's log says more)"]
    if state in ("token missing", "token refused"):
        return ["          set MEMORY_TOKEN (or MEMORY_PLUGIN_TOKEN) to the service's token "
                "where the hooks and agents run (and where doctor runs)"]
    try:
        port: int | str = split_url(service["url"]).port
    except ValueError:
        port = "PORT"
    autostart = service.get("autostart")
    if state == "other store":
        return [f"          the service on port {port} serves another db: start this db's own "
                "(`MEMORY_PORT=0 memory-mcp`: the hooks find it by its discovery file), or "
                "set MEMORY_DB_PATH to the db it serves; the spool keeps the hooks' writes"]
    if state == "other user":
        start = ("MEMORY_PLUGIN_AUTOSTART is on: the next session start starts one on a free "
                 "port" if autostart else "MEMORY_PLUGIN_AUTOSTART=1 starts one on a free port")
        return [f"          port {port} is held by another user's process "
                f"({service.get('owner')}): this user's hooks do not use it; start your own: "
                f"{start} (or `MEMORY_PORT=0 memory-mcp`)"]
    find = f"find it with `ss -ltnp 'sport = :{port}'` or `lsof -i :{port}`"
    if state == "held":
        other = ("point MEMORY_PLUGIN_URL at a free port N and start `MEMORY_PORT=N memory-mcp`"
                 if service.get("from") == "MEMORY_PLUGIN_URL" else
                 "run the service on another port: `MEMORY_PORT=0 memory-mcp` (the hooks find "
                 "it through its discovery file), or MEMORY_PORT=N for the service and "
                 "MEMORY_PLUGIN_URL=http://127.0.0.1:N where the hooks run")
        return [f"          port {port} is held by another program, not the memory service: "
                f"{find}",
                f"          end it, or {other}"]
    if state == "hung":
        return [f"          something listens on port {port} but does not answer within "
                f"{HEALTH_TIMEOUT_S:g} s (a hung service?)",
                f"          {find}, end it, then start `memory-mcp`"]
    if autostart:
        return ["          start it with `memory-mcp` (MEMORY_PLUGIN_AUTOSTART is on here: "
                "the next session start starts one; `service.log` beside the db says why "
                "one did not)"]
    return ["          start it with `memory-mcp` (or set MEMORY_PLUGIN_AUTOSTART=1)"]


def render(data: dict[str, Any]) -> str:
    """The report as text for a terminal."""
    service = data["service"]
    lines = []
    if service["reachable"]:
        counts = service.get("counts") or {}
        lines.append(f"service   {service['url']} ({service['from']}): up, version "
                     f"{service.get('version')}, {counts.get('memories', '?')} memories, "
                     f"channels {', '.join(service.get('channels') or []) or 'none'}")
        lines.append(f"embedder  {service.get('embedder')}")
    elif service.get("state") in ("token missing", "token refused"):
        lines.append(f"service   {service['url']} ({service['from']}): up, version "
                     f"{service.get('version')}, but NOT USABLE — {service.get('error')}")
        lines += _unreachable_advice(service)
    elif service.get("state") in UP_BUT:
        lines.append(f"service   {service['url']} ({service['from']}): up, but "
                     f"{UP_BUT[service['state']]}: {service.get('error')}")
        lines += _unreachable_advice(service)
    else:
        lines.append(f"service   {service['url']} ({service['from']}): NOT REACHABLE — "
                     f"{service.get('error')}")
        lines += _unreachable_advice(service)
    lines.append(f"hook log  {data['hook_log']}")
    lines += _spool_lines(data["spool"])
    repo = data["repository"]
    lines.append(f"repo file {repo['summary']}")
    lines.append(f"project   {repo['project']}")
    for harness in data["harnesses"]:
        lines.append("")
        binary = harness["binary"] or f"{harness['binary_name']} not on PATH"
        lines.append(f"{harness['harness']}  ({binary})")
        for scope, info in harness["scopes"].items():
            entries = info["entries"]
            hooks = [n.removesuffix(" hook") for n in entries if n.endswith(" hook")]
            on = [h for h in hooks if entries[f"{h} hook"]]
            off = [h for h in hooks if not entries[f"{h} hook"]]
            parts = [f"hooks: {' '.join(on) or 'none'}" + (f" (not: {' '.join(off)})" if off
                                                           else "")] if hooks else []
            # Other entries (the MCP server; an in-process plugin for a harness without hooks).
            parts += [f"{name}: {'yes' if present else 'no'}" for name, present in entries.items()
                      if not name.endswith(" hook")]
            lines.append(f"  {scope:8} {' · '.join(parts) or 'nothing installed'}")
            lines += [_missing_line(item, info["reinstall"]) for item in info["missing"]]
        lines += _hook_lines(harness["hooks"])
    for orphan in data.get("without_adapter", []):
        state = ("ADAPTER REFUSED" if orphan.get("refused") else "NO ADAPTER INSTALLED")
        missing = orphan.get("missing", {})
        wiring = orphan.get("wiring", "hooks")
        if wiring == "hooks":
            effect = "its hooks fail on every prompt"
        elif any(m["kind"] == "module" for items in missing.values() for m in items):
            effect = f"{orphan['harness']} cannot load the plugin its config names"
        else:
            effect = "its config still names its plugin"
        lines += ["", f"{orphan['harness']}  ({state}: {effect})"]
        for scope, paths in orphan["wired"].items():
            lines.append(f"  {scope:8} {wiring} wired in {', '.join(paths)}")
            lines += [_missing_line(item) for item in missing.get(scope, [])]
        lines.append(f"  fix: {orphan['fix']}")
        lines += _hook_lines(orphan["hooks"])
    return "\n".join(lines)


def _missing_line(item: dict[str, str], reinstall: str | None = None) -> str:
    """One line for a program or plugin module a harness config names that is gone (a venv
    deleted, a cache emptied, an adapter uninstalled with the plugin file it shipped): what
    fails, and the command that writes the entries anew (none without an adapter: the
    harness's `fix:` line follows)."""
    file = item["file"]
    what = {"hooks": f"which the hooks in {file} run: each fails (exit 127)",
            "command": f"a command in {file}: the harness cannot start it",
            "module": f"the plugin {file} loads: the harness cannot load it"}[item["kind"]]
    if reinstall is None:
        return f"  MISSING  {item['program']}, {what}"
    return (f"  MISSING  {item['program']}, {what}; run `{reinstall}` again from a lasting "
            "install (docs/cli.md#install)")


def _hook_lines(hooks: dict[str, dict[str, Any]]) -> list[str]:
    """The last success and the last failure of each hook of a harness."""
    if not hooks:
        return ["  no hook has run yet"]
    lines = []
    for event, seen in hooks.items():
        for side in ("success", "failure"):
            item = seen.get(side)
            if item:
                when = _when(item.get("ts", 0))
                detail = f" — {item['detail']}" if item.get("detail") else ""
                lines.append(f"  last {side:7} {event}: {when} {item.get('outcome')}{detail}")
    return lines
