"""`memory-mcp hook <harness> <event>`: one hook run, fail-open within a hard budget.

Whatever happens (service down, slow or starting, a bad payload, a bug) the process exits 0
within MEMORY_HOOK_BUDGET_S and prints nothing but a well-formed answer for the harness; the
outcome goes to the hook log (`outcomes.py`) for `memory-mcp doctor`. A watchdog timer turns
any wait that overruns the budget into a timeout, whatever it was waiting on. Writes are never
dropped for it: one in flight goes to the spool, with every body of it not yet stored (a long
flush's later batches), and one the hook had not made yet (a machine too loaded to start it in
time, a transcript of megabytes still being read) is made offline, into the spool, within
WRITE_GRACE_S more: the run carries on from where it was, so nothing it read is read or cut
again. Spooling is never cut mid-file; it stops itself at the grace's end, and the log line then
names what it did not write. A write the grace ran out on before it was made is an `error` that
says what was not written, and a "remember" tells the model so.
The watchdog only reads what the run noted (`_Run.writes`): a signal handler that imported or
compiled something (`re`, for a "remember") met the module the alarm had interrupted half-way,
and the write was lost to an AttributeError. It never interrupts the reading of the hook input
either (the read waits on its own deadline, `read_payload`): a byte read and then dropped was a
"remember" logged as "none came".
A recalled block is printed before its injection report is posted: the report is a write, which
a long writer holds back while the recall answers. A request that timed out starts the shared
back-off only when it was sent (`client.NotSent` never is) and the service answers no probe
either, given its whole PROBE_S within the same grace (`client.answers`): a hung service, not a
slow one, nor a hook the machine starved. A slow one (the probe answered) gets the slow mark
instead (backoff.py): the writes of every hook of the next seconds spool without waiting.
The adapter's readers (`prompt`, `cwd`, …) are asked once each (`AdapterReads`): the watchdog
and the timeout path read their answers and never call the adapter, whose method may be what
hangs; a run stopped inside one names it (and the plugin's module) in its log line.
"""

from __future__ import annotations

import os
import stat
import sys
import time

from .. import backoff, lite
from ..stdout_guard import stdout_to_stderr
from . import outcomes
from .adapter import WILL_STORE, AdapterReads, HookCall
from .client import (
    PROBE_S,
    ServiceAddress,
    ServiceClient,
    ServiceDown,
    ServiceTimeout,
    ServiceUnavailable,
    answers,
    resolve_address,
    spool_sender,
)
from .project import hook_folder
from .registry import find_adapter
from .settings import TOOL_CAPTURE_OPTION, HookSettings, beside_db
from .transcript import may_remember, remembered

# A hook process imports only what one hook needs (docs/harnesses.md, "What the hooks cost"):
# no typing, dataclasses, pathlib, pluggy or config.py; tests/test_hook_cpu.py holds it to that.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: Kept back from the budget for printing the answer and writing the log line.
EXIT_MARGIN_S = 0.05
#: At most this long replaying the spool after a hook's own work, and this much of the
#: budget left over after it.
REPLAY_S = 0.5
REPLAY_MARGIN_S = 0.1
#: Largest hook input read from stdin, and the most read at a time.
MAX_INPUT_BYTES = 64 * 1024 * 1024
READ_CHUNK = 1024 * 1024
#: How long past the budget a write may take, well inside the harness's own timeout (2x the
#: budget, `install`): a write being spooled is not cut short (the watchdog fires again every
#: DEFER_S instead; no spool file is started past the grace, `HookCall.spool_all`), and one the
#: hook had no time to make is made offline into the spool.
DEFER_S = 0.005
WRITE_GRACE_S = 1.0
#: At most this long posting the injection report after the block is printed: it takes
#: milliseconds, unless a long writer holds the store's write lock, and the harness waits for
#: the hook to exit before the agent's turn goes on.
REPORT_S = 0.5
#: At most this long for each last step of a run the write grace ran out on (`_briefly`):
#: telling a "remember" prompt from a recall, formatting the notice that it was not stored.
LAST_STEP_S = 0.1
#: What the model is told of a "remember" that the hook ran out of time to store.
NOT_STORED = ("semantic-memory could NOT store this (the hook ran out of time: the machine is "
              "overloaded); it is not remembered.")


class HookTimeout(BaseException):
    """Raised by the watchdog when the budget is spent (BaseException: nothing catches it
    on the way out)."""


class NoInput(Exception):
    """The hook was started with no input to read: stdin closed (`<&-`) or a terminal. The
    run is `skipped: no hook input`, never a wait for input that will not come."""


class InputCut(Exception):
    """The hook input began to come, and the rest of it did not within the budget and its
    write grace: an `error`, since what it held is not known."""


class Watchdog:
    """The SIGALRM handler: raises HookTimeout, first noting the write bodies not yet stored
    then (the code it unwinds clears `call.pending` and `service.waiting` on the way out). A
    write that is not waiting on the network (being spooled, its answer being read, between
    two batches) is let finish: cut short, a spool file would be half a write, and the spooling
    ends by itself at `limit` (`HookCall.write_until`). So is the reading of the hook input
    (`reading`): it waits on its own deadline, and a chunk read as the alarm came would be
    dropped. A run that has yet to make its write and waits on nothing (reading a long
    transcript) is let go on offline (`carry_on`).

    A signal handler runs between two steps of whatever the run was doing, an import included:
    it reads flags and attributes, arms the timer and raises, and never imports, compiles or
    asks the adapter anything (`_Run.writes`)."""

    def __init__(self, limit: float) -> None:
        self.limit = limit  # time.monotonic(): the budget's end plus its write grace
        self.call: HookCall | None = None
        self.service: ServiceClient | None = None
        self.in_flight: list[dict[str, Any]] | None = None
        self.waiting = False
        #: Asked, at the budget's end, whether the run goes on offline instead of stopping
        #: (`_Run.carry_on`); None: it stops.
        self.carry_on: Callable[[], bool] | None = None
        #: False once the run is being wound up: a late or deferred alarm then does nothing
        #: (raised there, it would end the hook before it logs its outcome).
        self.active = True
        #: True while the hook input is read (`read_payload`, which ends by its own deadline).
        self.reading = False

    def __call__(self, signum: int, frame: Any) -> None:
        if not self.active:
            return
        if self.reading:
            lite.setitimer(lite.ITIMER_REAL, DEFER_S)
            return
        call = self.call
        service = call.service if call is not None else self.service  # autostart swaps it
        if call is not None and call.pending:
            if not call.service.waiting:
                lite.setitimer(lite.ITIMER_REAL, DEFER_S)
                return
            self.in_flight = list(call.pending)
        self.waiting = service is not None and service.waiting
        if not self.waiting and self.carry_on is not None and self.carry_on():
            return
        raise HookTimeout()


def process_started() -> float:
    """When this process started, on the `time.monotonic()` clock (to 10 ms; now if the
    platform cannot tell): the budget covers the interpreter's own start-up too."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            ticks = int(handle.read().rsplit(b")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.monotonic() - min(max(age, 0.0), 5.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic()


def main(argv: list[str], started: float | None = None) -> int:
    """Run one hook; always returns 0 (a failing memory hook must never fail the agent)."""
    try:
        return _run(argv, process_started() if started is None else started)
    except HookTimeout:  # the watchdog fired just as the run was finishing
        return 0
    except Exception as exc:  # noqa: BLE001 - a bug past the run's own fail-open handling
        _stderr(f"memory-mcp hook: {type(exc).__name__}: {exc}")
        return 0


class _Run:
    """How far one hook run got. The steps skip what is done already, so a write that the
    budget cut short before it was made can pick up where the watchdog stopped it."""

    def __init__(self, harness: str, event: str, settings: HookSettings, budget_end: float,
                 address: ServiceAddress, offline: ServiceUnavailable | None,
                 watchdog: Watchdog, debug: Any,
                 writes_held: ServiceUnavailable | None = None) -> None:
        self.harness, self.event, self.settings = harness, event, settings
        self.budget_end, self.offline, self.watchdog, self.debug = (
            budget_end, offline, watchdog, debug)
        #: What every write of this run raises at once while the slow mark holds (`_held`).
        self.writes_held = writes_held
        #: The service's URL, where it came from and the store expected there:
        #: `resolve_address`'s, read once per run.
        self.address = address
        self.adapter: Any = None
        self.action: str | None = None
        self.payload: dict[str, Any] | None = None
        self.service: ServiceClient | None = None
        self.call: HookCall | None = None
        #: Why another adapter for this harness was refused (`registry`), for the log line.
        self.conflict = ""
        #: The adapter's answers to this input, each asked once: the watchdog and the timeout
        #: path read them and never call the adapter (its method may be what hangs).
        self.reads = AdapterReads()
        #: Set once the budget ran out before the write was made: the run goes on offline,
        #: only to make its write (`carry_on`).
        self.late = False
        #: True while the hook waits for its input's first byte: a harness that never writes
        #: it gave no input, and there is no write to make for it (`writes`).
        self.awaiting_input = False
        #: Whether the prompt is a "remember" (`remembered`), worked out by the run itself as
        #: soon as the prompt is read (False at once without a "remember" word at its start,
        #: `may_remember`); None until then. The watchdog only reads it: asked there, the
        #: first `import re` met the half-imported module the alarm had interrupted.
        self.remembers: bool | None = None
        watchdog.carry_on = self.carry_on

    def handle(self) -> str:
        """Run the hook; what it prints. A `late` run stops (HookTimeout) unless it writes.
        Anything the adapter prints goes to stderr: the harness reads stdout as the answer
        (`_print` alone writes there)."""
        with stdout_to_stderr():
            return self._handle()

    def _handle(self) -> str:
        if self.adapter is None:
            conflicts: list[str] = []
            adapter = find_adapter(self.harness, self.settings, conflicts)
            self.conflict = "; ".join(conflicts)
            if adapter is None:
                raise LookupError(f"no harness adapter named {self.harness!r}: "
                                  f"{self.conflict or 'none is installed'} "
                                  "(see `memory-mcp doctor`)")
            # The action first: to the watchdog, an adapter means its action is known.
            self.action = adapter.events.get(self.event)
            self.adapter = adapter
        if self.payload is None:
            self.payload = self.read_payload()
        if self.action == "prompt":  # `writes` needs it; `on_prompt` gets this answer
            prompt = self.reads.ask("prompt", self.adapter.prompt, self.payload)
            if not (isinstance(prompt, str) and may_remember(prompt)):
                self.remembers = False  # a recall, told at once (no pattern, no import)
        if self.call is None:
            url, origin, store = self.address
            self.debug(f"service {url} ({origin})")
            self.service = ServiceClient(url, self.budget_end - EXIT_MARGIN_S,
                                         self.settings.plugin_token or self.settings.token,
                                         self.offline, harness=self.adapter.name,
                                         writes_held=self.writes_held, store=store)
            self.watchdog.service = self.service
            payload, adapter, ask = self.payload, self.adapter, self.reads.ask
            self.call = HookCall(self.harness, self.event, payload, self.settings, self.service,
                                 cwd=hook_folder(ask("cwd", adapter.cwd, payload)),
                                 session=ask("context_key", adapter.context_key, payload),
                                 agent_session=ask("session_id", adapter.session_id, payload),
                                 debug=self.debug, write_until=self.watchdog.limit,
                                 reads=self.reads)
            self.watchdog.call = self.call
        if self.action == "prompt" and self.remembers is None:  # once the call can say so
            prompt = self.reads.answers.get("prompt")
            self.remembers = isinstance(prompt, str) and remembered(prompt) is not None
        if self.late and not self.writes():
            raise HookTimeout()
        return self.adapter.handle(self.call)

    def read_payload(self) -> dict[str, Any]:
        """The hook input (`read_payload`), read with the watchdog held off (`reading`): the
        read ends by itself, HookTimeout with `awaiting_input` still set when no byte came
        by the budget's end (by the grace's, for a run already `late`)."""
        self.awaiting_input = True  # kept if no byte comes in time: `_timed_out` reads it
        first_by = self.watchdog.limit if self.late else self.budget_end - EXIT_MARGIN_S
        self.watchdog.reading = True
        try:
            payload = read_payload(self, first_by, self.watchdog.limit)
        finally:
            self.watchdog.reading = False
        self.awaiting_input = False
        return payload

    def writes(self) -> bool:
        """Whether this run stores something (a compaction flush, a tool capture, a "remember"
        prompt); True as long as that is not known yet, unless no input has come. Called from
        the watchdog: it reads what the run noted (`action`, `remembers`), never asks the
        adapter, imports or compiles anything."""
        if self.adapter is None:
            return True
        if self.awaiting_input:
            return False
        if self.action in ("compact", "tool"):
            return True
        if self.action != "prompt":
            return False
        return self.remembers is not False  # None: not worked out yet

    def stuck_in(self) -> str | None:
        """The adapter method the budget ran out in (its log line names it, and the plugin's
        module); None when it ran out elsewhere, waiting on the service included."""
        method = self.reads.running
        if method is None or self.watchdog.waiting:
            return None
        return f"the {self.harness} adapter's {method}() ({type(self.adapter).__module__})"

    def carry_on(self) -> bool:
        """The budget ran out while this run waited on nothing: a run that may still write
        (`writes`) goes on offline from where it is, its write straight to the spool, until
        WRITE_GRACE_S past the budget (True). Stopped and made again (`finish_offline`), a
        flush would read and count its transcript twice: a pasted log of megabytes then ran
        out of the grace too, and nothing of it, or of the exchanges after it, was kept.
        False (stop it) for a run that writes nothing, and at the grace's end."""
        if self.late or not self.writes():
            return False
        self.go_offline(_spent(self.settings))
        lite.setitimer(lite.ITIMER_REAL, max(self.watchdog.limit - time.monotonic(), 0.001))
        return True

    def go_offline(self, spent: str) -> None:
        """Every later request of this run fails at once, as late: its write is spooled."""
        self.late = True
        self.offline = ServiceTimeout(f"{spent} before the write was made")
        if self.service is not None:
            self.service.offline = self.offline

    def finish_offline(self, spent: str) -> str:
        """The budget ran out before this run's write was made, while it waited on the
        service: make it now, straight to the spool, within WRITE_GRACE_S past the budget.
        Content that only exists in this hook's input is not dropped for being late; the
        harness's own timeout (2x the budget, `install`) leaves the room."""
        self.go_offline(spent)
        self.watchdog.active = True
        lite.setitimer(lite.ITIMER_REAL, max(self.watchdog.limit - time.monotonic(), 0.001))
        try:
            return self.handle()
        finally:
            self.watchdog.active = False


def _run(argv: list[str], started: float) -> int:
    # A tool hook's command carries the tools install was told to capture.
    option = argv[2] if len(argv) == 3 else ""
    if len(argv) not in (2, 3) or (option and not option.startswith(TOOL_CAPTURE_OPTION)):
        _stderr("usage: memory-mcp hook <harness> <event> [--tool-capture=TOOLS] "
                "(hook JSON on stdin)")
        return 0
    harness, event = argv[:2]
    entry: dict[str, Any] = {"harness": harness, "event": event}
    try:
        settings = HookSettings.from_env()
        if not settings.tool_capture():  # the tools named where the agent runs win
            settings.plugin_tool_capture = option.removeprefix(TOOL_CAPTURE_OPTION)
    except ValueError as exc:  # SettingsError, or config.ConfigError for another variable
        _stderr(f"memory-mcp hook: {exc}")
        # Harnesses hide stderr: the hook log (beside the db, as far as it can be told) says
        # why every hook does nothing. Never beside a relative one: that is the agent's repo.
        db_path = os.path.expanduser(os.environ.get("MEMORY_DB_PATH", ""))
        fallback = HookSettings(db_path=db_path if os.path.isabs(db_path) else "")
        entry.update(outcome="error", detail=f"invalid setting, hooks are off: {exc}"[:500],
                     ms=round((time.monotonic() - started) * 1000, 1))
        outcomes.record(fallback, entry)
        return 0
    debug = _debugger(settings, harness, event)
    budget_end = started + settings.hook_budget_s
    output = ""
    address = resolve_address(settings)
    offline = _offline(settings, address.url)
    writes_held = _held(settings, address.url) if offline is None else None
    watchdog = Watchdog(budget_end + WRITE_GRACE_S)
    run = _Run(harness, event, settings, budget_end, address, offline, watchdog, debug,
               writes_held)
    armed = lite.HAS_ALARM  # POSIX; elsewhere the socket timeouts bound it
    if armed:
        previous = lite.signal(lite.SIGALRM, watchdog)
    try:
        if armed:  # inside the try: a budget spent already fires at once
            lite.setitimer(lite.ITIMER_REAL,
                           max(budget_end - EXIT_MARGIN_S - time.monotonic(), 0.001))
        output = run.handle()
        watchdog.active = False
        assert run.call is not None
        entry.update(outcome=run.call.outcome, detail=run.call.detail)
    except HookTimeout:
        watchdog.active = False
        output, outcome = _timed_out(run, settings)
        entry.update(outcome)
    except NoInput as exc:
        watchdog.active = False
        output = ""
        entry.update(outcome="skipped", detail=f"no hook input ({exc})")
    except ServiceUnavailable as exc:
        watchdog.active = False
        output = ""
        entry.update(outcome=exc.outcome, detail=str(exc))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - fail open, but visibly
        # SystemExit too: an adapter's sys.exit(2) would block the prompt in some harnesses.
        watchdog.active = False
        output = ""
        entry.update(outcome="error", detail=f"{type(exc).__name__}: {exc}"[:500])
    finally:
        watchdog.active = False
        if armed:
            lite.setitimer(lite.ITIMER_REAL, 0)
            lite.signal(lite.SIGALRM, previous)
    call, service = run.call, run.service
    if call is not None:
        service = call.service  # autostart may have swapped in the service it started
        # The project as far as it was worked out (a run that failed early never needed it).
        entry.update(session=call.session, project=call.project_if_known())
        if call.warning:
            entry["warning"] = call.warning
    if run.conflict:
        entry["warning"] = "; ".join(filter(None, (entry.get("warning"), run.conflict)))
    entry["ms"] = round((time.monotonic() - started) * 1000, 1)
    if entry.get("outcome") in outcomes.FAILURES:
        debug(f"{entry['outcome']}: {entry.get('detail')}")
    undelivered = None
    if output:
        undelivered = _print(output if output.endswith("\n") else output + "\n")
        if undelivered:
            entry["warning"] = "; ".join(filter(None, (entry.get("warning"), undelivered)))
    writes_wait = False
    if call is not None and call.report is not None and output and undelivered is None \
            and service is not None:
        writes_wait = _report(service, call.report, entry)
    if service is not None and offline is None:
        _after_contact(settings, service, entry, budget_end, replay=not writes_wait)
    if call is not None and call.lost:  # the log may be on the same full disk: say it here
        _stderr(f"memory-mcp hook {harness} {event}: {call.shortfall()}")
    outcomes.record(settings, entry)
    return 0


def _report(service: ServiceClient, body: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Post the injection report, once the block it reports is printed: a write, which a long
    writer (a purge, an import) holds back while the recall before it answered at once, so it
    must never cost the block. Telemetry: sent once within REPORT_S and what is left of the
    budget, never spooled or retried; its failure is a note in the log line, not the hook's
    outcome, and starts no back-off (the service answered the recall). True when it timed
    out: writes are waiting, so a spool replay now would only wait too."""
    failure = service.failure
    deadline = min(service.deadline, time.monotonic() + REPORT_S)
    try:
        service.post("/inject/report", body, deadline=deadline)
    except ServiceUnavailable as exc:
        entry["detail"] = f"{entry.get('detail') or ''}; report failed: {exc}"
        return isinstance(exc, ServiceTimeout)
    finally:
        service.failure = failure  # not the service failing to answer: no back-off for it
    return False


def _print(text: str) -> str | None:
    """Print the hook's answer; why it could not be, else None. Written as UTF-8 bytes,
    whatever stdout's encoding says (a Windows pipe's cp1252, PYTHONIOENCODING): harnesses
    read their hooks' answers as UTF-8, and a text stream that cannot encode a CJK memory lost
    the answer. A harness that closed the hook's stdout, or stopped reading it (a broken pipe),
    costs the answer, never the exit status or the log line: stdout then goes to /dev/null,
    so the interpreter's own flush at exit does not fail again."""
    try:
        sys.stdout.buffer.write(text.encode("utf-8", "replace"))  # a lone surrogate: "?"
        sys.stdout.buffer.flush()
    except (AttributeError, OSError, ValueError) as exc:  # None, EPIPE, closed file
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)
        except OSError:
            pass
        return f"the answer was not delivered: stdout {'closed' if sys.stdout is None else exc}"
    return None


def _timed_out(run: _Run, settings: HookSettings) -> tuple[str, dict[str, Any]]:
    """(what to print, the outcome) of a run the watchdog stopped: a write it was making is
    spooled, one it had not made yet is made offline (`_Run.finish_offline`), one the write
    grace ran out on too is an `error` saying what was not written (`_not_written`); anything
    else (a recall, no input) is a timeout."""
    spent = _spent(settings)
    if run.awaiting_input:  # stdin open, and nothing in it by the budget's end: no write
        return "", {"outcome": "timeout", "detail": f"{spent} waiting for the hook input "
                                                    "(none came)"}
    if run.service is not None and run.watchdog.waiting:
        run.service.failure = ServiceTimeout(f"{run.service.url} did not answer within the "
                                             "budget")
    saved = _saved(run, spent)
    if saved is not None:  # a "remember" spooled here is told as one the request spooled
        told = saved["outcome"] == "spooled" and run.action == "prompt" and run.remembers
        return (_notice(run, WILL_STORE) if told else ""), saved
    grace = f", and its write grace of {WRITE_GRACE_S} s," if run.late else ""
    stuck = run.stuck_in()
    if stuck is not None:  # never asked again here: it is what overran
        if run.action in ("compact", "tool") or run.remembers:  # a write, known to be one
            return _not_written(run, f"{spent}{grace} in {stuck}")
        return "", {"outcome": "timeout", "detail": f"{spent}{grace} in {stuck}"}
    _settle_remember(run)
    if not run.writes():
        return "", {"outcome": "timeout", "detail": f"{spent} ({_work(run.action)})"}
    if run.late or not lite.HAS_ALARM:  # it went on offline, and the grace ran out too
        return _not_written(run, f"{spent}{grace} before the write was made")
    try:
        output = run.finish_offline(spent)
    except HookTimeout:
        return _timed_out(run, settings)  # `late` now: saved, stuck or not written
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - fail open, but visibly
        return "", {"outcome": "error", "detail": f"{spent}; then {type(exc).__name__}: "
                                                  f"{exc}"[:500]}
    assert run.call is not None
    return output, {"outcome": run.call.outcome, "detail": run.call.detail}


def _settle_remember(run: _Run) -> None:
    """Work out `run.remembers` of a prompt read before the budget ran out, if the run had
    not yet (`_briefly`: out of the signal handler, the first `import re` is whole)."""
    if run.action != "prompt" or run.remembers is not None:
        return
    prompt = run.reads.answers.get("prompt")
    if isinstance(prompt, str):
        run.remembers = _briefly(run, lambda: remembered(prompt) is not None)


def _not_written(run: _Run, spent: str) -> tuple[str, dict[str, Any]]:
    """(what to print, the outcome) of a write the budget and its grace ran out on before it
    was made (`spent` says where): an `error` naming it, a line on stderr, and for a
    "remember" a notice that tells the model it is not stored (`NOT_STORED`), as when the
    spool cannot keep it; not when the adapter's own method overran (`stuck_in`)."""
    # A prompt read and not ruled out (`may_remember`) starts as a "remember" does: the full
    # test may not have had the time.
    remember = run.remembers or (run.action == "prompt" and "prompt" in run.reads.answers)
    if run.action == "compact":
        lost = "the flush was not written"
    elif run.action == "tool":
        lost = "the tool output was not stored"
    elif remember:
        lost = "the remember was not stored"
    elif run.action == "prompt":  # its input not read in time
        lost = "if the prompt was a remember, it was not stored"
    else:  # the adapter not found yet
        lost = "anything it was to store was not stored"
    detail = f"{spent}: {lost}"
    _stderr(f"memory-mcp hook {run.harness} {run.event}: {detail}")
    output = _notice(run, NOT_STORED) if remember and run.stuck_in() is None else ""
    return output, {"outcome": "error", "detail": detail}


def _notice(run: _Run, text: str) -> str:
    """`text` as the adapter prints it for the model (`context_output`); "" when that cannot
    be had (no call yet, or the adapter fails or overruns `_briefly`)."""
    call, adapter = run.call, run.adapter
    if call is None or adapter is None:
        return ""
    return _briefly(run, lambda: adapter.context_output(call, text)) or ""


def _briefly(run: _Run, step: Callable[[], Any]) -> Any:
    """`step()`, a last step of a stopped run, within LAST_STEP_S (the watchdog armed again,
    only to raise); None when it fails or overruns: the run is past its write grace already,
    and the harness's own timeout is near."""
    if not lite.HAS_ALARM:
        try:
            return step()
        except Exception:  # noqa: BLE001 - a last step is worth no more than this
            return None
    watchdog = run.watchdog
    kept = watchdog.carry_on, watchdog.call, watchdog.service, watchdog.reading
    watchdog.carry_on, watchdog.call, watchdog.service, watchdog.reading = None, None, None, False
    try:
        try:
            watchdog.active = True
            lite.setitimer(lite.ITIMER_REAL, LAST_STEP_S)
            return step()
        finally:
            watchdog.active = False
            lite.setitimer(lite.ITIMER_REAL, 0)
    except (HookTimeout, Exception):  # noqa: BLE001 - a last step is worth no more than this
        return None
    finally:
        watchdog.carry_on, watchdog.call, watchdog.service, watchdog.reading = kept


def _spent(settings: HookSettings) -> str:
    """What the log line says first of a run the budget ran out on."""
    return f"budget of {settings.hook_budget_s} s spent"


def _saved(run: _Run, spent: str) -> dict[str, Any] | None:
    """The outcome of a stopped run whose writes were made: those in flight spooled now, or
    in the spool or the store already; an error naming the memories the write grace left
    unwritten; None when it made none."""
    call = run.call
    if call is None:
        return None
    if run.watchdog.in_flight is not None:  # a write in flight: keep it and what follows it
        bodies, run.watchdog.in_flight = run.watchdog.in_flight, None
        call.spool_all(bodies, "the service did not answer in time")
        call.wrote = True
    spooled = f"{call.spooled_memories} spooled in {call.spooled} write(s)"
    if call.unwritten:  # counted in memories, as the spooled ones
        return {"outcome": "error", "detail": f"{spent}; {spooled} ({call.spool_reason}), "
                                              f"{call.shortfall()}"}
    if call.spooled:
        return {"outcome": "spooled", "detail": f"{spent}; {spooled} ({call.spool_reason})"}
    if call.wrote:
        return {"outcome": "stored", "detail": f"{spent} once its writes were stored"}
    return None


def _offline(settings: HookSettings, url: str) -> ServiceUnavailable | None:
    """The error every request of this run raises at once while the hooks back off from the
    service at `url`."""
    state = backoff.active(beside_db(settings, "hooks.backoff.json"), url)
    if state is None:
        return None
    until = time.strftime("%H:%M:%S", time.localtime(state.until))
    detail = f"backing off until {until}, no request made (the last try: {state.detail})"
    return ServiceTimeout(detail) if state.outcome == "timeout" else ServiceDown(detail)


def _held(settings: HookSettings, url: str) -> ServiceUnavailable | None:
    """The error every write (not a recall) of this run raises at once while the slow mark
    of the service at `url` holds (backoff.py): spooled without waiting, replayed by the
    service."""
    mark = backoff.slow(beside_db(settings, "hooks.backoff.json"), url)
    if mark is None:
        return None
    until = time.strftime("%H:%M:%S", time.localtime(mark.until))
    return ServiceTimeout(f"the service is slow, spooled without waiting (slow mark until "
                          f"{until}; the last try: {mark.detail})")


def _after_contact(settings: HookSettings, service: ServiceClient, entry: dict[str, Any],
                   budget_end: float, replay: bool = True) -> None:
    """A service that is down or hung starts the back-off; one that answered ends it and
    (with `replay`) gets what the spool holds, within what is left of this hook's budget.
    Hung, not slow: a request that was sent and timed out (`service.failure`; one there was
    no time to send is no failure of the service's, `NotSent`) starts it only when the
    service answers no probe either (`answers`), given its whole PROBE_S inside the write's
    grace past the budget. A hook the machine starved past that has no time to tell, and
    starts none: one late hook must not blank every agent's recalls for the back-off's 30 s,
    nor must a write waiting behind a long writer (a purge, an import), which does not hold
    recalls back. Slow (the probe answered, or an earlier request of this run did) sets the
    slow mark instead: the writes of the next hooks spool at once rather than each wait its
    whole budget too. A write the service took ends it."""
    state = beside_db(settings, "hooks.backoff.json")
    failure = service.failure
    slow_s = backoff.slow_seconds(settings.hook_backoff_s)
    if failure is not None and not service.answered:
        if isinstance(failure, ServiceTimeout) and settings.hook_backoff_s > 0:
            why = _not_hung(service, budget_end)
            if why == SLOW:
                backoff.mark_slow(state, service.url, slow_s, str(failure))
            if why is not None:
                entry["detail"] = f"{entry.get('detail') or ''}; {why}, no back-off"
                return
        backoff.start(state, service.url, settings.hook_backoff_s, failure.outcome,
                      str(failure))
        return
    if not service.answered:
        return
    backoff.clear(state, service.url)
    if isinstance(failure, ServiceTimeout):  # it answered, then a later request timed out
        backoff.mark_slow(state, service.url, slow_s, str(failure))
    elif service.wrote:
        backoff.clear_slow(state, service.url)
    # While the mark holds the service replays the spool itself: a replay here would wait.
    if not replay or service.writes_held is not None or not _spooled(beside_db(settings, "spool")):
        return
    from .. import spool

    folder = settings.spool_path
    deadline = min(budget_end - EXIT_MARGIN_S - REPLAY_MARGIN_S, time.monotonic() + REPLAY_S)
    try:
        done = spool.replay(folder, spool_sender(service, deadline), deadline=deadline)
    except (HookTimeout, OSError):
        return
    if done.sent or done.rejected:
        entry["replayed"] = done.sent
        if done.rejected:
            entry["replay_refused"] = done.rejected


#: `_not_hung`'s answer for a service that answered the probe: the one that sets the slow mark.
SLOW = "the service answers a probe: slow, not hung"


def _not_hung(service: ServiceClient, budget_end: float) -> str | None:
    """Why a service whose request timed out is not taken for hung (None: it is): it answers
    a probe (SLOW), or this hook has less than PROBE_S left of its grace to ask one."""
    start = time.monotonic()
    if budget_end + WRITE_GRACE_S - start < PROBE_S:
        return "no time left to probe the service"
    if answers(service.url, service.token, start + PROBE_S):
        return SLOW
    return None


def _spooled(folder: str) -> bool:
    """Whether the spool may hold a write (`spool.pending`'s test, without importing it)."""
    try:
        with os.scandir(folder) as entries:
            return any(e.name.endswith(".json") and not e.name.startswith(".") for e in entries)
    except OSError:
        return False


def _work(action: str | None) -> str:
    """What a timed-out hook was doing, for its log line."""
    return "recall" if action in ("prompt", "session_start") else action or "starting"


def read_payload(run: _Run | None = None, first_by: float | None = None,
                 until: float | None = None) -> dict[str, Any]:
    """The hook input: a JSON object on stdin (empty input = an empty object), as valid
    Unicode (`lite.loads_input`): everything downstream encodes it without a failure.
    NoInput when stdin is closed or a terminal (no harness writes there: a person ran it).
    With deadlines (`time.monotonic()`), the read ends by itself: HookTimeout when no byte
    came by `first_by` (`run.awaiting_input`, cleared once the first bytes come, stays set),
    InputCut when the rest did not come by `until`."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise NoInput("stdin is closed")
    try:
        if stream.isatty():
            raise NoInput("stdin is a terminal")
        fd = stream.fileno()
    except ValueError:  # closed (io.UnsupportedOperation, no descriptor, is one too)
        if stream.closed:
            raise NoInput("stdin is closed") from None
        fd = None
    wait = _waiter(fd) if first_by is not None and lite.HAS_ALARM else None
    if wait is None and run is not None:  # a read that may block: only the alarm ends it
        run.watchdog.reading = False
    chunks: list[bytes] = []
    size = 0
    while size < MAX_INPUT_BYTES:
        if wait is not None and not wait(until if chunks else first_by):
            if chunks:
                raise InputCut(f"the hook input did not all come within the budget and its "
                               f"write grace ({size} bytes came)")
            raise HookTimeout()
        want = min(READ_CHUNK, MAX_INPUT_BYTES - size)
        chunk = os.read(fd, want) if wait is not None else stream.read1(want)
        if not chunk:
            break
        chunks.append(chunk)
        if run is not None:
            run.awaiting_input = False
        size += len(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    data = lite.loads_input(raw)
    if not isinstance(data, dict):
        raise ValueError("hook input is not a JSON object")
    return data


def _waiter(fd: int | None) -> Callable[[float | None], bool] | None:
    """`wait(deadline)`: whether stdin (`fd`) has a byte or its end to read by then (always,
    for a regular file: reading one never waits); None where it cannot be waited on (no
    descriptor). With one, the read needs no alarm to end it, so it is never cut between a
    chunk read and the chunk kept."""
    if fd is None:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return _ready
        import select  # a pipe, the harnesses' way: C, under a millisecond

        select.select([fd], [], [], 0)  # one select takes, or there is none to wait with
    except (OSError, ValueError, ImportError):
        return None

    def wait(deadline: float | None) -> bool:
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if select.select([fd], [], [], left)[0]:
                return True
            if left == 0.0:  # asked with no time left: nothing came
                return False

    return wait


def _ready(deadline: float | None) -> bool:
    """A regular file's `wait`: its bytes (or its end) are always there to read."""
    return True


def _debugger(settings: HookSettings, harness: str, event: str) -> Any:
    """MEMORY_PLUGIN_DEBUG's writer: a line on stderr per step, or nothing."""
    if not settings.plugin_debug:
        return lambda message: None
    return lambda message: _stderr(f"memory-mcp hook {harness} {event}: {message}")


def _stderr(line: str) -> None:
    """A line on stderr, if it can be written: a harness may start the hook with stderr
    closed (`2>&-`), and a diagnostic must never cost the hook its write or its exit code."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # None, a closed or broken stream
        pass
