"""The base of every harness adapter: what a hook does, whatever the harness.

An adapter subclasses `HarnessAdapter`, names its harness, maps the harness's hook events to
the four actions below and says how to read the harness's hook input and write its output:

- `session_start`: recall for the session's last user message (if any) and inject.
- `prompt`: a prompt starting with "remember" becomes an explicit memory; any other prompt is
  a recall, and what clears the relevance bar is injected.
- `compact`: store the turns compaction is about to drop (`source=compaction`).
- `tool`: store a compact record of an allow-listed tool's output (`source=tool`).

Recall, relevance, per-session dedup and hygiene all happen in the service; an adapter only
translates. Every run ends in one outcome (`HookCall.done`) that the runner logs.
"""

from __future__ import annotations

import os
import time

from ..lite import dumps, loads_input, replace_private
from ..private import CARRY_MESSAGES, NO_CARRY, carry_private, strip_private, strip_private_from
from ..sources import FLUSH_SOURCE, TOOL_SOURCE
from ..tag_chars import LESS_THAN
from .client import ServiceFailed, ServiceUnavailable, retryable
from .project import harness_path
from .settings import beside_db
from .transcript import (
    Turn,
    clean,
    count_in_file,
    flush_items,
    last_line_offset,
    last_user_text,
    memories_of,
    read_jsonl,
    read_jsonl_reversed,
    remembered,
    unquote,
)

# No typing, dataclasses, functools or pathlib at run time: a hook process imports this module
# (docs/harnesses.md, "What the hooks cost").
TYPE_CHECKING = False
if TYPE_CHECKING:  # install.py is for the CLI; a hook process does not import it
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from typing import Any, ClassVar

    from ..config import Settings
    from ..private import Carry
    from .client import ServiceClient
    from .install import ConfigFile, InstallTarget
    from .repo_config import RepoConfig
    from .settings import HookSettings

#: Longest query sent to /recall (a pasted log is not a better query for being longer).
QUERY_CHARS = 2_000
#: Longest tool output kept in a capture record (head and tail of longer ones).
CAPTURE_CHARS = 2_000
#: Compaction chunks per /ingest request (an exchange sent whole counts as its pieces), and
#: at most this many per flush (the newest).
FLUSH_BATCH = 500
#: Recalls a hook asks again, each for a block shorter by what escaping the harness's tags
#: added past its cap (`max_context_chars`), before it injects nothing rather than a cut block.
CAP_RETRIES = 3
FLUSH_MAX = 5_000

#: Seconds of a hook's budget a write leaves for spooling when the service does not answer.
SPOOL_MARGIN_S = 0.15
#: The most of a refusal's reason the model is told with a "remember" not stored.
REASON_CHARS = 300
#: What the model is told of a "remember" kept in the spool: the service down, slow or hung,
#: or its store refusing writes for now (a read-only role), so not "when it is back".
WILL_STORE = ("semantic-memory will store this as a memory as soon as its service can take it; "
              "it does not need to be stored again.")


class ToolCall:
    """One tool call a hook saw: the tool's name, its input and its output as text."""

    __slots__ = ("name", "input", "output")

    def __init__(self, name: str, input: Any, output: str) -> None:  # noqa: A002
        self.name, self.input, self.output = name, input, output

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return NotImplemented
        return (self.name, self.input, self.output) == (other.name, other.input, other.output)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    def __repr__(self) -> str:
        return f"ToolCall(name={self.name!r}, input={self.input!r}, output={self.output!r})"


_UNSET = object()


class AdapterReads:
    """What the adapter's own methods said in one hook run, each asked once, and which one
    runs now. The runner's watchdog and its timeout path read only these answers, never the
    adapter again: a method that hangs (a plugin's `prompt` waiting on something) was asked
    three times, once more inside the signal handler, and a 1.5 s hook ran for 16 s. `running`
    names the method the budget ran out in, for the hook log; it stays set when the method
    raised or was stopped."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.running: str | None = None

    def ask(self, method: str, read: Callable[..., Any], *args: Any, once: bool = True) -> Any:
        """`read(*args)`, the adapter's `method`; its first answer again when `once`."""
        if once and method in self.answers:
            return self.answers[method]
        self.running = method
        value = read(*args)
        self.running = None
        if once:
            self.answers[method] = value
        return value

    def said(self, method: str) -> Any:
        """What `method` answered; `_UNSET` when it has not (yet)."""
        return self.answers.get(method, _UNSET)


class HookCall:
    """One run of a hook: the harness's input, and what an adapter needs to answer it.

    `outcome`/`detail` end up in the hook log; `pending` holds the /ingest bodies of a write
    not yet stored or spooled (the runner spools them if the budget runs out mid-request);
    `spooled`/`spool_reason` count the writes of this run that went to the spool; `unwritten`
    the memories that went nowhere, their spooling cut by `write_until` (the budget's end
    plus its write grace) or failed (`lost` says why: a full disk); `wrote` says this run's
    writes were all made; `warning` is a
    problem worth a line in the hook log whatever the outcome (a malformed repo file);
    `report` is the /inject/report body of what this run injected, posted by the runner
    after the answer is printed."""

    def __init__(self, harness: str, event: str, payload: dict[str, Any],
                 settings: Settings | HookSettings, service: ServiceClient, cwd: str,
                 session: str | None = None, agent_session: str | None = None,
                 debug: Callable[[str], None] = lambda message: None, outcome: str = "skipped",
                 detail: str = "", pending: list[dict[str, Any]] | None = None,
                 spooled: int = 0, spool_reason: str = "", warning: str = "",
                 write_until: float | None = None, reads: AdapterReads | None = None) -> None:
        self.harness, self.event, self.payload = harness, event, payload
        #: The adapter's answers to this run's input (the runner asks `prompt` first).
        self.reads = reads if reads is not None else AdapterReads()
        self.settings, self.service, self.cwd = settings, service, cwd
        #: The agent's context (`<session>+n` after n compactions; see `context_key`).
        self.session = session
        #: The agent session itself, whatever its compactions.
        self.agent_session = agent_session
        self.debug = debug
        self.outcome, self.detail = outcome, detail
        self.pending = pending
        self.spooled, self.spool_reason = spooled, spool_reason
        self.write_until = write_until  # time.monotonic(); None: no limit
        self.unwritten = 0
        #: Memories in the writes spooled (an exchange item counts its pieces), as `unwritten`.
        self.spooled_memories = 0
        self.lost = ""
        self.wrote = False
        self.warning = warning
        self.report: dict[str, Any] | None = None
        self._repo: Any = _UNSET
        self._project: Any = _UNSET

    def __repr__(self) -> str:
        return f"HookCall(harness={self.harness!r}, event={self.event!r}, " \
               f"outcome={self.outcome!r}, detail={self.detail!r})"

    @property
    def repo(self) -> RepoConfig:
        """The repository's `.semantic-memory.toml` (defaults when it has none)."""
        if self._repo is _UNSET:
            from .repo_config import approvals_file, load_repo_config

            self._repo = load_repo_config(self.cwd, approvals_file(self.settings))
        return self._repo

    @property
    def project(self) -> str | None:
        """MEMORY_PROJECT, else the repository file's `[project] name`, else detected."""
        if self._project is _UNSET:
            from .repo_config import project_for

            try:
                self._project = project_for(self.cwd, self.repo, self.settings.project)
            except (OSError, ValueError) as exc:  # a NUL in `cwd`: the write keeps a project
                self.warning = f"project not detected for {self.cwd!r}: {exc}"
                self._project = os.path.basename(self.cwd.rstrip(os.sep)) or self.cwd
        return self._project

    @project.setter
    def project(self, value: str | None) -> None:
        self._project = value

    def project_if_known(self) -> str | None:
        """The project, if this run worked it out (a run that failed early never needed it)."""
        return None if self._project is _UNSET else self._project

    def opted_out(self, what: str) -> bool:
        """True (and the run skipped) when the repository's file turns `what` off."""
        repo = self.repo
        if (line := repo.warning()) is not None:  # unreadable, or a name awaiting approval
            self.warning = line
        enabled = repo.capture if what == "capture" else repo.recall
        if enabled:
            return False
        why = f"unreadable, so nothing is stored ({repo.error})" if repo.error else \
            f"[{what}] enabled = false"
        self.done("skipped", f"{what} off by {repo.path}: {why}")
        return True

    def done(self, outcome: str, detail: str = "") -> None:
        self.outcome, self.detail = outcome, detail
        self.debug(f"{outcome}: {detail}" if detail else outcome)

    def write(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """POST `body` to /ingest (`write_all`): the answer, or None when it was spooled or
        lost (`unwritten`)."""
        answers = self.write_all([body])
        return answers[0] if answers else None

    def write_all(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
        """POST each body to /ingest in turn; the answers, None for a body that went to the
        spool instead (replayed later, exactly once). Each request keeps SPOOL_MARGIN_S of the
        budget for spooling. Once one could not be taken, it and every body after it, this
        run's later writes too, go to the spool at once: the service is down, hung or slow,
        and they would only wait as well. A body the service refuses outright (413, 422) is
        kept in `spool/rejected/` with the reason, and answered as a refusal. The answers
        stop short when spooling ran past `write_until` (`spool_all`)."""
        answers: list[dict[str, Any] | None] = []
        rest = self.pending = list(bodies)  # the runner's to spool if the budget ends now
        reason = self.spool_reason
        try:
            while rest and not self.spooled:
                try:
                    answers.append(self.service.post(
                        "/ingest", rest[0], deadline=self.service.deadline - SPOOL_MARGIN_S))
                except ServiceFailed as exc:
                    if retryable(exc.status):
                        reason = str(exc)
                        break
                    # The request itself is wrong: replaying won't help.
                    answers.append(self.keep_refused(rest[0], str(exc)))
                except ServiceUnavailable as exc:
                    reason = f"{exc.outcome}: {exc}"
                    break
                del rest[0]
            answers += self.spool_all(rest, reason)
        finally:
            self.pending = None
        self.wrote = True
        return answers

    def spool_all(self, bodies: list[dict[str, Any]], reason: str) -> list[None]:
        """Spool `bodies` in order, one file each; a None per body spooled. The first is
        spooled whatever the time (the write in hand: one file, milliseconds); no later one
        is started past `write_until`, so a hook the machine starved never runs into the
        harness's own timeout: the memories of the bodies left count in `unwritten`, as do
        those of a spool that cannot be written (a full disk: `lost` says so)."""
        done = 0
        for body in bodies:
            if done and self.write_until is not None and time.monotonic() >= self.write_until:
                break
            try:
                self.spool(body, reason)
            except OSError as exc:
                self.lost = f"spooling failed: {exc}"
                break
            done += 1
        self.unwritten += sum(memories_of(item) for left in bodies[done:]
                              for item in left.get("items", [left]))
        return [None] * done

    def spool(self, body: dict[str, Any], reason: str) -> None:
        """Append `body` to the spool (the service redacts it on replay), each memory stamped
        with the time it was made."""
        from .. import spool

        ts = round(time.time(), 3)
        for item in body.get("items", [body]):
            item.setdefault("created_at", ts)
        spool.append(beside_db(self.settings, "spool"), "/ingest", body, harness=self.harness,
                     event=self.event)
        self.spooled += 1
        self.spooled_memories += sum(memories_of(item) for item in body.get("items", [body]))
        self.spool_reason = self.spool_reason or reason

    def shortfall(self) -> str:
        """What the hook log says of the `unwritten` memories."""
        why = self.lost or "the write grace past the budget ran out while spooling"
        return f"{self.unwritten} not written: {why}"

    def keep_refused(self, body: dict[str, Any], reason: str) -> dict[str, Any]:
        """Keep a write the service refused in `spool/rejected/` (`memory-mcp spool list`
        shows it with `reason`); the refusal, as /ingest words one."""
        from .. import spool

        spool.append(beside_db(self.settings, "spool"), "/ingest", body, harness=self.harness,
                     event=self.event, rejected=reason)
        reason = f"{reason} (kept in spool/rejected/)"
        items = body.get("items")
        if isinstance(items, list):
            return {"new": 0, "duplicate": 0, "rejected": sum(map(memories_of, items))}
        return {"status": "rejected", "reason": reason}

    def tags(self) -> list[str]:
        tags = [f"harness:{self.harness}"]
        if self.session:
            tags.append(f"session:{self.session}"[:64])
        return tags

    def memory_fields(self) -> dict[str, Any]:
        """What every memory this hook stores carries: its project, its tags and the agent
        session it belongs to (kept in order there, so recall can bring neighbours along)."""
        fields: dict[str, Any] = {"project": self.project, "tags": self.tags()}
        if self.agent_session:
            fields["session"] = f"{self.harness}:{self.agent_session}"[:256]
        return fields


class HarnessAdapter:
    """Subclass, set `name` and `events`, override the readers a harness needs."""

    #: The harness's name on the command line (`memory-mcp hook <name> <event>`).
    name: ClassVar[str] = ""
    #: Hook event -> action: "session_start", "prompt", "compact" or "tool".
    events: ClassVar[Mapping[str, str]] = {}
    #: The harness's executable (`memory-mcp doctor` looks for it on PATH).
    binary: ClassVar[str | None] = None
    #: Bytes written into the transcript once per compaction (counted and located, not parsed).
    compaction_marker: ClassVar[bytes | None] = None
    #: False when the harness drops what a session-start hook prints (it then only autostarts).
    context_at_session_start: ClassVar[bool] = True
    #: The tags the harness wraps a hook's output in before the model reads it (Kimi Code's
    #: `hook_result`): `context_output` escapes them in every spelling the service's wrapper
    #: folds (`escape_tags`), so memory text cannot close the wrapper and speak as the harness.
    #: The service escapes only its own block's tags.
    wrapper_tags: ClassVar[tuple[str, ...]] = ()
    #: The most context text the harness takes whole (None: no limit). Recall asks the
    #: service for a block no longer than this, so the block is never cut mid-memory and the
    #: memories reported injected are the ones the model sees.
    max_context_chars: ClassVar[int | None] = None

    def handle(self, call: HookCall) -> str:
        """Run the action mapped to `call.event`; returns what the hook prints."""
        action = self.events.get(call.event)
        if action is None:
            call.done("skipped", f"{self.name} hooks do not handle {call.event!r}")
            return ""
        handlers: dict[str, Callable[[HookCall], str]] = {
            "session_start": self.on_session_start, "prompt": self.on_prompt,
            "compact": self.on_compact, "tool": self.on_tool}
        return handlers[action](call)

    # --- install (`memory-mcp install/uninstall/doctor`) -------------------------------------

    def config_files(self, target: InstallTarget) -> list[ConfigFile]:
        """The harness config files install edits, with the edits (see `install.py`)."""
        return []

    def install_notes(self, target: InstallTarget) -> list[str]:
        """Lines printed after an install (what else the user should know)."""
        return []

    # --- reading the harness's hook input (override what differs) -------------------------

    def session_id(self, payload: dict[str, Any]) -> str | None:
        value = payload.get("session_id")
        return value if isinstance(value, str) and value else None

    def compactions(self, payload: dict[str, Any]) -> int:
        """How often this session's context has been compacted so far (0 if unknown): the
        transcript's compaction markers, counted without parsing it."""
        path = self.transcript_path(payload)
        marker = self.compaction_marker
        return count_in_file(path, marker) if path is not None and marker else 0

    def context_key(self, payload: dict[str, Any]) -> str | None:
        """Names what is in the agent's context now: the session, and after its n-th
        compaction `<session>+n`. The service leaves out what was injected into this context
        or flushed from it; a compaction starts a new one, so what it dropped can come back."""
        session = self.session_id(payload)
        if session is None:
            return None
        n = self.compactions(payload)
        return f"{session}+{n}" if n else session

    def cwd(self, payload: dict[str, Any]) -> str | None:
        value = payload.get("cwd")
        return value if isinstance(value, str) and value else None

    def prompt(self, payload: dict[str, Any]) -> str | None:
        value = payload.get("prompt")
        return value if isinstance(value, str) else None

    def transcript_path(self, payload: dict[str, Any]) -> Path | str | None:
        """The session's transcript file (JSON lines), if the harness keeps one: a path
        `open` takes (a string here: pathlib costs a hook more than reading the file)."""
        value = payload.get("transcript_path")
        if not isinstance(value, str) or not value:
            return None
        path = harness_path(value)  # UTF-8 text, whatever this process's locale
        return path if os.path.isfile(path) else None

    def transcript_turn(self, entry: dict[str, Any]) -> Turn | None:
        """One transcript line as a conversation turn; None for everything else (tool calls,
        metadata, compaction markers, injected context)."""
        return None

    def turns(self, payload: dict[str, Any]) -> list[Turn]:
        """The session's conversation so far (empty when the harness has none yet)."""
        path = self.transcript_path(payload)
        if path is None:
            return []
        return [turn for entry in read_jsonl(path) if (turn := self.transcript_turn(entry))]

    def compacted_turns(self, payload: dict[str, Any]) -> list[Turn]:
        """The turns a compaction is about to summarise: those after the transcript's last
        compaction marker (the earlier ones were flushed by that compaction). When that
        compaction came in the middle of a turn (Claude Code compacts as the context fills,
        between two tool calls), the rest of the reply follows the marker and its question
        precedes it: the question heads the turns again, or the reply's rest would be stored
        as an answer to nothing."""
        path, marker = self.transcript_path(payload), self.compaction_marker
        if path is None or not marker:
            return self.turns(payload)
        start = last_line_offset(path, marker)
        turns = [turn for entry in read_jsonl(path, start)
                 if (turn := self.transcript_turn(entry))]
        if start and turns and turns[0].role != "user":
            question = next((turn for entry in read_jsonl_reversed(path, end=start)
                             if (turn := self.transcript_turn(entry)) is not None
                             and turn.role == "user" and clean(turn.text)), None)
            if question is not None:
                turns.insert(0, question)
        return turns

    def compacted_carry(self, payload: dict[str, Any], turns: list[Turn],
                        cache: str | None = None) -> Carry:
        """The `<private>` spans still open where `turns` (`compacted_turns`) begin: opened
        before the transcript's last compaction marker and not closed or lapsed there (the
        question heading the turns again is not counted: it is read with them)."""
        path, marker = self.transcript_path(payload), self.compaction_marker
        start = last_line_offset(path, marker) if path is not None and marker else 0
        if not start:
            return NO_CARRY
        question = turns[0].text if turns and turns[0].role == "user" else None
        return self.private_carry(payload, start, question, cache)

    def last_user_message(self, payload: dict[str, Any]) -> str | None:
        """The session's latest user message, read from the transcript's end."""
        path = self.transcript_path(payload)
        if path is None:
            return last_user_text(self.turns(payload))
        for entry in read_jsonl_reversed(path):
            turn = self.transcript_turn(entry)
            if turn is not None and turn.role == "user" and clean(turn.text):
                return turn.text
        return None

    def private_carry(self, payload: dict[str, Any], end: int | None = None,
                      latest: str | None = None, cache: str | None = None) -> Carry:
        """What the session's user messages (those on the transcript's lines before byte
        offset `end`) left open (`carry_private`): a message read inside a span is hidden up
        to its closing tag. `latest`, the latest of those messages (the one a hook recalls
        for, a compaction's question), is not counted: it is read next. `cache`, a folder
        beside the db, keeps where the last read of a long transcript stopped
        (`_CarryScan`): a prompt then reads only what was appended since."""
        path = self.transcript_path(payload)
        if path is None:
            texts = [turn.text for turn in self.turns(payload) if turn.role == "user"]
            if latest is not None and texts and texts[-1] == latest:
                texts.pop()
            carry = NO_CARRY
            for text in texts:
                carry = carry_private(text, carry)[1]
            return carry
        return _CarryScan(self, path, cache).carry(end, latest)

    def tool_call(self, payload: dict[str, Any]) -> ToolCall | None:
        name = payload.get("tool_name")
        if not isinstance(name, str):
            return None
        output = payload.get("tool_response", payload.get("tool_output", ""))
        return ToolCall(name, payload.get("tool_input"), output_text(output))

    # --- writing the harness's hook output --------------------------------------------------

    def context_output(self, call: HookCall, text: str) -> str:
        """What to print so `text` reaches the model (default: the text itself, its
        `wrapper_tags` escaped). An override escapes them too (`escape_tags`)."""
        return escape_tags(text, self.wrapper_tags)

    def _output(self, call: HookCall, text: str) -> str:
        """`context_output`, noted as running (`AdapterReads`) while it does."""
        return call.reads.ask("context_output", self.context_output, call, text, once=False)

    # --- the actions ------------------------------------------------------------------------

    def on_session_start(self, call: HookCall) -> str:
        if call.settings.plugin_autostart:
            from .autostart import ensure_running

            call.service = ensure_running(call.service, call.settings)
        if not self.context_at_session_start:
            call.done("skipped", f"{self.name} takes no context at session start")
            return ""
        query = call.reads.ask("last_user_message", self.last_user_message, call.payload)
        if not query:
            call.done("skipped", "no earlier user message to recall for")
            return ""
        carry = call.reads.ask("private_carry", self.private_carry, call.payload, None, query,
                               beside_db(call.settings, CARRY_CACHE))
        # The paused line names "this message": the prompt the session resumes with, which
        # this hook has not seen (it may close the span, or be past its bound). Its prompt
        # hook says it when it holds; said here, it stood beside a block of that prompt.
        return self.inject(call, query, carry, tell_paused=False)

    def on_prompt(self, call: HookCall) -> str:
        prompt = call.reads.ask("prompt", self.prompt, call.payload)
        if not prompt or not prompt.strip():
            call.done("skipped", "empty prompt")
            return ""
        # Inside a span an earlier message opened, the prompt is private up to its closing tag.
        carry = call.reads.ask("private_carry", self.private_carry, call.payload, None, prompt,
                               beside_db(call.settings, CARRY_CACHE))
        fact = remembered(prompt)  # the words inside any quotes wrapped around the prompt
        if fact is not None:
            return self.remember(call, fact, carry)
        return self.inject(call, unquote(prompt), carry)

    def on_compact(self, call: HookCall) -> str:
        if not call.opted_out("capture"):  # before the transcript is read
            turns = call.reads.ask("compacted_turns", self.compacted_turns, call.payload)
            carry = call.reads.ask("compacted_carry", self.compacted_carry, call.payload, turns,
                                   beside_db(call.settings, CARRY_CACHE))
            self.flush(call, turns, carry)
        return ""  # compaction hooks have no context to add

    def on_tool(self, call: HookCall) -> str:
        tool = call.reads.ask("tool_call", self.tool_call, call.payload)
        if tool is None:
            call.done("skipped", "no tool call in the hook input")
        elif tool.name.lower() not in (names := call.settings.tool_capture()):
            call.done("skipped", f"{tool.name} is not a tool to capture: "
                                 f"{','.join(sorted(names)) or 'none'} "
                                 "(MEMORY_PLUGIN_TOOL_CAPTURE, else the hook's --tool-capture)")
        else:
            self.capture(call, tool)
        return ""

    # --- what the actions do with the service -----------------------------------------------

    def inject(self, call: HookCall, query: str, carry: Carry = NO_CARRY,
               tell_paused: bool = True) -> str:
        """Recall for `query`, a message read inside what earlier ones left open
        (`private_carry`); the block of what clears the relevance bar, in the harness's output
        form (its /inject/report body in `call.report`). Empty when nothing is relevant; a
        line saying memory is paused when the message runs on inside a carried span (with
        `tell_paused`; else nothing)."""
        settings = call.settings
        if call.opted_out("recall"):
            return ""
        query, left_open = strip_private_from(query, carry[0])
        query = query.strip()[:QUERY_CHARS]
        if not query and carry[0] and left_open:
            if not tell_paused:
                call.done("skipped", "inside a <private> span an earlier message opened: "
                                     "memory paused (the next prompt's hook says so)")
                return ""
            call.done("skipped", "inside a <private> span an earlier message opened: "
                                 "memory paused, the model told")
            return self._output(call, paused_notice(carry))
        if not query:
            call.done("skipped", "nothing but <private> text to recall for")
            return ""
        budget = settings.plugin_budget_chars
        if self.max_context_chars is not None:
            budget = min(budget, self.max_context_chars)
        answer = self._recall_within_cap(call, {
            "query": query, "k": settings.plugin_limit, "project": call.project,
            "budget_chars": budget, "session": call.session, "relevant_only": True})
        if answer is None:
            call.done("skipped", f"block over cap: the block stays over the harness's "
                                 f"{self.max_context_chars} chars once its tags are escaped "
                                 f"({CAP_RETRIES} shorter asks); nothing injected")
            return ""
        block = answer.get("block") or ""
        if not block:
            call.done("nothing relevant")
            return ""
        uids = answer.get("block_uids") or [item["uid"] for item in answer.get("items", [])]
        # Not posted here: the report is a write, and a long writer (a purge, an import's
        # index merge) holds writes back while this recall, a read, still answers. The runner
        # posts it once the block is printed (runner.py `_report`).
        call.report = {"harness": self.name, "hook": call.event, "project": call.project,
                       "query": query, "uids": uids, "chars": len(block),
                       "session": call.session}
        call.done("injected", f"{len(uids)} memories, {len(block)} chars")
        return self._output(call, block)

    def _recall_within_cap(self, call: HookCall, request: dict[str, Any]
                           ) -> dict[str, Any] | None:
        """The service's /recall answer, its block within the harness's cap
        (`max_context_chars`) once the harness's tags are escaped; None when it is still over
        after CAP_RETRIES asks. Escaping lengthens the block (`&lt;` for `<`), and past the
        cap the harness cuts it, closing tags and all, with every memory reported as injected:
        each ask is for a block shorter by the overflow (fewer or shorter memories). A shorter
        ask answered with no block at all, after a block over the cap, is None too: the
        memories were relevant, only too long (a formatter that ignores `budget_chars`), and
        the log says so, not "nothing relevant"."""
        answer = call.service.post("/recall", request)
        if self.max_context_chars is None:
            return answer
        for retry in range(CAP_RETRIES + 1):
            block = answer.get("block") or ""
            over = len(escape_tags(block, self.wrapper_tags)) - self.max_context_chars
            if over <= 0:
                return answer if block or not retry else None
            if retry < CAP_RETRIES:
                request = request | {"budget_chars": max(0, request["budget_chars"] - over)}
                answer = call.service.post("/recall", request)
        return None

    def remember(self, call: HookCall, content: str, carry: Carry = NO_CARRY) -> str:
        """Store an explicit "remember …" (a message read inside what earlier ones left
        open) as a memory; tell the model it is stored, or why not."""
        if call.opted_out("capture"):
            return ""
        content, left_open = strip_private_from(content, carry[0])
        content = content.strip()
        if not content and carry[0] and left_open:
            call.done("skipped", "inside a <private> span an earlier message opened: "
                                 "not remembered, the model told")
            return self._output(call, "semantic-memory did NOT store this: it is not remembered. "
                                      + paused_notice(carry))
        if not content:
            call.done("skipped", "nothing but <private> text to remember")
            return ""
        answer = call.write({
            "content": content, "kind": "fact", "source": "chat", **call.memory_fields()})
        if call.unwritten:  # the service cannot take it and the spool cannot keep it
            call.done("error", f"remember: {call.shortfall()}")
            return self._output(
                call, f"semantic-memory could NOT store this ({call.lost or 'no time left'}); "
                      "it is not remembered.")
        if answer is None:
            call.done("spooled", f"remembered in the spool ({call.spool_reason})")
            return self._output(call, WILL_STORE)
        if answer.get("status") == "rejected":  # told, or the user takes it as remembered
            reason = str(answer.get("reason", ""))
            call.done("refused", reason)
            return self._output(call, f"semantic-memory did NOT store this ({reason[:REASON_CHARS]}"
                                      "); it is not remembered.")
        call.done("stored", f"remembered ({answer.get('status')} {answer.get('uid')})")
        return self._output(
            call, f"semantic-memory stored this as a memory (uid {answer.get('uid')}); "
                  "it does not need to be stored again.")

    def flush(self, call: HookCall, turns: list[Turn], carry: Carry = NO_CARRY) -> None:
        """Store the turns as compaction memories: the newest exchanges whose chunks make up
        FLUSH_MAX, each that would be cut sent whole for the service to redact and cut
        (`flush_items`), without their private text (`without_private`; `carry`, what the
        messages before them left open). A trailing unanswered prompt is the live one
        (a mid-turn compaction keeps it): it is stored with its answer later."""
        if call.opted_out("capture"):
            return
        while turns and turns[-1].role == "user":
            turns = turns[:-1]
        # Each turn keeps its time: an exchange is dated by its first user turn (flush_items).
        turns = without_private(turns, carry)
        # A long exchange goes whole: the service redacts it before it cuts it (flush_items).
        items, left_out = flush_items(turns, FLUSH_MAX)
        if not items:
            call.done("skipped", "no conversation to flush")
            return
        # FLUSH_BATCH memories a request, an exchange counting as its pieces: a body then
        # weighs what the same chunks sent one by one would (an exchange's text is its pieces'
        # less their heads), bounded as before. Counted as one item, 500 long exchanges would
        # make a body of any size, past the service's MEMORY_MAX_BODY_BYTES. An exchange of
        # more pieces than that goes alone.
        batches: list[list[tuple[dict[str, Any], int]]] = []
        size = 0
        for item, pieces in items:
            if not batches or size + pieces > FLUSH_BATCH:
                batches.append([])
                size = 0
            batches[-1].append((item, pieces))
            size += pieces
        fields = call.memory_fields()
        bodies = [{"items": [{**item, "kind": "note", "source": FLUSH_SOURCE, **fields}
                             for item, _ in batch]} for batch in batches]
        counts = {"new": 0, "duplicate": 0, "rejected": 0, "spooled": 0}
        kept, why = 0, ""  # exchange items refused as items, and the first reason
        for body, batch, answer in zip(bodies, batches, call.write_all(bodies), strict=False):
            if answer is None:
                counts["spooled"] += sum(n for _, n in batch)
                continue
            for key in ("new", "duplicate", "rejected"):  # an exchange's pieces, each
                counts[key] += int(answer.get(key, 0))
            if refused := _refused_exchanges(body, answer):
                # The exchange is nowhere else: kept, with the reason, as a refused write is.
                call.keep_refused({**body, "items": [item for item, _ in refused]},
                                  "; ".join(dict.fromkeys(reason for _, reason in refused)))
                kept, why = kept + len(refused), why or refused[0][1]
                # The answer counted one refusal each; they stood for their pieces.
                counts["rejected"] += sum(memories_of(item) - 1 for item, _ in refused)
        chunks = sum(n for _, n in items)  # as cut before the service's redaction
        detail = (f"{chunks} chunks: {counts['new']} new, "
                  f"{counts['duplicate']} already stored, {counts['rejected']} refused")
        if kept:
            detail += f" ({kept} exchanges kept in spool/rejected/: {why})"
        if left_out:  # an earlier flush of the session stored those, mostly
            detail += f"; the oldest {left_out} left out (FLUSH_MAX)"
        if counts["spooled"]:
            detail += f", {counts['spooled']} spooled ({call.spool_reason})"
        if call.unwritten:
            call.done("error", f"{detail}, {call.shortfall()}")
        else:
            call.done("spooled" if counts["spooled"] else "stored", detail)

    def capture(self, call: HookCall, tool: ToolCall) -> None:
        if call.opted_out("capture"):
            return
        fields = call.memory_fields()
        fields["tags"].append(f"tool:{tool.name}"[:64])
        # The whole record (input gist and output): a private span may cross the cut.
        record = strip_private(capture_record(ToolCall(tool.name, tool.input,
                                                       strip_private(tool.output))))
        answer = call.write({"content": record, "kind": "artifact", "source": TOOL_SOURCE,
                             **fields})
        if call.unwritten:
            call.done("error", f"{tool.name} output, {call.shortfall()}")
        elif answer is None:
            call.done("spooled", f"{tool.name} output ({call.spool_reason})")
        elif answer.get("status") == "rejected":
            call.done("refused", str(answer.get("reason", "")))
        else:
            call.done("stored", f"{tool.name} output ({answer.get('status')})")


#: What the "<" of a tag can be in a transcript's raw JSON line: itself, the fullwidth or
#: small form NFKC reads as "<" (`＜`, `﹤`), or a JSON escape (`\u003c`).
_LESS_THAN_BYTES = (b"<", "\uff1c".encode(), "\ufe64".encode(), b"\\u")


#: The folder beside the db where `_CarryScan` keeps, per transcript, where its read stopped.
CARRY_CACHE = "private-carry"
#: Transcripts shorter than this are read whole each time (a few ms): no file kept for them.
CARRY_CACHE_FROM = 4 << 20
#: The bytes before a kept offset whose checksum says the transcript is still the one read.
_CARRY_TAIL = 256
#: A long read is kept every this many bytes: a hook that runs out of time on a long
#: transcript (its first prompt there, a loaded machine) leaves the next one the rest only.
_CARRY_PIECE = 16 << 20
#: Days a kept read outlives its last write: one file per long transcript would otherwise
#: stay forever (a kept file names its transcript by a checksum of its path only, so a deleted
#: transcript cannot be told). A session idle a month is over; prompted again, its next prompt
#: reads the transcript whole once (~2 ms a MB), as its first did.
CARRY_CACHE_DAYS = 30
#: The file in the cache folder whose mtime says when it was last pruned (at most once a day:
#: every other write pays one stat for it).
_CARRY_PRUNED = ".pruned"
_DAY_S = 86_400


def paused_notice(carry: Carry) -> str:
    """The line a hook gives the model for a message read inside a span an earlier message
    left open (`carry_private`): memory is off there, and the person should know why."""
    left = CARRY_MESSAGES - carry[1] - 1
    until = (f"or after {left} more message{'s' if left != 1 else ''} without it"
             if left else "or from the next message on (an unclosed tag is then a mention)")
    return ("semantic-memory is paused: an earlier user message opened <private> and none has "
            "closed it, so this message is neither recalled for nor stored; memory resumes at "
            f"</private> {until}.")


class _CarryScan:
    """What a transcript's user messages left open (`HarnessAdapter.private_carry`), read
    from the mapped file: while no span is open, only the lines that may hold a tag
    (`_may_hold_tag`); while one is, every user message (each counts toward the span's
    lapse). A prompt hook reads the whole transcript, 150 MB in a long session (~2 ms a MB):
    with `cache`, where the read stopped is kept with the file's identity, and the next read
    starts there."""

    def __init__(self, adapter: HarnessAdapter, path: str, cache: str | None) -> None:
        self.adapter, self.path = adapter, path
        self.file = None if cache is None else os.path.join(
            cache, f"{_crc(os.path.abspath(path).encode()):08x}.json")

    def carry(self, end: int | None, latest: str | None) -> Carry:
        import mmap

        with open(self.path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            stop = stat.st_size if end is None else min(end, stat.st_size)
            start, carry, last = self._kept(handle, stat, stop)
            view = None
            if start < stop:
                try:
                    view = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError):  # an empty file (or one that cannot be mapped)
                    pass
            if view is not None:
                with view:
                    stop = min(stop, len(view))
                    keep = end is None and stop >= CARRY_CACHE_FROM
                    read, at = None, start
                    while at < stop:  # in pieces, each kept: a hook out of time leaves less
                        piece = view.find(b"\n", at + _CARRY_PIECE, stop) + 1 or stop
                        carry, read_now = self._read(view, at, piece, carry)
                        if read_now is not None:
                            read, last = read_now, read_now[1:]
                        at = piece
                        if keep and at < stop:
                            self._keep(view, stat, at, carry, last)
                    if keep:
                        boundary = view.rfind(b"\n", start, stop) + 1
                        if read is not None and read[0] >= boundary:  # a line still written
                            self._keep(view, stat, read[0], read[2], None)
                        elif boundary > start:
                            self._keep(view, stat, boundary, carry, last)
        if last is not None and latest is not None and last[0] == _crc(latest.encode()):
            return last[1]  # the message a hook reads next: not counted
        return carry

    def _read(self, view: Any, at: int, stop: int, carry: Carry
              ) -> tuple[Carry, tuple[int, int, Carry] | None]:
        """What the user messages on the lines of `view[at:stop]` leave open, read inside
        `carry`; and the last one read: its line's offset, its text's checksum and what was
        open before it (the latest message, a hook's prompt, is not counted)."""
        last = None
        upcoming = {mark: view.find(mark, at, stop) for mark in _LESS_THAN_BYTES}
        while at < stop:
            if not carry[0]:  # outside a span only a tag matters: skip to the next one
                for mark, next_at in upcoming.items():
                    if 0 <= next_at < at:
                        upcoming[mark] = view.find(mark, at, stop)
                found = [where for where in upcoming.values() if where >= 0]
                if not found:
                    break
                line_at = view.rfind(b"\n", 0, min(found)) + 1
            else:
                line_at = at
            finish = view.find(b"\n", max(line_at, at), stop)
            at = stop if finish < 0 else finish + 1
            line = view[line_at:at]
            if not carry[0] and not _may_hold_tag(line):
                continue
            entry = loads_input(line, None)
            turn = self.adapter.transcript_turn(entry) if isinstance(entry, dict) else None
            if turn is not None and turn.role == "user":
                last = (line_at, _crc(turn.text.encode()), carry)
                carry = carry_private(turn.text, carry)[1]
        return carry, last

    def _kept(self, handle: Any, stat: os.stat_result, stop: int
              ) -> tuple[int, Carry, tuple[int, Carry] | None]:
        """Where the last read of this transcript stopped, what was open there, and its last
        user message (`_read`); the start when nothing is kept, or the file is not the one
        read (replaced, rewritten)."""
        nothing = (0, NO_CARRY, None)
        if self.file is None:
            return nothing
        try:
            with open(self.file, "rb") as kept_file:
                kept = loads_input(kept_file.read(), None)
            offset, carry, last = kept["offset"], tuple(kept["carry"]), kept["last"]
            if last is not None:
                last = (last[0], tuple(last[1]))
            if not (isinstance(offset, int) and _CARRY_TAIL <= offset <= stop
                    and kept["file"] == [stat.st_dev, stat.st_ino] and _carry_like(carry)
                    and (last is None or (isinstance(last[0], int) and _carry_like(last[1])))):
                return nothing
            handle.seek(offset - _CARRY_TAIL)
            if _crc(handle.read(_CARRY_TAIL)) != kept["tail"]:
                return nothing
            return offset, carry, last
        except (OSError, TypeError, KeyError, IndexError):
            return nothing

    def _keep(self, view: Any, stat: os.stat_result, offset: int, carry: Carry,
              last: tuple[int, Carry] | None) -> None:
        """Keep `carry`, what was open at byte `offset` (a line's start), and the last user
        message before it, for the next read; written whole (renamed into place),
        owner-only. Only numbers: no text of the file."""
        if self.file is None or offset < _CARRY_TAIL:
            return
        body = dumps({"file": [stat.st_dev, stat.st_ino], "offset": offset,
                      "tail": _crc(view[offset - _CARRY_TAIL:offset]), "carry": carry,
                      "last": last})
        try:
            os.makedirs(os.path.dirname(self.file), mode=0o700, exist_ok=True)
            replace_private(self.file, body.encode("utf-8"))
        except OSError:  # a cache: the next read starts from the top
            return
        prune_carry_cache(os.path.dirname(self.file))


def prune_carry_cache(cache: str) -> int:
    """Remove the kept reads (`_CarryScan`) of `cache` not written for CARRY_CACHE_DAYS, and
    temporary files a killed hook left: at most once a day (`_CARRY_PRUNED`), so a prompt
    hook pays one stat, and one folder scan a day (~10 ms for 10,000 files). Returns how
    many went."""
    clock = time.time()
    mark = os.path.join(cache, _CARRY_PRUNED)
    try:
        if clock - os.stat(mark).st_mtime < _DAY_S:
            return 0
    except OSError:  # never pruned
        pass
    try:
        replace_private(mark, b"")  # first: a concurrent hook finds it done
    except OSError:
        return 0
    return _remove_older(cache, clock - CARRY_CACHE_DAYS * _DAY_S)


def _remove_older(cache: str, before: float) -> int:
    """Remove the kept reads and temporary files of `cache` last written before `before`
    (epoch seconds); another hook's prune may remove one first."""
    removed = 0
    try:
        with os.scandir(cache) as entries:
            for entry in entries:
                if not entry.name.endswith((".json", ".tmp")):
                    continue
                try:
                    if entry.stat(follow_symlinks=False).st_mtime < before:
                        os.unlink(entry.path)
                        removed += 1
                except OSError:
                    continue
    except OSError:
        pass
    return removed


def _carry_like(value: Any) -> bool:
    """Whether a value read back from a kept file is a `Carry`."""
    return len(value) == 2 and all(isinstance(n, int) and n >= 0 for n in value)


def _crc(data: bytes) -> int:
    """A checksum (zlib's CRC-32): imported here, a hook pays for it only when used."""
    import zlib

    return zlib.crc32(data)


def _may_hold_tag(line: bytes) -> bool:
    """Whether a transcript line may hold a `<private>` tag, by cheap byte tests: a prompt
    hook reads the whole transcript (tens of MB in a long session) for the spans its user
    messages left open. A line needs some "<", and "vate" in ASCII unless it has letters
    that are not (fullwidth, escaped: `private.py` reads what the text looks like)."""
    if not any(mark in line for mark in _LESS_THAN_BYTES):
        return False
    return b"vate" in line.lower() or not line.isascii() or b"\\u" in line


def without_private(turns: list[Turn], carry: Carry = NO_CARRY) -> list[Turn]:
    """`turns` without their private text, read as one conversation inside what the turns
    before them left open (`carry`): a span a user message opens runs on through the later
    turns until a user message closes it, or lapses (`carry_private`). An assistant turn
    inside a span is hidden whole (a reply echoes what it answers); its
    own tags hide only within it, so a model's `</private>` cannot end the user's span. An
    echo after the span closed cannot be told from new text: it is stored (docs/security.md)."""
    out = []
    for turn in turns:
        if turn.role == "user":
            text, carry = carry_private(turn.text, carry)
        else:
            text = "" if carry[0] else strip_private(turn.text)
        out.append(Turn(turn.role, text, turn.at))
    return out


def _refused_exchanges(body: dict[str, Any],
                       answer: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The exchange items of `body` the service refused as items, with the reasons: not one
    of the memories it cut from one (those come with their `pieces`), but the item itself.
    A service older than exchange items answers each so (`items[i].content: Field required`,
    in a 200 that stores the rest)."""
    results = answer.get("results")
    if not isinstance(results, list):  # a whole body refused: `keep_refused` kept it
        return []
    return [(item, str(result.get("reason") or "refused"))
            for item, result in zip(body["items"], results, strict=False)
            if "exchange" in item and isinstance(result, dict)
            and result.get("status") == "rejected" and "pieces" not in result]


def escape_tags(text: str, names: tuple[str, ...]) -> str:
    """`text` with the "<" (or what reads as one: `＜`, `‹`, `⟨`, …) of every tag that reads
    as one of `names` written `&lt;`: opening or closing, folded as the service's wrapper folds
    its own tags (any case; spacing, slashes, any dash or combining mark inside the name;
    fullwidth, accented and look-alike letters: `＜/ｓуstem‐reminder＞`). A longer name with the
    same start is escaped too: harmless in data."""
    if not names:
        return text
    folded_names = tuple(_fold_tag(name) for name in names)
    longest = max(len(name) for name in names) * 3 + 8  # room for gaps inside a name
    out, done = [], 0
    for pos in _positions(text, LESS_THAN):
        ahead = text[pos + 1 : pos + 1 + longest].split(">", 1)[0].split("<", 1)[0]
        if _reads_as(ahead, folded_names):
            out += (text[done:pos], "&lt;")
            done = pos + 1
    return "".join(out) + text[done:]


def _positions(text: str, chars: str) -> list[int]:
    """Where any of `chars` occurs in `text`, in order (a `find` per occurrence, in C: a
    Python loop over every character of a block costs a hook more)."""
    found = []
    for char in chars:
        pos = text.find(char)
        while pos >= 0:
            found.append(pos)
            pos = text.find(char, pos + 1)
    return sorted(found)


def _reads_as(ahead: str, names: tuple[str, ...]) -> bool:
    """Whether the text after a "<" starts with one of `names` (folded). ASCII is folded
    here (`_fold_tag`: what the wrapper's folding makes of it). Only a non-ASCII character
    where a name could still be going on (`sуstem` with a Cyrillic у, `＜‹`, an accent) needs
    the wrapper's own `fold` and gaps, imported then: injection.py brings `re`, pluggy and
    dataclasses, ~30 ms of CPU, more than the rest of a hook's work (see the imports above)."""
    cut = len(ahead) if ahead.isascii() else \
        next(i for i, c in enumerate(ahead) if not c.isascii())
    head = _fold_tag(ahead[:cut])
    if head.startswith(names):
        return True
    if cut == len(ahead) or not any(name.startswith(head) for name in names):
        return False
    from ..default_plugins.injection import NAME_GAP, fold

    return NAME_GAP.sub("", "".join(map(fold, ahead))).startswith(names)


def _fold_tag(name: str) -> str:
    """An ASCII tag name as a reader takes it: lower case, without "/", "-", "_", ".", ":" or
    spacing (the wrapper's `fold` and gaps, for ASCII)."""
    return "".join(c for c in name.lower() if c not in "/-_.:" and not c.isspace())


def additional_context(event: str, text: str) -> str:
    """The hook answer Claude Code and Codex read to add `text` to the model's context."""
    return dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def output_text(value: Any) -> str:
    """A tool result as text: strings as they are; known shapes (stdout/stderr, file
    content) by their text; anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("stdout"), str) or isinstance(value.get("stderr"), str):
            return "\n".join(filter(None, (value.get("stdout"), value.get("stderr"))))
        file = value.get("file")
        if isinstance(file, dict) and isinstance(file.get("content"), str):
            return file["content"]
    if isinstance(value, list):
        text = "\n".join(p.get("text", "") for p in value if isinstance(p, dict))
        if text:
            return text
    return dumps(value, default=str)


def describe_input(value: Any) -> str:
    """The one-line gist of a tool's input: its command, path or query if it has one."""
    if isinstance(value, dict):
        for key in ("command", "cmd", "file_path", "filePath", "path", "pattern", "query", "url"):
            if isinstance(value.get(key), (str, list)):
                found = value[key]
                return " ".join(found) if isinstance(found, list) else found
    text = value if isinstance(value, str) else dumps(value, default=str)
    return " ".join(text.split())[:200]


def capture_record(tool: ToolCall) -> str:
    """`tool_name(input gist)` and the output, cut to CAPTURE_CHARS (head and tail)."""
    output = tool.output.strip()
    if len(output) > CAPTURE_CHARS:
        half = CAPTURE_CHARS // 2
        output = f"{output[:half].rstrip()}\n[… {len(output) - CAPTURE_CHARS} characters cut …]\n" \
                 f"{output[-half:].lstrip()}"
    gist = " ".join(describe_input(tool.input).split())[:300]
    return f"{tool.name}({gist}):\n{output}" if output else f"{tool.name}({gist}): (no output)"
