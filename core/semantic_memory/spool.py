"""The write spool: where a write goes when the service cannot take it in time.

A hook (or the opencode plugin, or the stdio MCP proxy) that cannot hand a write to the
service within its budget (service down, hung, slow, starting) appends the request here
instead and exits on time; the service replays the spool at start and every few seconds
after, and so does a hook that finds the service up. Replaying is idempotent: the service
dedups by content hash, so a write that landed after all (its answer came too late) replays
as a `duplicate`, never as a second memory.

Layout (shared with the opencode plugin's TypeScript, keep both in step): a folder `spool/`
beside the db file, one file per write, named `<time_ns, 20 digits>-<pid>-<8 hex>.json` so
that names sort oldest first. A file holds one JSON object
`{"v": 1, "ts": <unix s>, "harness": …, "event": …, "path": "/ingest", "body": {…}}`, `body`
being exactly the JSON the service's `path` takes. A writer writes `.<name>.tmp`, fsyncs it
and renames it into place, so a reader never sees half a file. A replayer claims a file by
renaming it to `<name>.claim-<pid>` (one rename wins), deletes it once the service answered,
renames it back when the service could not take it, and moves it to `rejected/` (reason
added) when the service refused it as invalid: nothing is dropped silently. A claim goes back
to the queue (`release_stale`) once its replayer died: at once when no process with the pid in
its name exists on this machine (a killed hook, CLI or service can never finish it), and when
it is older than CLAIM_STALE_S whatever the pid (the pid may live on in an unrelated process).
A claim in `rejected/` (`purge --matching` claims the refused writes it scrubs) goes back
there the same way. By the same rule a writer's `.<name>.tmp` (the pid is in `<name>`) that
a killed hook left whole joins the queue as `<name>.json`, replayed like any other, and a
half-written one is removed: it held a write unseen by any list, replay or purge. The
service releases claims at every look, even when nothing else is queued, and a replay counts
the claims still held as `left`: a claimed write is waiting, not stored.

Hook processes import this module: standard library only, nothing heavy.
"""

from __future__ import annotations

import os
import time

from .lite import dumps, replace_private, try_loads

# A hook that spools imports this module: no typing, pathlib or json at import (`append`
# takes a folder as a string too; `lite` reads and writes the JSON).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any

VERSION = 1
SUFFIX = ".json"
CLAIM = ".claim-"
#: A file being written (`.<name>.tmp`), renamed into place once whole.
TEMP = ".tmp"
REJECTED = "rejected"
#: A claim this old belongs to a replayer that died: the write goes back to the queue.
CLAIM_STALE_S = 120.0


class Retry(Exception):
    """The service could not take a write now; it stays in the spool."""


class Refused(Exception):
    """The service refused a write as invalid; it moves to `rejected/` with this reason."""


class Stuck(OSError):
    """This process cannot take writes from the spool (its user may not write or list the
    folder: one made by a `sudo` run, say); they wait there. The message is one line. An
    OSError: a hook's replay gives up on it as on any other I/O error."""


#: What to check when a spool cannot be replayed (said with the reason, in one line).
_STUCK_ADVICE = ("the user that replays the spool must be able to write it and read its "
                 "files (a `sudo` run may have made them root's)")


class Depth(tuple):  # (count, oldest, rejected): a NamedTuple without importing typing
    __slots__ = ()

    def __new__(cls, count: int, oldest: float | None, rejected: int) -> Depth:
        return tuple.__new__(cls, (count, oldest, rejected))

    count = property(lambda self: self[0])
    oldest = property(lambda self: self[1])  # unix seconds of the oldest pending write
    rejected = property(lambda self: self[2])


class Replayed(tuple):  # (sent, rejected, left); `why`: what stopped it, when the service did
    def __new__(cls, sent: int, rejected: int, left: int, why: str | None = None) -> Replayed:
        replayed = tuple.__new__(cls, (sent, rejected, left))
        replayed.why = why  # the Retry's reason ("HTTP 401: …"): `spool replay` says it
        return replayed

    sent = property(lambda self: self[0])
    rejected = property(lambda self: self[1])
    left = property(lambda self: self[2])


def append(folder: str | Path, path: str, body: dict[str, Any], *, harness: str = "",
           event: str = "", rejected: str | None = None) -> str | Path:
    """Write one request durably (fsync'd, atomically named); returns its file. Raises
    OSError when the disk cannot take it (the caller reports that write as lost). The text is
    kept as given, like the harness's own transcript beside it: the service's filters (secret
    redaction, the injection filter) run when it replays the write. `rejected`: the reason
    the service refused the write; it goes to `rejected/` instead, for a person to see."""
    name = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}"
    record = {"v": VERSION, "ts": round(time.time(), 3), "harness": harness, "event": event,
              "path": path, "body": body}
    if rejected is not None:
        record.update(rejected=rejected[:500], rejected_at=record["ts"])
    data = dumps(record).encode("utf-8")
    directory = os.path.join(os.fspath(folder), REJECTED) if rejected is not None \
        else os.fspath(folder)
    if not os.path.isdir(directory):
        # The db's folder too, when this write is the first thing in it: 0700 like the spool
        # (Settings.make_data_folder's rule; a hook does not import config).
        os.makedirs(os.path.dirname(os.path.abspath(os.fspath(folder))), mode=0o700,
                    exist_ok=True)
        os.makedirs(directory, mode=0o700, exist_ok=True)
    final = os.path.join(directory, name + SUFFIX)
    replace_private(final, data, temp=os.path.join(directory, f".{name}{TEMP}"), durable=True)
    _sync_folder(directory)
    if isinstance(folder, str):
        return final
    return (folder / REJECTED if rejected is not None else folder) / (name + SUFFIX)


def _sync_folder(folder: str | Path) -> None:
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def pending(folder: Path, strict: bool = False) -> list[Path]:
    """The queued writes, oldest first (claimed ones excluded). A folder that cannot be
    listed holds none, unless `strict`: then one this user may not list raises Stuck."""
    try:
        with os.scandir(folder) as entries:
            names = [e.name for e in entries
                     if e.name.endswith(SUFFIX) and not e.name.startswith(".") and e.is_file()]
    except PermissionError as exc:
        if strict:
            raise Stuck(f"cannot list the spool {folder} ({exc.strerror}): "
                        + _STUCK_ADVICE) from None
        return []
    except OSError:
        return []
    return [folder / name for name in sorted(names)]


def read(file: Path) -> dict[str, Any] | None:
    """One spooled record, or None when it is not one (it then stays for a person to see)."""
    try:
        return _record(file.read_bytes())
    except OSError:
        return None


def _record(raw: bytes) -> dict[str, Any] | None:
    record = try_loads(raw)
    if not isinstance(record, dict) or not isinstance(record.get("body"), dict) \
            or not isinstance(record.get("path"), str):
        return None
    return record


def blocked(folder: Path) -> str | None:
    """Why this process could not replay what waits in `folder` (it may not list the folder,
    or writes wait and it may not write it), else None: what `memory-mcp doctor` shows, which
    takes no write to find out."""
    try:
        files = pending(folder, strict=True)
    except Stuck as exc:
        return str(exc)
    if files and not os.access(folder, os.W_OK | os.X_OK):
        return f"{len(files)} write(s) wait in {folder}, which this user may not write: " \
               + _STUCK_ADVICE
    return None


def unwritable(folder: Path) -> str | None:
    """Why a write could not be spooled in `folder` now (this user may not write it, or the
    nearest folder above it that exists, which appending would create it in), else None:
    what `memory-mcp doctor` shows before a hook meets it."""
    place = folder
    while not place.is_dir():
        if place.exists() or place.parent == place:  # a file in the way: appending says so
            return None
        place = place.parent
    if os.access(place, os.W_OK | os.X_OK):
        return None
    return (f"this user may not write {place}: a write the service cannot take now is not "
            "kept (the hook tells the model it was not stored); " + _STUCK_ADVICE)


def depth(folder: Path) -> Depth:
    """How many writes wait, since when, and how many were refused."""
    files = pending(folder)
    claimed = _claims(folder)
    oldest = None
    if files or claimed:
        first = min([f.name for f in files] + [c.name for c in claimed])
        try:
            oldest = int(first.split("-", 1)[0]) / 1e9
        except ValueError:
            oldest = None
    return Depth(len(files) + len(claimed), oldest, len(pending(folder / REJECTED)))


def _claims(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return [folder / e.name for e in entries if CLAIM in e.name]
    except OSError:
        return []


def process_gone(pid: int) -> bool:
    """Whether no process has `pid` on this machine, so what it named as its own (a claim, a
    temporary file) will never be finished. Only "no such process" says so; a live pid (the
    owner at work, or an unrelated process that reused the pid) or any doubt says no. POSIX
    only: on Windows os.kill(pid, 0) is not a probe."""
    if os.name != "posix" or pid <= 0:  # 0 and negatives name process groups
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: alive, another user's
        return False
    return False


def _claim_pid(name: str) -> int | None:
    tail = name.rsplit(CLAIM, 1)[-1]
    return int(tail) if tail.isdigit() else None


def _temp_owner(name: str) -> tuple[int | None, str | None] | None:
    """Whose temporary file `name` is, from its name: (the pid of the process writing it, None
    where the name does not say; the queue name it was to take when it is a write being
    spooled, else None), or None when it is no temporary file of the spool's."""
    if not (name.startswith(".") and name.endswith(TEMP)):
        return None
    stem = name[1:-len(TEMP)]
    if stem.endswith(SUFFIX):  # `.<name>.json.tmp`: an earlier release's copy, the opencode
        return None, None      # plugin's refused write: no pid
    head, _, pid = stem.rpartition(".")
    if head.endswith(SUFFIX) and pid.isdigit():  # `_temp_name`: a scrubbed or refused copy
        return int(pid), None
    parts = stem.split("-")
    if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():  # `append`'s
        return int(parts[1]), stem + SUFFIX
    return None


def _orphans(directory: Path, now: float) -> list[tuple[Path, Path | None]]:
    """What processes that died left in `directory`, each with where it goes.

    - A claim whose replayer is gone goes back to its queue name. A claim a live replayer holds
      is not one: the write it is sending is never sent twice.
    - A temporary file whose writer is gone: a write being spooled that is whole (it parses:
      the writer was killed between its last write and its rename, the bytes are in the file)
      takes the queue name its writer was renaming it to, so it is replayed, and only once
      (one of two renames to one name wins; the service dedups by content besides). Any other
      (half written, or the copy a scrub or a refusal was writing: its write is still in its
      claim) is removed: None.

    Gone: no process has the pid in its name, or the file is older than CLAIM_STALE_S whatever
    the pid (it may live on in an unrelated process; a hook writes its file in milliseconds)."""
    try:
        with os.scandir(directory) as entries:
            names = [e.name for e in entries if CLAIM in e.name or e.name.endswith(TEMP)]
    except OSError:
        return []
    found: list[tuple[Path, Path | None]] = []
    for name in names:
        path = directory / name
        temp = None if CLAIM in name else _temp_owner(name)
        if CLAIM not in name and temp is None:
            continue
        pid = _claim_pid(name) if temp is None else temp[0]
        try:
            fresh = now - path.stat().st_mtime < CLAIM_STALE_S
        except OSError:  # put back or finished meanwhile
            continue
        if fresh and (pid is None or not process_gone(pid)):
            continue
        if temp is None:
            found.append((path, _original(path)))
        else:
            queued = temp[1]
            found.append((path, directory / queued if queued and read(path) else None))
    return found


def release_stale(folder: Path, now: float | None = None) -> int:
    """Settle what dead processes left in the spool and in `rejected/` (`_orphans`): their
    claims go back to the queue, a whole write a killed hook was spooling joins it, other
    temporary files go. Returns how many writes went back to the queue."""
    now = time.time() if now is None else now
    count = 0
    for directory in (folder, folder / REJECTED):
        for left, home in _orphans(directory, now):
            try:
                if home is None:
                    left.unlink()
                    continue
                os.replace(left, home)
            except OSError:  # settled by another process meanwhile
                continue
            count += 1
            if TEMP in left.name:
                _sync_folder(directory)
    return count


def claim(file: Path) -> Path | None:
    """Take `file` for replaying; None when another replayer took it first (it is gone).
    Stuck when this process may not take it (the folder is not writable for its user): that
    is no other replayer's doing, and the write would wait unseen."""
    claimed = file.with_name(f"{file.name}{CLAIM}{os.getpid()}")
    try:
        os.rename(file, claimed)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Stuck(f"cannot take a write from the spool {file.parent} to replay it "
                    f"({exc.strerror or exc}): {_STUCK_ADVICE}") from None
    try:
        os.utime(claimed)  # the claim's age, for release_stale
    except OSError:  # another user's file: the claim ages from the write's time (sooner free)
        pass
    return claimed


def _original(claimed: Path) -> Path:
    return claimed.with_name(claimed.name.split(CLAIM, 1)[0])


def replay(folder: Path, send: Callable[[str, dict[str, Any]], Any],
           deadline: float | None = None, limit: int | None = None) -> Replayed:
    """Send the queued writes oldest first until the queue is empty, `send` raises Retry
    (the service cannot take writes now), `deadline` (time.monotonic()) passes or `limit`
    writes were handled. `send(path, body)` returns normally once the service took the write
    (stored or already stored) and raises Refused when it refused it as invalid. What it
    returns is the service's answer (or None): the memories of a write that it refused one by
    one (a 200 answer, an item's status `rejected`: a secret, say) go to `rejected/` with
    their reasons too, so nothing is dropped silently. `left`: the writes still unstored when it
    returns, those another live replayer holds included (`memory-mcp spool replay` exits 1 on
    them); stopped early, it counts the queue as listed at the start. Stuck when this process
    may not take or read the writes (see `claim`): they stay queued."""
    release_stale(folder)
    sent = rejected = 0
    files = pending(folder)
    for index, file in enumerate(files):
        if (deadline is not None and time.monotonic() >= deadline) or \
                (limit is not None and sent + rejected >= limit):
            return Replayed(sent, rejected, len(files) - index)
        claimed = claim(file)
        if claimed is None:
            continue
        try:
            record = _record(claimed.read_bytes())
        except OSError as exc:  # another user's 0600 file: not to be rejected as unreadable
            _put_back(claimed)
            raise Stuck(f"cannot read {file} ({exc.strerror or exc}): "
                        + _STUCK_ADVICE) from None
        if record is None:
            _reject(claimed, "not a spooled write (unreadable JSON)")
            rejected += 1
            continue
        try:
            answer = send(record["path"], record["body"])
        except Refused as exc:
            _reject(claimed, str(exc), record)
            rejected += 1
            continue
        except Retry as exc:
            _put_back(claimed)
            return Replayed(sent, rejected, len(files) - index, str(exc) or None)
        except BaseException:  # a bug, a timeout, the hook's watchdog: it stays queued
            _put_back(claimed)
            raise
        refused = refused_items(record["body"], answer)
        if refused:
            body, reason = refused
            _reject(claimed, reason, {**record, "body": body})  # the rest was taken
            rejected += 1
            if body is record["body"]:
                continue
        else:
            try:
                claimed.unlink()
            except OSError:
                pass
        sent += 1
    # Another replayer may still hold a write we skipped, or one released or spooled since:
    # counted, so "nothing left" means nothing is waiting.
    return Replayed(sent, rejected, _waiting(folder))


def _waiting(folder: Path) -> int:
    """The writes queued or claimed now (one listing; `depth` without the oldest's time)."""
    try:
        with os.scandir(folder) as entries:
            return sum(1 for e in entries if CLAIM in e.name or (
                e.name.endswith(SUFFIX) and not e.name.startswith(".") and e.is_file()))
    except OSError:
        return 0


def refused_items(body: dict[str, Any], answer: Any) -> tuple[dict[str, Any], str] | None:
    """(what of `body` the service refused, why) from its /ingest answer; None when it took
    everything. A batch gives back the refused items alone (`{"items": [...]}`); a whole
    write refused is `body` itself."""
    if not isinstance(answer, dict):
        return None
    if answer.get("status") == "rejected":
        return body, str(answer.get("reason") or "refused")
    results, items = answer.get("results"), body.get("items")
    if not isinstance(results, list) or not isinstance(items, list):
        return None
    pairs = [(item, result) for item, result in zip(items, results, strict=False)
             if isinstance(result, dict) and result.get("status") == "rejected"]
    if not pairs:
        return None
    reasons = "; ".join(dict.fromkeys(str(r.get("reason") or "refused") for _, r in pairs))
    if len(pairs) == len(items):
        return body, reasons
    return {**body, "items": [item for item, _ in pairs]}, reasons


def _put_back(claimed: Path) -> None:
    try:
        os.replace(claimed, _original(claimed))
    except OSError:
        pass


def _reject(claimed: Path, reason: str, record: dict[str, Any] | None = None) -> None:
    """Keep a refused write under rejected/ with the reason, for `memory-mcp spool list`."""
    target = claimed.parent / REJECTED / _original(claimed).name
    try:
        target.parent.mkdir(mode=0o700, exist_ok=True)
        if record is None:
            os.replace(claimed, target)
            return
        record = {**record, "rejected": reason[:500], "rejected_at": round(time.time(), 3)}
        replace_private(target, dumps(record).encode("utf-8"),
                        temp=_temp_name(target.parent, target.name))
        claimed.unlink()
    except OSError:
        _put_back(claimed)


def records(folder: Path) -> Iterator[tuple[Path, dict[str, Any] | None]]:
    """Each queued write and its record (None when unreadable), oldest first, once what dead
    processes left is settled (`release_stale`): a write a killed hook was spooling is
    listed."""
    release_stale(folder)
    for file in pending(folder):
        yield file, read(file)


def clear(folder: Path, rejected_too: bool = False) -> int:
    """Delete the queued writes (and the rejected ones); returns how many went. What dead
    processes left is settled first, so their writes go too."""
    release_stale(folder)
    files = pending(folder) + (pending(folder / REJECTED) if rejected_too else [])
    count = 0
    for file in files:
        try:
            file.unlink()
            count += 1
        except OSError:
            continue
    return count


def scrub(folder: Path, holds: Callable[[dict[str, Any]], bool], dry_run: bool = False
          ) -> int:
    """Take every memory `holds` says yes to out of the queued writes and the refused ones
    (`memory-mcp purge --matching`: a replay would store it again): a write left with none is
    deleted, another rewritten under its own name (its place in the queue stays). Each is
    claimed while it is read and rewritten, so a replayer never sends it half done; one a live
    replayer holds now is passed over. What a dead process left is covered too: a killed
    replayer's or scrub's claim first goes back to the queue (a dry run reads it where it is),
    so a purge run again after an interrupted one finds every copy. Interrupted itself (Ctrl-C,
    an error), a scrub puts the write it holds back; killed, it leaves the claim to the next
    `release_stale`, holding the write either as it was or scrubbed, never the old text over a
    scrubbed copy. Returns how many memories went (would go: `dry_run`)."""
    directories = (folder, folder / REJECTED)
    if dry_run:
        now = time.time()
        left = [file for d in directories for file, home in _orphans(d, now) if home]
        return sum(_scrub_one(file, holds, dry_run=True)
                   for file in [*pending(folder), *pending(folder / REJECTED), *left])
    release_stale(folder)
    count = 0
    for file in [*pending(folder), *pending(folder / REJECTED)]:
        claimed = claim(file)
        if claimed is None:
            continue
        try:
            count += _scrub_one(claimed, holds)
        except BaseException:  # Ctrl-C, a full disk: the write goes back as it stands
            _put_back(claimed)
            raise
    return count


def _scrub_one(file: Path, holds: Callable[[dict[str, Any]], bool], dry_run: bool = False
               ) -> int:
    """Take what `holds` says yes to out of the write `file` (claimed by this process, unless
    `dry_run`, which changes nothing) and let it go; returns how many memories go."""
    record = read(file)
    if record is None:  # not a write this can read: it stays for a person to see
        if not dry_run:
            _put_back(file)
        return 0
    items = record["body"].get("items")
    if not isinstance(items, list):  # one memory (a "remember", the proxy's store)
        gone = bool(holds(record["body"]))
        if not dry_run:
            if gone:
                file.unlink()
            else:
                _put_back(file)
        return int(gone)
    kept = [item for item in items if not (isinstance(item, dict) and holds(item))]
    if not dry_run:
        if len(kept) == len(items):
            _put_back(file)
        elif not kept:
            file.unlink()
        else:
            _rewrite(file, {**record, "body": {**record["body"], "items": kept}})
    return len(items) - len(kept)


def _rewrite(claimed: Path, record: dict[str, Any]) -> None:
    """Put `record` back in place of the claimed write: written beside it (fsync'd), renamed
    over the claim, and only then the claim renamed back into the queue. Killed between the
    two renames, the claim `release_stale` puts back is the scrubbed copy; the other order
    left the old text in the claim, to be put back over the scrubbed file."""
    replace_private(claimed, dumps(record).encode("utf-8"),
                    temp=_temp_name(claimed.parent, _original(claimed).name), durable=True)
    os.replace(claimed, _original(claimed))


def _temp_name(directory: Path, name: str) -> Path:
    """Where this process writes the new copy of the write `name` (scrubbed, or refused with
    its reason) before renaming it into place: `.<name>.<pid>.tmp`, the pid saying whose it
    is."""
    return directory / f".{name}.{os.getpid()}{TEMP}"
