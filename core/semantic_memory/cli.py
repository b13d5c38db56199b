"""The `memory-mcp` command line. Plugins add commands through the `register_commands` hook."""

from __future__ import annotations

import codecs
import errno
import io
import json
import os
import signal
import sqlite3
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import click

from .channels import Channel, check_channel, skip_reason
from .cli_io import INTERRUPTED_EXIT, FolderGone, Interrupted, ReaderGone, add_row as _add_row, \
    flush_stdout, here, interrupt_deferred, print_table as _print, reader_gone, say, \
    stdin_bytes, stdout_text, table as _table
from .cli_io import console as _console
from .cli_io import to_json
from .cli_purge import purge_forgotten, purge_matching
from .harness.project import working_folder
from .config import ConfigError, Settings
from .safety.redaction import ruleset_info
from .safety.terminal import shown_on_terminal
from .errors import InvalidMemory, UnknownMemory, one_line
from .models import (NewMemory, RecallFilters, TimeOutOfRange, UnclearDuration, parse_time,
                     project_name)
from .ingest import validate
from .pipeline import (EXPORT_FIELDS, KEYWORD_MODE_NOTE, MemoryEngine, forgotten_record,
                       keyword_mode_why)
from .plugins import PluginManager, build_plugin_manager, collect, no_channel_reason
from .stores import StoreError, scheme_of, store_url
from .stores.sqlite import SQLiteStore, sqlite_problem

IMPORT_BATCH = 2_000
#: The largest LIMIT / OFFSET a store takes (a signed 64-bit integer).
SQL_INT_MAX = 2**63 - 1


class BadSettings(click.ClickException):
    """A setting the user gave (an env var, a plugin's section, MEMORY_PLUGINS) that cannot be
    used: exit code 2, as `main` gives one met before any command, wherever it is found."""

    exit_code = 2


@dataclass
class Context:
    """Lazily opened engine shared by the subcommands of one invocation."""

    settings: Settings
    #: The plugins `main` loaded (their commands added); None: each use loads them.
    pm: PluginManager | None = None
    _engine: MemoryEngine | None = None

    def plugin_manager(self) -> PluginManager:
        """The loaded plugins: `main`'s, else loaded now (ClickException on a bad
        MEMORY_PLUGINS)."""
        if self.pm is None:
            try:
                self.pm = build_plugin_manager(self.settings)
            except ConfigError as exc:
                raise BadSettings(str(exc)) from None
        return self.pm

    @property
    def engine(self) -> MemoryEngine:
        if self._engine is None:
            self.settings.make_data_folder()
            try:
                self._engine = MemoryEngine(self.settings, plugin_manager=self.pm)
            except ConfigError as exc:  # a plugin's own section included
                raise BadSettings(str(exc)) from None
            except StoreError as exc:
                raise click.ClickException(str(exc)) from None
        return self._engine


pass_context = click.make_pass_decorator(Context)


class Utf8Text(click.ParamType):
    """Text a store can hold and a terminal can print. A shell hands over bytes that are not
    UTF-8 as lone surrogates, which raised UnicodeEncodeError deep inside a command."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # exit code 1, worded as the store's own check words it
                raise click.ClickException(
                    f"{param.name if param else 'text'}: not UTF-8 text") from None
        return value


class TextCommand(click.Command):
    """A command whose plain text parameters are `Utf8Text`: one check for every command,
    plugins' too. Paths (`click.Path`) are left alone: a file name may be any bytes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.type is click.STRING:
                param.type = Utf8Text()


class TextGroup(click.Group):
    """The `memory-mcp` group: its commands are `TextCommand`s, its subgroups `TextGroup`s.
    It reports what click would in its standalone mode, each in one line on stderr: an error
    (click's usage errors were four lines, and went to stdout when stderr was closed), and a
    Ctrl-C (click's "Aborted!", exit code 1, even after a purge had deleted for good)."""

    command_class = TextCommand
    group_class = type
    #: Whether `main` answers Ctrl-C (and gives SIGINT its handler back at the end).
    _answering = False

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        previous, self._answering = signal.getsignal(signal.SIGINT), True
        try:
            # click's non-standalone main returns an Exit's code, and None once a command ran
            code = super().main(*args, standalone_mode=False, **kwargs)
        except Interrupted as exc:
            say(f"interrupted: {exc}" if str(exc) else "interrupted")
            code = INTERRUPTED_EXIT
        except click.Abort:  # a Ctrl-C outside any command: while the arguments are read
            say("interrupted: nothing was done")
            code = INTERRUPTED_EXIT
        except click.ClickException as exc:
            say(usage_line(exc) if isinstance(exc, click.UsageError) else
                f"Error: {exc.format_message()}")
            code = exc.exit_code
        finally:
            self._answering = False
            if previous is not None and signal.getsignal(signal.SIGINT) != previous:
                signal.signal(signal.SIGINT, previous)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> None:
        try:
            super().invoke(ctx)  # a command's return value is no exit code (as standalone)
        except BrokenPipeError:  # not click's answer to it (exit code 1): `main` ends quietly
            raise ReaderGone() from None
        except KeyboardInterrupt:  # a command that knows more raises Interrupted itself
            raise Interrupted(_nothing_changed(ctx)) from None
        finally:  # the command is over: a Ctrl-C while the store closes changes nothing
            if self._answering:
                _ignore_interrupts()


#: The commands that only read: a Ctrl-C in one has changed nothing.
READING_COMMANDS = frozenset({"recall", "list", "forgotten", "stats", "plugins", "doctor"})


def _nothing_changed(ctx: click.Context) -> str:
    """What an interrupted command without its own line did: nothing, for one that reads."""
    return "nothing was changed" if ctx.invoked_subcommand in READING_COMMANDS else ""


def _ignore_interrupts() -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread (a test's runner): nothing to ignore
        pass


def usage_line(exc: click.UsageError) -> str:
    """A usage error in one line (click prints the usage and a help hint above it)."""
    message = " ".join(exc.format_message().split())
    if isinstance(exc, click.NoSuchOption) and exc.option_name == "--db":
        words, ctx = [], exc.ctx
        while ctx is not None and ctx.parent is not None:  # `spool list`: below the group
            words.insert(0, ctx.info_name or "")
            ctx = ctx.parent
        message = f"--db goes before the command: memory-mcp --db FILE {' '.join(words)} …"
    elif isinstance(exc, click.NoSuchOption) and exc.option_name == "--stdio":
        message = STDIO_ALONE
    return f"Error: {message}"


#: `--stdio` with a command: it serves (`memory-mcp --stdio`), which the command would not.
STDIO_ALONE = ("--stdio serves MCP over stdin/stdout: give it without a command (`memory-mcp "
               "--stdio`) or to serve (`memory-mcp serve --stdio`)")


def _settings(db: str | None) -> Settings:
    try:
        if not db:
            return Settings.from_env()
        if "://" in db:
            return Settings.from_env(db_url=db)
        # A path given on the command line is the user's, relative to where they are, and
        # it names the store: MEMORY_DB_URL would win over any MEMORY_DB_PATH, so `--db
        # personal.db import notes.jsonl` wrote into the team's PostgreSQL store.
        return Settings.from_env(db_path=os.path.abspath(os.path.expanduser(db)), db_url="",
                                 db_url_file="")
    except ConfigError as exc:
        raise BadSettings(str(exc)) from None


def _echo_json(data: Any) -> None:
    click.echo(to_json(data))


def _filters(project: str | None, kind: str | None, source: str | None,
             since: str | None) -> RecallFilters:
    if since == "":  # as REST and MCP refuse it: not silently "no filter"
        raise click.BadParameter("empty; give a time, or leave --since out for no time filter",
                                 param_hint="--since")
    try:
        since_ts = parse_time(since) if since is not None else None
    except (TimeOutOfRange, UnclearDuration) as exc:  # their message is the reason
        raise click.BadParameter(str(exc), param_hint="--since") from None
    except ValueError:
        raise click.BadParameter(f"cannot read {since!r} as ISO 8601, unix seconds or a "
                                 "duration back from now (7d)",
                                 param_hint="--since") from None
    if project is not None and not project.strip():  # as `update --project ""`: global
        return RecallFilters(global_only=True, kind=kind, source=source, since=since_ts)
    return RecallFilters(project=project, kind=kind, source=source, since=since_ts)


filter_options = [
    click.option("--project", help='Only memories of this project ("" = the global ones, '
                                   'those without a project).'),
    click.option("--kind", help="Only this kind (preference, decision, fact, artifact, …)."),
    click.option("--source", help="Only this source (chat, compaction, tool, …)."),
    click.option("--since", help="Only memories updated at or after this time (ISO 8601, or "
                                 "a duration back from now: 30m, 24h, 7d, 2w)."),
]


def with_filters(func: Any) -> Any:
    for option in reversed(filter_options):
        func = option(func)
    return func


@click.group(cls=TextGroup, invoke_without_command=True)
@click.option("--db", help="Database file or store URL (default: MEMORY_DB_URL, else "
                           "MEMORY_DB_PATH).")
@click.option("--stdio", is_flag=True,
              help="Without a command: serve MCP over stdin/stdout instead of HTTP.")
@click.version_option(package_name="semantic-memory-core")
@click.pass_context
def cli(ctx: click.Context, db: str | None, stdio: bool) -> None:
    """semantic-memory-mcp: local memory for coding agents.

    Without a command it serves: MCP at http://MEMORY_HOST:MEMORY_PORT/mcp plus the REST
    sidecar (default 127.0.0.1:8765), or MCP over stdio with --stdio.
    """
    if stdio and ctx.invoked_subcommand is not None:  # it was dropped, silently
        raise click.UsageError(STDIO_ALONE)
    ctx.obj = Context(_settings(db), ctx.obj if isinstance(ctx.obj, PluginManager) else None)
    ctx.call_on_close(lambda: ctx.obj._engine and ctx.obj._engine.close())
    if ctx.invoked_subcommand is None:
        ctx.invoke(serve, stdio=stdio)


@cli.command()
@click.option("--stdio", is_flag=True, help="Serve MCP over stdin/stdout (no port, no REST).")
@click.option("--host", help="Bind address (default: MEMORY_HOST, 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535),
              help="Port (default: MEMORY_PORT, 8765; 0 = OS-assigned).")
@pass_context
def serve(obj: Context, stdio: bool, host: str | None = None, port: int | None = None) -> None:
    """Run the service (what `memory-mcp` without a command does)."""
    from dataclasses import replace

    from .service import serve_http, serve_stdio

    settings = replace(obj.settings, **{k: v for k, v in (("host", host), ("port", port))
                                        if v is not None})
    if stdio:  # an agent starts it: its wire, and a folder to read the workspace from
        from .service.stdio import StdioClosed, check_stdio, settle_workspace

        try:
            check_stdio()
            settings, note = settle_workspace(settings)
        except (StdioClosed, ValueError) as exc:
            raise BadSettings(str(exc)) from None
        if note is not None:
            click.echo(f"memory-mcp: {note}", err=True)
    if not obj.plugin_manager().implementations("register_channels"):  # the core alone
        click.echo(f"memory-mcp: {no_channel_reason(settings)}: recall finds nothing",
                   err=True)
    try:
        if stdio:
            serve_stdio(settings)
        else:
            serve_http(settings)
    except ConfigError as exc:
        raise BadSettings(str(exc)) from None
    except (StoreError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None


@cli.command()
@pass_context
def proxy(obj: Context) -> None:
    """Serve the MCP tools over stdin/stdout, each call forwarded to the running service
    (what `install` registers): answers at once, and within MEMORY_MCP_PROXY_TIMEOUT_S when
    the service is down or hung (a memory_store is then spooled)."""
    from .service.mcp_front import run

    sys.exit(run(obj.settings))  # the store is never opened here: the service has it


def _read_stdin() -> str:
    """Standard input as text, without the byte order mark Windows tools write first (REST
    and `import` drop it too); bytes that are not UTF-8 become surrogates, which the store's
    check refuses in one line."""
    return stdin_bytes().read().decode("utf-8-sig", "surrogateescape")


@cli.command()
@click.argument("content")
@click.option("--kind", default="fact", show_default=True)
@click.option("--source", default="cli", show_default=True)
@click.option("--project", help="The project it belongs to ('' = a global memory).")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--replaces", metavar="UID", help="The uid of a memory this one replaces.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_context
def store(obj: Context, content: str, kind: str, source: str, project: str | None,
          tags: tuple[str, ...], replaces: str | None, as_json: bool) -> None:
    """Store CONTENT ('-' reads standard input)."""
    if content == "-":
        content = _read_stdin()
    try:
        result = obj.engine.store_one(
            NewMemory(content, kind=kind, source=source, project=project_name(project) or None,
                      tags=list(tags), replaces=replaces))
    except InvalidMemory as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        _echo_json(result.to_dict())
        if result.status == "rejected":  # as without --json: a script checks the exit code
            sys.exit(1)
    elif result.status == "rejected":
        raise click.ClickException(f"rejected: {result.reason}")
    elif result.uid is None:  # a duplicate of nothing live: its reason says of what
        click.echo(f"{result.status}: {result.reason}")
    else:
        click.echo(f"{result.status} {result.uid}" + (
            f" (supersedes {', '.join(result.supersedes)}: `memory-mcp unsupersede UID` undoes "
            "it)" if result.supersedes else ""))
        if result.not_applied:  # a duplicate's kind or tags the caller asked for: not set
            click.echo(result.reason, err=True)


@cli.command()
@click.argument("query")
@click.option("-k", "--limit", "k", type=click.IntRange(1, 200),
              help="How many memories (default 10; with --block MEMORY_PLUGIN_LIMIT, 5).")
@with_filters
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.option("--block", "budget", type=click.IntRange(0), default=None,
              help="Print the block a hook would inject, within this many characters, "
                   "instead: only memories that clear the hooks' relevance bar.")
@click.option("--include-superseded", is_flag=True,
              help="Also memories a newer one superseded (history).")
@click.option("--no-global", "no_global", is_flag=True,
              help="With --project: leave out global memories (those without a project).")
@pass_context
def recall(obj: Context, query: str, k: int | None, project: str | None, kind: str | None,
           source: str | None, since: str | None, as_json: bool, budget: int | None,
           include_superseded: bool, no_global: bool) -> None:
    """Recall memories relevant to QUERY.

    Without an embedder (the default install) recall is by words: QUERY finds memories that
    share its words (stemmed, or as substrings), not a rephrasing of them; see docs/vector.md.
    """
    filters = replace(_filters(project, kind, source, since),
                      include_superseded=include_superseded)
    # --block asks as a hook does (adapter.inject): its k, and only what a channel vouches for
    block_k = obj.settings.plugin_limit if budget is not None else 10
    if not obj.engine.channels:  # nothing can match: why, rather than "try other words"
        reason = no_channel_reason(obj.settings, obj.engine.skipped_channels)
        click.echo(f"No memory can match: {reason}.", err=True)
        if as_json:
            _echo_json([])
        return
    hits = obj.engine.recall(query, k or block_k, filters, with_global=not no_global,
                             relevant_only=budget is not None)
    if not hits and budget is not None:
        click.echo(f"Nothing clears the relevance bar for {query!r}: a hook would inject "
                   "nothing (`recall` without --block lists the nearest memories).", err=True)
        return
    if not hits and not as_json:
        filtered = project is not None or any((kind, source, since))
        click.echo(f"No memory matched {query!r}" + (" with these filters" if filtered else "")
                   + ".", err=True)
        if obj.engine.recall_mode == "keyword":
            click.echo(KEYWORD_MODE_NOTE, err=True)
        click.echo("Try other words, fewer filters, or `memory-mcp list` to see what is stored.",
                   err=True)
        return
    if budget is not None:
        block = obj.engine.injection_block(query, hits, budget)
        if not block:
            raise click.ClickException(f"no block fits in {budget} characters ({len(hits)} "
                                       "matching memories): give --block a larger budget")
        click.echo(block)
    elif as_json:
        _echo_json([h.to_dict() for h in hits])
    else:
        table = _table("score", "uid", "kind", "project", "channels", "content")
        for h in hits:
            ranks = " ".join(f"{c}:{r}" for c, r in h.ranks.items())
            if h.neighbour_of:  # brought along by the hit next to it in its session
                ranks = f"next to {h.neighbour_of[:8]}" + (f" {ranks}" if ranks else "")
            if h.memory.superseded_by:
                ranks += f" superseded by {h.memory.superseded_by[:8]}"
            _add_row(table, f"{h.score:.4f}", h.memory.uid, h.memory.kind,
                     h.memory.project or "", ranks, h.memory.content[:120].replace("\n", " "))
        _print(table)


@cli.command()
@click.argument("uid")
@pass_context
def unsupersede(obj: Context, uid: str) -> None:
    """Undo a supersession: memory UID is current again (recall and injection return it)."""
    try:
        was = obj.engine.unsupersede(uid)
    except UnknownMemory as exc:
        raise click.ClickException(str(exc)) from None
    if was is None:
        raise click.ClickException(f"memory {uid} is not superseded")
    click.echo(f"{uid} is current again (it was superseded by {was})")


@cli.command()
@click.argument("uid")
@pass_context
def forget(obj: Context, uid: str) -> None:
    """Forget one memory (soft delete: `unforget` takes it back until it is purged)."""
    current = obj.engine.forget_memory(uid)
    if current is None:
        raise click.ClickException(f"no live memory with uid {uid}")
    click.echo(f"forgot {uid}" + (
        f"; {len(current)} older version(s) it had replaced are current again: "
        f"{', '.join(current)}" if current else ""))


@cli.command()
@click.option("--project", help='Only memories of this project ("" = the global ones).')
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, SQL_INT_MAX))
@click.option("--json", "as_json", is_flag=True)
@pass_context
def forgotten(obj: Context, project: str | None, limit: int, as_json: bool) -> None:
    """Forgotten memories not yet purged, the latest forgotten first (`unforget UID`)."""
    found = obj.engine.forgotten(project, min(limit, SQL_INT_MAX - 1) + 1)
    memories, more = found[:limit], len(found) > limit
    records = [forgotten_record(m, obj.settings.forget_purged_after_s) for m in memories]
    if as_json:
        _echo_json(records)
        return
    if not memories:
        click.echo("No forgotten memory" + (" in this project" if project is not None else "")
                   + " awaits a purge.", err=True)
        return
    table = _table("uid", "forgotten", "purged after", "kind", "project", "content")
    for m, record in zip(memories, records, strict=True):
        _add_row(table, m.uid, record["forgotten_at"], record["purged_after"] or "a purge",
                 m.kind, m.project or "", m.content[:100].replace("\n", " "))
    _print(table)
    if more:
        click.echo(f"More than {limit} forgotten memories: raise --limit to see them all.",
                   err=True)


@cli.command()
@click.argument("uid")
@pass_context
def unforget(obj: Context, uid: str) -> None:
    """Take a forget back: memory UID is live again and recall finds it (until it is purged)."""
    try:
        result = obj.engine.unforget(uid)
    except UnknownMemory as exc:
        raise click.ClickException(str(exc)) from None
    if (refusal := result.refusal()) is not None:
        raise click.ClickException(refusal)
    click.echo(result.line())


@cli.command()
@click.argument("uid")
@click.option("--content", help="The new text, whole ('-' reads standard input).")
@click.option("--kind", help="A new kind.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable); replaces all the tags.")
@click.option("--no-tags", is_flag=True, help="Remove every tag.")
@click.option("--project", help="A new project ('' makes the memory global).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_context
def update(obj: Context, uid: str, content: str | None, kind: str | None, tags: tuple[str, ...],
           no_tags: bool, project: str | None, as_json: bool) -> None:
    """Edit memory UID in place: the uid stays, the earlier version is kept as a revision, and
    the new text is filtered (secrets redacted) and re-indexed like any write."""
    if content == "-":
        content = _read_stdin()
    if tags and no_tags:
        raise click.ClickException("give --tag or --no-tags, not both")
    new_tags = [] if no_tags else (list(tags) if tags else None)
    try:
        result = obj.engine.update(uid, content=content, kind=kind, tags=new_tags,
                                   project=project)
    except (UnknownMemory, InvalidMemory) as exc:
        raise click.ClickException(str(exc)) from None
    if result.status in ("rejected", "duplicate"):
        raise click.ClickException(f"not updated: {result.reason}")
    if as_json:
        _echo_json(result.to_dict())
    else:
        click.echo(f"{result.status} {uid}")


@cli.command("list")
@with_filters
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, SQL_INT_MAX))
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0, SQL_INT_MAX))
@click.option("--include-superseded", is_flag=True,
              help="Also memories a newer one superseded (history).")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def list_(obj: Context, project: str | None, kind: str | None, source: str | None,
          since: str | None, limit: int, offset: int, include_superseded: bool,
          as_json: bool) -> None:
    """List memories, newest-updated first (current ones, unless --include-superseded)."""
    filters = replace(_filters(project, kind, source, since),
                      include_superseded=include_superseded)
    memories = obj.engine.list(filters, limit, offset)
    if as_json:
        _echo_json([m.to_dict() for m in memories])
        return
    columns = ["uid", "updated", "kind", "source", "project", "content"]
    table = _table(*columns, *(["superseded by"] if include_superseded else []))
    for m in memories:
        d = m.to_dict()
        _add_row(table, m.uid, d["updated_at"], m.kind, m.source, m.project or "",
                 m.content[:100].replace("\n", " "),
                 *([m.superseded_by or ""] if include_superseded else []))
    _print(table)
    if len(memories) == limit:  # a full page: more may follow
        total = obj.engine.count(filters)
        if total > offset + limit:
            click.echo(f"{offset + 1}-{offset + limit} of {total} shown (--limit, --offset "
                       f"{offset + limit} for more)", err=True)


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_context
def stats(obj: Context, as_json: bool) -> None:
    """Counts, channels, telemetry, db size and the write spool."""
    from .harness.doctor import spool_report

    data = obj.engine.stats()
    # As this user finds the spool (doctor's look): a `blocked` reason says why it cannot
    # replay what waits, which the counts alone never said.
    data["spool"] = spool_report(obj.settings)
    if as_json:
        _echo_json(data)
        return
    from rich.text import Text

    console = _console()

    def line(text: str) -> None:  # names and paths are shown as written, never as markup
        console.print(Text(shown_on_terminal(text)))

    console.print(Text.assemble((str(data["memories"]), "bold"), Text(shown_on_terminal(
        f" memories ({data['forgotten']} forgotten, not yet purged) in {data['db_path']} "
        f"({data['db_bytes']:,} bytes)"))))
    for key in ("by_kind", "by_source", "by_project"):
        groups = [f"{k}={v}" for k, v in data[key].items()]
        if key == "by_project" and data["without_project"]:
            groups.append(f"(no project)={data['without_project']}")
        line(f"{key[3:]}: " + (", ".join(groups) or "-"))
    line("channels: " + (", ".join(
        f"{c['name']} (weight {c['weight']}" + (f"; {c['status']})" if c["status"] else ")")
        for c in data["channels"]) or "none"))
    inj = data["injections"]
    line(f"injections: {inj['total']} ({inj['last_7_days']} in 7 days, {inj['chars']:,} chars)")
    line(f"recall: {_recall_line(data, obj.settings)}")
    line(f"secret ruleset: {_ruleset_line(data['secret_ruleset'])}")
    line(f"spool: {_spool_line(data['spool'])}")


def _spool_line(info: dict[str, Any]) -> str:
    """`2 write(s) waiting, the oldest from 5 min ago; NOT REPLAYED: <why>`, or `empty`."""
    text = (f"{info['pending']} write(s) waiting, the oldest from {_ago(info['oldest'])}"
            if info["pending"] else "empty")
    if info["rejected"]:
        text += f"; {info['rejected']} refused by the service (`memory-mcp spool list`)"
    if info["blocked"]:
        text += f"; NOT REPLAYED: {info['blocked']}"
    return text


def _recall_line(data: dict[str, Any], settings: Settings) -> str:
    """How recall works, and what holds it back: no channel at all; an embedder that is off
    is named with its reason (refused, unknown, MEMORY_EMBEDDER=off, a model that cannot be
    used), as `stats --json` and `backfill` say it; a vector channel without an embedder
    plugin names the one to install; the setup hint only where none is set up; memories
    without a vector of the model are counted."""
    if not data["channels"]:
        return f"finds nothing: {no_channel_reason(settings, data['skipped_channels'])}"
    embedder = data.get("embedder") or {}
    if data["recall_mode"] == "keyword":
        why = keyword_mode_why(embedder)
        return f"by words only: {why}" if why else f"by words only. {KEYWORD_MODE_NOTE}"
    missing = int(embedder.get("missing") or 0)
    if missing:
        return (f"by words, and by meaning for {data['memories'] - missing} of "
                f"{data['memories']} memories: `memory-mcp backfill` embeds the rest")
    return "by words and meaning (keyword channels + embedder)"


def _ruleset_line(info: dict[str, str]) -> str:
    """`betterleaks 2.0.0 (upstream 2.0.0-rc.4) + 101 own rules`, or why the library is off."""
    if info.get("status") != "loaded":
        return f"{info['name']} {info['status']}; {info['own_rules']} own rules only"
    return (f"{info['name']} {info['version']} (upstream {info['upstream']}) "
            f"+ {info['own_rules']} own rules")


@cli.command()
@click.option("--matching", metavar="TEXT",
              help="Instead: hard-delete every copy of TEXT (case-insensitive) the store and the "
                   "spool keep: memories live, superseded or forgotten, earlier versions, "
                   "injection prompts, spooled writes.")
@click.option("--project", help='With --matching: only this project ("" = the global ones).')
@click.option("--dry-run", is_flag=True, help="With --matching: list what holds TEXT; "
                                               "delete nothing.")
@click.option("--yes", is_flag=True, help="With --matching: confirm the deletion.")
@pass_context
def purge(obj: Context, matching: str | None, project: str | None, dry_run: bool,
          yes: bool) -> None:
    """Hard-delete every forgotten memory (grace period or not), expire artifacts and
    telemetry, VACUUM if needed; prints what went (`soft_deleted`: the forgotten ones).
    With --matching TEXT: every copy of TEXT instead, and nothing else."""
    if matching is None:
        if project is not None or dry_run or yes:
            raise click.UsageError("--project, --dry-run and --yes go with --matching TEXT")
        purge_forgotten(obj.engine, obj.settings)
        return
    purge_matching(obj.engine, obj.settings, matching, project, dry_run, yes)


def _open_channels(obj: Context, pm: PluginManager
                   ) -> tuple[list[Channel], dict[str, str], str | None]:
    """The channels in use, those skipped on this store (name -> why), and why the store
    could not be opened (None when it was). The engine is opened on `pm` (`obj.pm`), as recall
    would, so a channel whose `bind` or `setup` fails is among `pm.problems`; without a store
    the channels are only registered."""
    from .embedders import check_embedder, choose_embedder

    try:
        engine = obj.engine
        skipped = dict(engine.skipped_channels)
        return [c for c in engine.registered_channels if c.name in skipped
                or c in engine.channels], skipped, None
    except click.ClickException as exc:
        unopened = exc.message
    try:
        channels: list[Channel] = collect(pm, "register_channels", "channel",
                                          lambda c: c.name, check_channel, settings=obj.settings)
        embedders = collect(pm, "register_embedders", "embedder", lambda e: e.name,
                            check_embedder, settings=obj.settings)
    except ConfigError as exc:
        raise BadSettings(str(exc)) from None
    if problem := choose_embedder(embedders, obj.settings.embedder)[1]:
        pm.refuse("embedders", problem)
    store = scheme_of(store_url(obj.settings))
    return channels, {c.name: why for c in channels if (why := skip_reason(c, store))}, \
        unopened


def diagnose(obj: Context) -> list[str]:
    """Every problem loading the plugins meets, one line each (`doctor`, the same lines as
    `plugins`): plugins that do not load or whose commands do not register, channels and
    embedders refused, channels whose `bind` or `setup` fails, an ambiguous or unknown
    MEMORY_EMBEDDER."""
    from .harness.registry import conflicts  # adapters register through their own path

    try:
        pm = obj.plugin_manager()
        channels, skipped, unopened = _open_channels(obj, pm)
    except click.ClickException as exc:  # MEMORY_PLUGINS, or a value in a plugin's section
        return [exc.message]
    lines = [str(p) for p in pm.problems]
    if unopened:
        lines.append(f"store not opened ({unopened}): channels' bind and setup not checked")
    if all(c.name in skipped for c in channels):
        lines.append(f"{no_channel_reason(obj.settings, skipped)}: recall finds nothing")
    return lines + conflicts(obj.settings)


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_context
def plugins(obj: Context, as_json: bool) -> None:
    """Loaded plugins, their distributions, hooks and channels."""
    pm = obj.plugin_manager()
    channels, skipped_all, unopened = _open_channels(obj, pm)
    owner = pm.owner_of
    store = scheme_of(store_url(obj.settings))
    rows = []
    for info in pm.describe():
        mine = [c for c in channels if owner.get(id(c)) == info.name]
        skipped = {c.name: skipped_all[c.name] for c in mine if c.name in skipped_all}
        rows.append({**info.__dict__, "skipped": skipped,
                     "channels": [c.name for c in mine if c.name not in skipped]})
        if "filter_ingest" in info.hooks and info.name.endswith("hygiene"):
            rows[-1]["secret_ruleset"] = ruleset_info()  # the library under its rules
    if as_json:
        _echo_json(rows + [{"name": p.plugin, "broken": p.reason} for p in pm.problems])
        return
    table = _table("plugin", "distribution", "version", "hooks", "channels")
    for r in rows:
        _add_row(table, r["name"], r["distribution"] or "(core)", r["version"] or "",
                 ", ".join(r["hooks"]), ", ".join(r["channels"]))
    _print(table)
    click.echo(f"store: {store}" + (f" (not opened: {unopened}; channels' bind and setup "
                                     "not checked)" if unopened else ""))
    click.echo(f"secret ruleset: {_ruleset_line(ruleset_info())}")
    for r in rows:
        for name, why in r["skipped"].items():
            click.echo(f"skipped channel {name} ({r['name']}): {why}")
    for problem in pm.problems:
        click.echo(f"broken: {problem}")
    from .harness.registry import conflicts

    for problem in conflicts(obj.settings):
        click.echo(f"broken: {problem}")


# a plain command: a hook exits 0 whatever it is given (the runner checks its input)
@cli.command(cls=click.Command, context_settings={"ignore_unknown_options": True})
@click.argument("harness")
@click.argument("event")
@click.argument("options", nargs=-1, type=click.UNPROCESSED)  # --tool-capture=TOOLS
def hook(harness: str, event: str, options: tuple[str, ...]) -> None:
    """Run HARNESS's EVENT hook: hook JSON on stdin, the harness's answer on stdout.

    Always exits 0 within MEMORY_HOOK_BUDGET_S (fail-open); outcomes go to the hook log that
    `memory-mcp doctor` reads."""
    from .harness.runner import main as run_hook

    sys.exit(run_hook([harness, event, *options]))


def _config_files(obj: Context, target: Any, uninstall: bool) -> tuple[Any, list[Any]]:
    """(the harness's adapter, or None when it is not installed, the files to edit). Without
    the adapter (its distribution uninstalled since) only uninstall runs: it takes out the
    entries install made that it finds in the target's folder (`orphan_files`: the
    `memory-mcp hook HARNESS` entries; opencode's plugin and `mcp.memory` entries)."""
    from .harness import install as inst
    from .harness.registry import all_adapters

    adapters = all_adapters(obj.settings)
    if target.harness in adapters:
        return adapters[target.harness], adapters[target.harness].config_files(target)
    known = ", ".join(sorted(adapters)) or "none installed"
    missing = f"no harness adapter named {target.harness!r} (installed: {known})"
    files = inst.orphan_files(target) if uninstall else []
    if not files:
        where = ""
        if uninstall and target.harness == inst.OPENCODE:
            where = f" and no plugin entry naming …/{inst.OPENCODE_PLUGIN} in " + ", ".join(
                str(p) for p in inst.opencode_config_paths(target.home, target.project_dir))
        elif uninstall:
            where = f" and no `memory-mcp hook {target.harness}` entry in {_searched(target)}"
        raise click.ClickException(missing + where)
    click.echo(f"{missing}: taking out {inst.orphan_entries(target.harness)}", err=True)
    return None, files


def _searched(target: Any) -> str:
    """Where uninstall looked for an uninstalled adapter's hooks (`install.orphan_files`): a
    project's config folders, or the user's, which CLAUDE_CONFIG_DIR, CODEX_HOME and
    KIMI_CODE_HOME may move out of the home folder (each named as it is set, or unset)."""
    from .harness import install as inst

    if target.project_dir is not None:
        return f"{target.project_dir}'s config folders"
    named = [f"{name} ({os.environ.get(name) or 'unset'})" for name in inst.CONFIG_HOME_VARS]
    return (f"{target.home}'s config folders or the folders "
            f"{', '.join(named[:-1])} and {named[-1]} name")


def _check_lasting(target: Any) -> None:
    """Refuse to write hook commands that point into a cache (`uvx`, `pipx run`): they fail
    once it is emptied; warn when they point into the temp folder."""
    from .harness import install as inst

    place = inst.transient_place(target.executable)
    if place is None:
        return
    kind, folder = place
    if kind == "temp":
        click.echo(f"warning: memory-mcp runs from the temp folder {folder} "
                   f"({target.executable}), which a reboot may empty: the hooks would then "
                   "fail (`memory-mcp doctor` says so)", err=True)
        return
    raise click.ClickException(
        f"memory-mcp runs from a cache ({target.executable}: uvx, `uv tool run` or `pipx "
        "run`), which `uv cache clean` empties, and the hooks would then fail on every "
        "prompt; install it to stay (`uv tool install semantic-memory-core --with "
        f"semantic-memory-sidecar`, docs/cli.md#install), then run `memory-mcp install "
        f"{target.harness}` — nothing was changed")


def _edit_configs(obj: Context, harness: str, project: str | None, dry_run: bool,
                  uninstall: bool, mcp: str = "proxy") -> None:
    from .harness import install as inst

    if project is not None and not Path(project).is_dir():
        raise click.BadParameter(f"{project} is not a directory", param_hint="--project")
    target = inst.make_target(harness, obj.settings, project_dir=project, mcp=mcp)
    adapter, files = _config_files(obj, target, uninstall)
    if not uninstall:
        _check_lasting(target)
    try:
        changes = inst.plan(files, uninstall=uninstall)
    except inst.InstallError as exc:
        raise click.ClickException(str(exc)) from None
    verb = "uninstall" if uninstall else "install"
    if not (uninstall or dry_run) and mcp == "proxy":  # an upgrade's install too
        from .service.mcp_front import fill_soon

        fill_soon(obj.settings)
    if not changes:
        click.echo(f"{harness}: nothing to {verb}: the config already says so")
        return
    if dry_run:
        for change in changes:
            click.echo(change.diff(), nl=False)
        click.echo(f"(dry run: {len(changes)} file(s) would change)", err=True)
        return
    try:
        backups = inst.apply(changes)
    except inst.InstallError as exc:  # a folder that cannot be written: nothing changed
        raise click.ClickException(str(exc)) from None
    for change in changes:
        done = "installed" if not uninstall else "updated" if change.after is not None \
            else "removed (nothing else was in it)"
        if change.restores is not None:
            done = f"restored as it was before install (its backup {change.restores.name} is gone)"
        click.echo(f"{done}: {change.path}")
    for backup in backups:
        click.echo(f"backup:  {backup}")
    for note in adapter.install_notes(target) if not uninstall else ():
        click.echo(note)


_scope_options = [
    click.option("--project", type=click.Path(file_okay=False),
                 help="This project's config instead of the user's."),
    click.option("--dry-run", is_flag=True, help="Print the diff; change nothing."),
]


@cli.command()
@click.argument("harness")
@_scope_options[0]
@_scope_options[1]
@click.option("--mcp", type=click.Choice(["proxy", "http", "stdio", "none"]), default="proxy",
              show_default=True,
              help="How the harness reaches the MCP tools: proxy (`memory-mcp proxy`, a stdio "
                   "server forwarding to the service with short timeouts), http (the service's "
                   "/mcp URL), stdio (`memory-mcp --stdio`, its own store and model) or none.")
@pass_context
def install(obj: Context, harness: str, project: str | None, dry_run: bool, mcp: str) -> None:
    """Wire HARNESS to the service: its hooks and the MCP server, merged into its config
    (idempotent; your other settings are kept; changed files are backed up)."""
    _edit_configs(obj, harness, project, dry_run, uninstall=False, mcp=mcp)


@cli.command()
@click.argument("harness")
@_scope_options[0]
@_scope_options[1]
@pass_context
def uninstall(obj: Context, harness: str, project: str | None, dry_run: bool) -> None:
    """Remove what `install` added to HARNESS's config (nothing else)."""
    _edit_configs(obj, harness, project, dry_run, uninstall=True)


@cli.command()
@click.option("--project", type=click.Path(exists=True, file_okay=False),
              help="Also check this project's harness configs (default: the current folder).")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def doctor(obj: Context, project: str | None, as_json: bool) -> None:
    """The wiring at a glance: service, embedder, each harness's hooks and MCP registration,
    the last success and failure of every hook. Exit code 1 when the service is down,
    refuses the token, or is up with its store unavailable or failing."""
    from .harness import doctor as doc
    from .harness.registry import all_adapters

    data = doc.report(obj.settings, all_adapters(obj.settings),
                      Path(project).resolve() if project else here())
    data["plugin_problems"] = diagnose(obj)
    if as_json:
        _echo_json(data)
    else:
        click.echo(doc.render(data))
        for problem in data["plugin_problems"]:
            click.echo(f"broken: {problem}")
    if not data["service"]["reachable"]:
        sys.exit(1)


@cli.command()
@click.argument("folder", default=".", type=click.Path(exists=True, file_okay=False))
@click.option("--revoke", is_flag=True, help="Take the approval back: the name is ignored again.")
@pass_context
def allow(obj: Context, folder: str, revoke: bool) -> None:
    """Let FOLDER's .semantic-memory.toml name the project (default: this folder).

    A repository's file may name a project other than the detected one (its remote, else
    its top folder); hooks, proxy and opencode plugin use that name only once you allow
    the file with that name here, so a cloned repository cannot read or fill the memories
    of a project of yours it names. A changed name needs a new allow."""
    from .harness import repo_config

    approvals = repo_config.approvals_file(obj.settings)
    if not os.path.isabs(folder):
        here()  # a folder deleted under the shell: one line, not "unreadable"
    try:
        done = (repo_config.revoke if revoke else repo_config.allow)(folder, approvals)
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(done)


@cli.group(invoke_without_command=True)
@click.pass_context
def spool(ctx: click.Context) -> None:
    """The write spool: what hooks could not hand to the service in time (see `list`)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(spool_list)


def _ago(ts: float | None) -> str:
    if ts is None:
        return "-"
    import time

    seconds = max(time.time() - ts, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def _spooled_row(file: Path, record: dict[str, Any] | None) -> dict[str, Any]:
    """One spooled write as `spool list` shows it. The spool keeps the text as given (the
    service redacts it on replay); its preview is what would be stored, private text out and
    secrets redacted before the cut, as every other view of memories shows them."""
    from .private import strip_private
    from .safety.redaction import redact

    if record is None:
        return {"file": file.name, "error": "unreadable"}
    body = record["body"]
    items = body.get("items") if isinstance(body.get("items"), list) else [body]
    first = next((str(i.get("content", "")) for i in items if isinstance(i, dict)), "")
    preview = " ".join(redact(strip_private(first)).split())[:70]
    reason = record.get("rejected")  # an error body that quoted the write (before it was redacted)
    return {"file": file.name, "ts": record.get("ts"), "harness": record.get("harness"),
            "event": record.get("event"), "memories": len(items), "preview": preview,
            "rejected": redact(reason) if isinstance(reason, str) else reason}


@spool.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def spool_list(obj: Context, as_json: bool) -> None:
    """The writes waiting in the spool, oldest first, and those the service refused."""
    from . import spool as queue

    folder = obj.settings.spool_path
    waiting = [_spooled_row(f, r) for f, r in queue.records(folder)]
    refused = [_spooled_row(f, r) for f, r in queue.records(folder / queue.REJECTED)]
    if as_json:
        _echo_json({"path": str(folder), "pending": waiting, "rejected": refused})
        return
    depth = queue.depth(folder)
    click.echo(f"spool {folder}: {depth.count} write(s) waiting"
               + (f", the oldest from {_ago(depth.oldest)}" if depth.count else "")
               + (f"; {depth.rejected} refused by the service" if depth.rejected else ""))
    for title, rows in (("waiting", waiting), ("refused", refused)):
        if not rows:
            continue
        table = _table(title, "from", "memories", "first memory" if title == "waiting"
                       else "reason")
        for r in rows:
            origin = f"{r.get('harness') or '?'} {r.get('event') or ''}"
            # an unreadable file says so where its text or reason would be
            last = r.get("error") or r.get("preview" if title == "waiting" else "rejected")
            _add_row(table, _ago(r.get("ts")), origin, str(r.get("memories", "?")),
                     str(last or ""))
        _print(table)


@spool.command("replay")
@pass_context
def spool_replay(obj: Context) -> None:
    """Hand the waiting writes to the service now (into the store directly when no service
    answers). Exit code 1 when some are still waiting."""
    import time

    from . import spool as queue
    from .harness.client import ServiceClient, ServiceUnavailable, resolve_address, spool_sender

    settings = obj.settings
    url, _, store = resolve_address(settings)
    service = ServiceClient(url, time.monotonic() + 60, settings.plugin_token or settings.token,
                            store=store)
    try:
        try:
            service.request("GET", "/health", deadline=time.monotonic() + 2)
            done = queue.replay(settings.spool_path, spool_sender(service))
            where = f"the service at {url}"
        except ServiceUnavailable:
            from .service.spool_replay import drain

            done = drain(obj.engine, settings)
            where = f"the store ({obj.settings.resolved_db_path})"
    except queue.Stuck as exc:  # not this user's folder: nothing was taken from it
        waiting = queue.depth(settings.spool_path).count
        raise click.ClickException(f"{exc}; {waiting} write(s) still waiting") from None
    click.echo(f"replayed {done.sent} write(s) into {where}"
               + (f"; {done.rejected} refused (`memory-mcp spool list`)" if done.rejected else "")
               + (f"; {done.left} still waiting" if done.left else "")
               + (f" ({done.why})" if done.left and done.why else ""))
    if done.left:
        sys.exit(1)


@spool.command("clear")
@click.option("--rejected", "rejected_too", is_flag=True,
              help="Also delete the writes the service refused.")
@click.option("--yes", is_flag=True, help="Confirm: the writes are deleted, not stored.")
@pass_context
def spool_clear(obj: Context, rejected_too: bool, yes: bool) -> None:
    """Delete the waiting writes without storing them."""
    from . import spool as queue

    folder = obj.settings.spool_path
    depth = queue.depth(folder)
    count = depth.count + (depth.rejected if rejected_too else 0)
    if not yes:
        raise click.UsageError(f"this deletes {count} spooled write(s) unstored; "
                               "add --yes to confirm")
    click.echo(f"deleted {queue.clear(folder, rejected_too)} spooled write(s)")


def progress_bar() -> Any:
    """A transient progress bar on stderr (`with progress_bar() as p: p.add_task(...)`);
    plugin commands use it too."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    # Off where stderr is no terminal: a transient bar still left an empty line in a log.
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), console=console, transient=True,
                    disable=not console.is_terminal)


#: Bytes a JSON line may hold beyond 12 per content character (the most: an astral character
#: written as two \uXXXX escapes), for its other fields.
LINE_SLACK = 1 << 20
#: How much of an oversized line is read at a time while it is skipped.
SKIP_CHUNK = 1 << 20
#: Fields that, beside `type`, mark a line of a harness's session transcript (Claude Code's
#: `~/.claude/projects/*/*.jsonl`, a Codex rollout, a Kimi Code wire file): no import format.
TRANSCRIPT_FIELDS = {"sessionId": "Claude Code", "parentUuid": "Claude Code",
                     "leafUuid": "Claude Code", "payload": "Codex",
                     "protocol_version": "Kimi Code", "agentId": "Kimi Code"}


def _line_cap(max_chars: int) -> int:
    """The longest JSON line read whole: any content the store takes fits, escaped at worst."""
    return 12 * max_chars + LINE_SLACK


def _json_lines(handle: BinaryIO, cap: int) -> Iterator[bytes | None]:
    """Each line of HANDLE, or None for one over CAP bytes: its rest is read in chunks and
    dropped undecoded, so one huge line is never held whole."""
    while chunk := handle.readline(cap + 1):
        if len(chunk) <= cap or chunk.endswith(b"\n"):
            yield chunk
            continue
        while (rest := handle.readline(SKIP_CHUNK)) and not rest.endswith(b"\n"):
            pass
        yield None


def _line_count(handle: BinaryIO) -> int | None:
    """The lines left in HANDLE if it is a regular file (for the bar's total; the handle is put
    back where it was), else None: a pipe or a FIFO is read once, by the import."""
    import stat

    try:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        start = handle.tell()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    count, last = 0, b"\n"
    while block := handle.read(SKIP_CHUNK):  # in blocks: a line may be any length
        count += block.count(b"\n")
        last = block[-1:]
    handle.seek(start)
    return count + (last != b"\n")


def _transcript_of(raw: bytes) -> str | None:
    """The harness whose session transcript RAW is a line of, or None."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or "type" not in data:
        return None
    return next((name for field, name in TRANSCRIPT_FIELDS.items() if field in data), None)


def _record(raw: bytes) -> NewMemory:
    """One JSON line -> NewMemory; raises ValueError with a one-line reason."""
    try:
        line = raw.decode("utf-8-sig")  # a BOM, as Windows editors write one, is no JSON
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:  # "Unterminated string starting at": no "at at column"
        reason = exc.msg.removesuffix(" at")
        raise ValueError(f"malformed JSON ({reason} at column {exc.colno})") from None
    except RecursionError:  # thousands of nested brackets: a bad line, not the whole import
        raise ValueError("malformed JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    unknown = set(data) - {*EXPORT_FIELDS, "forgotten", "superseded_by"}
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(sorted(unknown))}")
    if "content" not in data:
        raise ValueError("content: missing")
    times = {}
    for name in ("created_at", "updated_at"):
        value = data.get(name)
        try:
            times[name] = parse_time(value) if value is not None else None
        except (TimeOutOfRange, UnclearDuration) as exc:  # their message is the reason
            raise ValueError(f"{name}: {exc}") from None
        except (ValueError, TypeError, AttributeError, OverflowError):
            raise ValueError(f"{name}: cannot read {value!r} as a time") from None
    project = data.get("project")
    if isinstance(project, str):  # "" (or blank): a global memory, as `store --project ""`
        project = project_name(project) or None
    return NewMemory(
        content=data["content"], kind=data.get("kind", "fact"),
        source=data.get("source", "import"), project=project,
        tags=data.get("tags", []), session=data.get("session"), uid=data.get("uid"),
        forgotten=data.get("forgotten", False), seq=data.get("seq"),
        superseded_by=data.get("superseded_by"), **times,
    )


@contextmanager
def _open_input(path: str) -> Iterator[BinaryIO]:
    if path == "-":
        yield stdin_bytes()
    else:
        with open(path, "rb") as handle:
            yield handle


@cli.command("import")
@click.argument("path", type=click.Path(allow_dash=True))
@click.option("--project", "project_dir", type=click.Path(file_okay=False),
              help="Markdown imports: the project folder (default: the current one).")
@click.option("--dry-run", is_flag=True,
              help="Markdown imports: show what would be stored, updated or forgotten.")
@click.option("--json", "as_json", is_flag=True, help="Markdown imports: print JSON.")
@pass_context
def import_(obj: Context, path: str, project_dir: str | None, dry_run: bool,
            as_json: bool) -> None:
    """Import memories from a JSON-lines file ('-' = standard input), from what an agent
    already remembers (PATH = claude-code, codex, opencode or kimi-code), or from markdown
    notes (PATH = a directory, or one .md file; `./codex` for a folder named like a harness).

    JSON lines: {"content", "kind", "source", "project", "tags", "created_at"}; an `export`
    line also brings its uid, updated_at and forgotten state, so a backup restores the same
    memories (a uid already stored is left as it is). Bad lines are reported with their number
    and skipped; the exit code is 1 if any line was bad.

    Markdown: one memory per section or bullet; a second run changes nothing, a changed file
    updates its memories in place, a section gone from a file is forgotten (docs/cli.md).
    """
    from .importers import HARNESS_NAMES

    if path in HARNESS_NAMES or (path != "-" and (Path(path).is_dir() or _is_markdown(path))):
        _import_markdown(obj, path, project_dir, dry_run, as_json)
        return
    if project_dir or dry_run or as_json:
        raise click.ClickException("--project, --dry-run and --json are for markdown imports "
                                   "(a harness name or a folder), not JSON lines")
    engine = obj.engine
    # An import never waits for a model: vectors follow in the service's embedding queue.
    engine.writer.defer = engine.settings.embed_background
    counts = {"new": 0, "duplicate": 0, "rejected": 0, "bad": 0}
    cap = _line_cap(engine.settings.max_content_chars)
    batch: list[tuple[int, NewMemory]] = []

    def flush() -> None:
        # A file is cut into batches for the transactions, not by meaning: lines are kept in
        # order only within the session a line names (an export's lines do). A Ctrl-C waits
        # for the batch to be counted: one during its COMMIT left it stored and uncounted,
        # and the summary and `interrupted_at_line` a batch behind.
        with interrupt_deferred():
            results = engine.ingest([item for _, item in batch], batch_is_session=False)
            for (number, _), result in zip(batch, results):
                counts[result.status] += 1
                if result.status == "rejected":
                    click.echo(f"line {number}: rejected: {result.reason}", err=True)
            batch.clear()

    def bad(number: int, reason: str) -> None:
        counts["bad"] += 1
        if counts["bad"] <= SHOWN_BAD_LINES:  # a file of junk gave one line per "line"
            click.echo(f"line {number}: {reason}", err=True)

    # `read`: the lines counted or in the batch; a transcript is told before any good line
    number, read, seen_good = 0, 0, False
    try:
        # Opened once: a pipe (`<(zcat x.gz)`) or a FIFO read twice gave nothing or hung.
        with _open_input(path) as handle, progress_bar() as progress:
            total = None if progress.disable else _line_count(handle)
            task = progress.add_task("importing", total=total)
            for number, line in enumerate(_json_lines(handle, cap), start=1):
                progress.advance(task)
                read = number - 1
                if number == 1 and (binary := _binary_format(line or b"")) is not None:
                    raise click.ClickException(_binary_refusal(path, binary))
                if line is None:
                    bad(number, f"longer than {cap} bytes (content is at most "
                                f"{engine.settings.max_content_chars} characters): skipped")
                    read = number
                    continue
                if not line.strip():
                    read = number
                    continue
                try:
                    item = _record(line)
                    validate(item, engine.settings.max_content_chars)
                except (ValueError, InvalidMemory) as exc:
                    if not seen_good and (harness := _transcript_of(line)):
                        raise click.ClickException(_transcript_refusal(path, harness, number))
                    bad(number, str(exc))
                    read = number
                    continue
                seen_good = True
                batch.append((number, item))
                read = number
                if len(batch) >= IMPORT_BATCH:
                    flush()
            if batch:
                flush()
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror}") from None
    except KeyboardInterrupt:
        # A batch is one transaction: the one cut short is not stored, the ones before are.
        # Every line up to `read` is counted or in the batch; the batch is not stored.
        _more_bad_lines(counts["bad"])
        _echo_json({**counts, "interrupted_at_line": batch[0][0] if batch else read + 1})
        raise Interrupted(f"{counts['new']} new memories are stored; importing the same file "
                          "again stores the rest (what is stored counts as duplicate)") from None
    _more_bad_lines(counts["bad"])
    # A `superseded_by` naming no live memory is cleared (it hid what was imported), and a
    # bulk import's index segments are merged when it is a real share of the store.
    try:
        if current_again := engine.finish_import(counts["new"], IMPORT_BATCH):
            counts["current_again"] = current_again
    except KeyboardInterrupt:
        _echo_json(counts)
        raise Interrupted(f"every line was read and {counts['new']} new memories are stored; "
                          "the index merge after them did not finish (a later import or "
                          "purge merges it)") from None
    _echo_json(counts)
    if engine.writer.defer and engine.writer.deferrable() and (waiting := engine.writer.pending()):
        click.echo(f"{waiting} memories wait for their vectors: the service embeds them in the "
                   "background (or run `memory-mcp backfill`)", err=True)
    if counts["bad"]:
        sys.exit(1)


#: The bad lines `import` names one by one; the rest are counted (`_more_bad_lines`).
SHOWN_BAD_LINES = 20
#: The first bytes of a file that is no JSON lines: a SQLite db (a `backup`), compressed.
BINARY_FORMATS = ((b"SQLite format 3\x00", "sqlite"), (b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"),
                  (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"PK\x03\x04", "zip"))
#: How to read a compressed file into `import`.
UNPACK = {"gzip": "zcat", "bzip2": "bzcat", "xz": "xzcat", "zstd": "zstdcat", "zip": "unzip -p"}


def _binary_format(start: bytes) -> str | None:
    """The format a file starting with `start` is in, when it is one `import` cannot read."""
    return next((name for magic, name in BINARY_FORMATS if start.startswith(magic)), None)


def _binary_refusal(path: str, binary: str) -> str:
    """The one line refusing a store or a compressed file given to `import FILE`."""
    name = "standard input" if path == "-" else path
    shown = "FILE" if path == "-" else path
    if binary == "sqlite":
        return (f"{name} is a SQLite store (a `memory-mcp backup`?), not JSON lines: put it back "
                f"with `memory-mcp restore {shown}`; nothing was stored")
    return (f"{name} is {binary}-compressed, not JSON lines: decompress it first (`memory-mcp "
            f"import <({UNPACK[binary]} {shown})`); nothing was stored")


def _more_bad_lines(bad: int) -> None:
    if bad > SHOWN_BAD_LINES:
        click.echo(f"… and {bad - SHOWN_BAD_LINES} more bad lines, not shown", err=True)


def _transcript_refusal(path: str, harness: str, number: int) -> str:
    """The one line refusing a session transcript given to `import FILE`."""
    name = "standard input" if path == "-" else path
    return (f"{name} is a {harness} session transcript (line {number}), not memories to import: "
            "the hooks store each session as it ends (docs/harnesses.md); `import` reads JSON "
            "lines as `export` writes them; nothing was stored")


def _is_markdown(path: str) -> bool:
    """A markdown notes file (the rest of what is not a folder or a harness is JSON lines)."""
    return Path(path).suffix.lower() in (".md", ".markdown") and Path(path).is_file()


def _import_markdown(obj: Context, path: str, project_dir: str | None, dry_run: bool,
                     as_json: bool) -> None:
    """`import claude-code|codex|opencode|kimi-code|DIR`: markdown into memories."""
    from .harness.project import find_repository
    from .harness.repo_config import approvals_file, load_repo_config, project_for
    from .importers import HARNESS_NAMES, ImportFailed, folder_files, harness_files, \
        harness_reads, harness_scopes, iter_actions, note_file, run_import

    root = Path(project_dir).expanduser().resolve() if project_dir else here()
    if project_dir and not root.is_dir():
        raise click.ClickException(f"--project: no folder {project_dir}")
    # the name the hooks and `doctor` use: MEMORY_PROJECT, the repository file's if allowed in
    # the approvals beside this db (--db's, not the environment's), detected
    repo = load_repo_config(root, approvals_file(obj.settings))
    project = project_for(root, repo, obj.settings.project)
    reads = None
    if path in HARNESS_NAMES:  # a project's files are its checkout's top folder's
        top = find_repository(root)[0] or root
        files, scopes = harness_files(path, top, project), harness_scopes(path, project)
        reads = harness_reads(path, top, project)
    elif _is_markdown(path):  # one notes file: as its folder's import takes it, the rest kept
        file = Path(path).expanduser().resolve()
        files, scopes = [note_file(file.parent, file, project if project_dir else None)], []
    else:
        folder = Path(path).expanduser().resolve()
        files = folder_files(folder, project if project_dir else None)
        scopes = [f"folder:{folder}"]
    try:
        with progress_bar() as bar:  # thousands of notes take a while (shown on a terminal)
            task = bar.add_task("importing markdown", total=len(files))
            reports = run_import(obj.engine, files, scopes, dry_run=dry_run, reads=reads,
                                 progress=lambda done, _: bar.update(task, completed=done))
    except ImportFailed as exc:
        raise click.ClickException(str(exc)) from None
    totals = {key: sum(r.counts[key] for r in reports) for key in reports[0].counts} \
        if reports else {}
    if as_json:
        _echo_json({"dry_run": dry_run, "totals": totals,
                    "files": [{"path": r.label, "project": r.project, **r.counts,
                               "actions": r.actions}
                              for r in reports]})
        return
    if not reports:
        click.echo(f"nothing to import: no markdown found for {path}")
        return
    for report in reports:  # file names and previews of their text: shown, never obeyed
        into = f"project {report.project}" if report.project else "global"
        click.echo(shown_on_terminal(f"{report.label}: " + (", ".join(
            f"{n} {k}" for k, n in report.counts.items() if n) or "empty") + f" ({into})"))
        for line in iter_actions([report]):  # a real run says why a section was refused
            if dry_run or line.lstrip().startswith("rejected"):
                click.echo(shown_on_terminal(line), err=not dry_run)
    prefix = "would be (dry run): " if dry_run else "total: "
    click.echo(prefix + ", ".join(f"{n} {k}" for k, n in totals.items()))


@cli.command()
@click.option("-o", "--output", type=click.Path(allow_dash=True), default="-", help="Output file ('-' = standard output).")
@click.option("--include-deleted", is_flag=True, help="Also export forgotten memories.")
@click.option("--markdown", "markdown_dir", type=click.Path(file_okay=False),
              help="Write one markdown file per project into this folder instead (a person "
                   "can edit it; `import DIR` reads it back and updates in place).")
@pass_context
def export(obj: Context, output: str, include_deleted: bool, markdown_dir: str | None) -> None:
    """Export memories as JSON lines (the format `import` reads; a round trip keeps uids,
    timestamps and, with --include-deleted, forgotten memories), or as markdown."""
    if output != "-":  # a JSON-lines file renamed over the db would replace every memory
        from .backup import sqlite_file, store_file_named

        db = sqlite_file(obj.settings)
        if db is not None and (own := store_file_named(output, db)) is not None:
            raise click.ClickException(f"{output} is the store's own file {own.name}: "
                                       "export to another file")
    engine = obj.engine
    if markdown_dir is not None:
        from .importers import export_markdown

        if not markdown_dir.strip():
            raise click.BadParameter("give a folder", param_hint="--markdown")

        if include_deleted or output != "-":
            raise click.ClickException("--markdown writes live memories to a folder: "
                                       "no --output or --include-deleted")
        try:
            # each file as `export -o` writes one: beside it, fsynced, renamed over it
            written = export_markdown(engine, Path(markdown_dir).expanduser(), _open_output)
        except KeyboardInterrupt:
            raise Interrupted(f"each file in {markdown_dir} is whole: this export's, or as it "
                              "was before") from None
        except OSError as exc:
            raise click.ClickException(f"cannot write {exc.filename or markdown_dir}: "
                                       f"{exc.strerror}") from None
        for file, count in written:
            click.echo(f"{file}: {count} memories")
        return
    # the live memories, superseded ones included: the export writes those too
    total = engine.count(RecallFilters(include_superseded=True)) if not include_deleted else None
    earlier = _identity(output)
    try:
        with _open_output(output) as handle, progress_bar() as progress:
            task = progress.add_task("exporting", total=total)
            for record in engine.export(include_deleted):
                handle.write(to_json(record) + "\n")
                progress.advance(task)
    except KeyboardInterrupt:
        if output == "-":
            raise Interrupted("the export on standard output is incomplete") from None
        raise Interrupted(_file_cut_short(output, earlier, "the export")) from None
    except BrokenPipeError:
        raise  # the reader went away (`| head -1`): `main` ends quietly
    except OSError as exc:
        raise click.ClickException(f"cannot write {'standard output' if output == '-' else output}"
                                   f": {exc.strerror or exc}") from None


def _identity(path: str | Path) -> tuple[int, int, int] | None:
    """Which file is at `path` now (through links), or None: a file renamed over it is
    another."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return found.st_dev, found.st_ino, found.st_mtime_ns


def _file_cut_short(path: str | Path, earlier: tuple[int, int, int] | None, what: str) -> str:
    """What a command interrupted did to the file it writes whole, then renames into place."""
    if _identity(path) != earlier:  # the rename was done: the interrupt came after it
        return f"{what} had been written to {path}, whole"
    if earlier is None:
        return f"nothing was written: {path} was not created"
    return f"nothing was written: {path} is as it was"


@contextmanager
def _open_output(path: str) -> Iterator[Any]:
    """A text file to write (standard output for '-'), flushed before it counts as written:
    a full disk fails here, with the export, not at exit. A file is written beside its target
    and renamed over it once whole, so a failed or interrupted export leaves the earlier one
    (often the last good backup) as it was."""
    if path == "-":
        stdout = stdout_text()
        yield stdout
        stdout.flush()
        return
    target = Path(os.path.realpath(path))  # through a link, as open() would write
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            # The earlier file's mode (the user's choice); a new file stays mkstemp's 0600:
            # it holds every memory, as the store does.
            if target.exists():
                os.chmod(fd, target.stat().st_mode & 0o7777)
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:  # a full disk, a store error, Ctrl-C: no half file is left behind
        Path(temp).unlink(missing_ok=True)
        raise


@cli.command()
@click.option("--to", "target", required=True, metavar="URL",
              help="The empty store to copy into: postgresql://…, sqlite:///path or a file path.")
@pass_context
def migrate(obj: Context, target: str) -> None:
    """Copy this store (MEMORY_DB_URL or --db) into the empty store at URL, then check the
    counts. Memories keep uids, timestamps, forgotten state and sessions; injection reports
    come along. Exits 1 if anything did not arrive."""
    from dataclasses import replace

    from .migrate import MigrationError
    from .migrate import migrate as copy_store

    source = obj.engine
    if "://" not in target:  # a file path, the user's, relative to where they are (as --db)
        target = "sqlite:///" + os.path.abspath(os.path.expanduser(target))
    try:
        destination = MemoryEngine(replace(obj.settings, db_url=target))
    except ConfigError as exc:
        raise BadSettings(str(exc)) from None
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        total = source.counts()
        with progress_bar() as progress:
            task = progress.add_task("migrating", total=total["memories"] + total["forgotten"])
            result = copy_store(source, destination, lambda n: progress.advance(task, n))
    except MigrationError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        raise Interrupted(_migrate_cut_short(destination)) from None
    finally:
        destination.close()
    _echo_json(result)


def _migrate_cut_short(target: MemoryEngine) -> str:
    """What a migrate interrupted left in its target: a SQLite one is filled in one
    transaction from a checked copy, or not at all; a server's is written in place."""
    from .migrate import START_AGAIN

    where = target.store.location
    try:
        filled = any(target.counts().values())
    except (StoreError, sqlite3.Error):
        filled = True
    if not filled:
        return f"nothing was written to {where}: it is as it was; migrate again to copy"
    if isinstance(target.store, SQLiteStore):
        return (f"the copy had arrived in {where}, whole (checked before it was written); "
                "its summary was not printed")
    return f"{where} may hold part of the copy: {START_AGAIN}"


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@pass_context
def backup(obj: Context, file: str) -> None:
    """Copy the SQLite store to FILE, consistent while the service runs and writes: written
    beside FILE, checked, then renamed into place (0600). `restore FILE` puts it back."""
    from .backup import BackupError, backup as copy_store, store_path

    earlier = _identity(file)
    try:
        copy = copy_store(store_path(obj.settings, "backup"), Path(file))
    except KeyboardInterrupt:
        raise Interrupted(_file_cut_short(file, earlier, "the backup")) from None
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {file}: {exc.strerror or exc}") from None
    click.echo(f"backed up {copy.memories} memories to {copy.path} ({_mb(copy.size)}, "
               "checked)")
    if copy.cleared_note:
        click.echo(copy.cleared_note, err=True)


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@pass_context
def restore(obj: Context, file: str) -> None:
    """Replace the SQLite store with a copy of the backup FILE, the service stopped: the
    current db is kept as memory.db.before-restore, its -wal and -shm are removed."""
    from .backup import BackupError, restore as put_back, store_path

    if "://" in file:  # a Path would make "postgresql://…" a folder's name
        raise click.ClickException(f"{file} is a URL: restore takes a backup file of a "
                                   "SQLite store (`memory-mcp backup FILE` makes one)")
    try:
        db = store_path(obj.settings, "restore")
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    earlier = _identity(db)
    try:
        copy, kept = put_back(obj.settings, db, Path(file))
    except KeyboardInterrupt:  # the renames that swap the store in are done whole, or not
        raise Interrupted(f"nothing was restored: the store {db} is as it was"
                          if _identity(db) == earlier else
                          f"the restore was done: {db} holds {file}'s memories now") from None
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot restore {file}: {exc.strerror or exc}") from None
    click.echo(f"restored {copy.memories} memor{'y' if copy.memories == 1 else 'ies'} from "
               f"{file} into {copy.path}"
               + (f"; the earlier store is kept as {kept}" if kept else ""))
    if copy.cleared_note:
        click.echo(copy.cleared_note, err=True)


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def add_plugin_commands(pm: PluginManager, group: click.Group) -> None:
    """Each plugin's `register_commands` on its own: one that raises is refused in one line
    and whatever it added is taken back; a command that would replace a core command, or one
    an earlier plugin added, is refused and the earlier one kept."""
    core = set(group.commands)
    owners: dict[str, str] = {}
    for plugin, call in reversed(list(pm.calls("register_commands", cli=group))):
        before = dict(group.commands)  # registration order: the earlier plugin keeps a name
        try:
            call()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - left out, not fatal
            group.commands.clear()
            group.commands.update(before)
            pm.refuse(pm.origin(plugin), f"register_commands failed: {one_line(exc)}; its "
                                         "commands are left out")
            continue
        for name, command in before.items():
            if group.commands.get(name) is not command:
                group.commands[name] = command
                taken = "a core command" if name in core else \
                    f"a command of {pm.origin(owners[name])}"
                pm.refuse(pm.origin(plugin), f"command {name!r} refused: it is {taken}")
        for name in group.commands.keys() - before.keys():
            owners[name] = plugin


def _unicode_safe_output() -> None:
    """Standard output and error that never fail on a character (a CJK memory, "…") their
    encoding lacks, which cost the answer and printed a traceback. A pipe or file (a Windows
    redirect is cp1252) gets UTF-8: nothing lost, what git or ripgrep write there, and what
    Python's own UTF-8 mode (the default from 3.15, PEP 686) gives. A terminal keeps its own
    encoding, which it displays, with "?" for what it cannot show (docs/multilingual.md)."""
    for stream in (sys.stdout, sys.stderr):
        if not isinstance(stream, io.TextIOWrapper) or _writes_everything(stream.encoding):
            continue
        try:
            terminal = stream.isatty()
        except ValueError:  # closed
            continue
        if terminal:
            stream.reconfigure(errors="replace")
        else:
            stream.reconfigure(encoding="utf-8", errors=stream.errors)


def _writes_everything(encoding: str) -> bool:
    """Whether `encoding` writes every character (UTF-8/16/32, GB 18030; not cp1252 or
    latin-1)."""
    name = codecs.lookup(encoding).name
    return name.startswith("utf") or name == "gb18030"


#: The commands that run when MEMORY_PLUGINS names a plugin that is not installed: those that
#: say what is wrong (every other one stops with exit code 2). `--help` and `--version` too.
DIAGNOSING_COMMANDS = frozenset({"doctor", "plugins"})


def _command_of(args: list[str]) -> str | None:
    """The subcommand `args` (sys.argv[1:]) run, past the group's own options."""
    rest = iter(args)
    for arg in rest:
        if arg == "--db":
            next(rest, None)
        elif not arg.startswith("-"):
            return arg
    return None


def _diagnoses(args: list[str]) -> bool:
    """Whether `args` only show what is wrong, or help: they run on an unmet MEMORY_PLUGINS."""
    return "--help" in args or "--version" in args or _command_of(args) in DIAGNOSING_COMMANDS


def main() -> None:
    """Load plugin commands, then run (`semantic_memory.entry` sends `hook` elsewhere). The
    plugin manager built here is the one every command uses (`Context.pm`)."""
    _unicode_safe_output()
    try:
        settings = Settings.from_env()
        pm = build_plugin_manager(settings)
    except ConfigError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    if pm.unmet_allowlist:  # a plugin uninstalled since: say how to see it, or stop
        if not _diagnoses(sys.argv[1:]):
            click.echo(f"Error: {pm.unmet_allowlist}", err=True)
            sys.exit(2)
        click.echo(f"Warning: {pm.unmet_allowlist}", err=True)
    add_plugin_commands(pm, cli)
    try:
        try:
            cli(obj=pm)
        except SystemExit:
            flush_stdout()  # what is still buffered: a reader gone now ends quietly too
            raise
    except ReaderGone:  # `| head -1`: every command stops here, exit code 0, no message
        reader_gone()
        sys.exit(0)
    except FileNotFoundError:  # a relative path, read in a folder deleted under the shell
        if working_folder() is not None:
            raise
        click.echo(f"Error: {FolderGone().message}", err=True)
        sys.exit(FolderGone.exit_code)
    except StoreError as exc:  # locked out, read-only, a full disk, a server gone: its words
        click.echo(f"Error: {' '.join(str(exc).split()) or type(exc).__name__}", err=True)
        sys.exit(1)
    except sqlite3.DatabaseError as exc:  # found mid-command: a damaged file, a full disk
        click.echo(f"Error: {sqlite_problem(exc)}", err=True)
        sys.exit(1)
