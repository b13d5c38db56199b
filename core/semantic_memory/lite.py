"""JSON, a TCP connection, the alarm signal, SHA-256, a private file write and a store's
identity (`store_identity`) for a hook process, at a fraction of the import.

`json`, `socket` and `signal` each build enum classes when imported (`re` for json, IntEnum
families for socket and signal): ~10 ms of CPU together, as much as the bare interpreter's
whole start-up, paid by every hook. Their C halves (`_json`, `_socket`, `_signal`) do the
actual work and import nothing. The functions here call those directly, with the public
modules' exact arguments, and fall back to the public module whenever the C half is missing
or the input is not the plain case, so results and error messages are the public modules'
own (tests/test_hook_cpu.py compares them). Standard library only: hooks, `backoff.py` and
`private.py` import it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from os import PathLike
    from typing import Any

#: What json skips around a document (json.decoder.WHITESPACE).
_JSON_SPACE = " \t\n\r"


class _DecoderContext:
    """The attributes `_json.make_scanner` reads: those of `json.JSONDecoder()`."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"),
                      "NaN": float("nan")}.__getitem__


try:
    import _json

    _scan: Any = _json.make_scanner(_DecoderContext())
    _make_encoder: Any = _json.make_encoder
    _encode_str: Any = _json.encode_basestring
except (ImportError, AttributeError, TypeError):  # not CPython: the json module does it all
    _scan = None


_FAILED = object()


def _fast_loads(data: str | bytes) -> Any:
    """What json.loads reads, through the C scanner alone; _FAILED where that cannot."""
    if _scan is None:
        return _FAILED
    try:
        # json.loads decodes bytes as UTF-8 unless a BOM or NULs say otherwise; those fail
        # here (a BOM or NUL is no JSON value).
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        start = len(text) - len(text.lstrip(_JSON_SPACE))
        value, end = _scan(text, start)
        if not text[end:].strip(_JSON_SPACE):
            return value
    except Exception:  # noqa: BLE001 - the caller decides
        pass
    return _FAILED


def loads(data: str | bytes) -> Any:
    """`json.loads(data)`, its errors included."""
    value = _fast_loads(data)
    if value is not _FAILED:
        return value
    import json

    return json.loads(data)


def try_loads(data: str | bytes, default: Any = None) -> Any:
    """`json.loads(data)`, or `default` where it raises ValueError; json itself is imported
    only for what it may read differently (bytes with a BOM, in UTF-16/32, or with encoded
    surrogates): a skipped line of a transcript costs no import."""
    value = _fast_loads(data)
    if value is not _FAILED:
        return value
    if _scan is not None and not _other_encoding(data):
        return default  # json.loads reads the same text with the same scanner: it fails too
    import json

    try:
        return json.loads(data)
    except ValueError:
        return default


def _other_encoding(data: str | bytes) -> bool:
    """Whether json.loads would decode `data` other than as strict UTF-8."""
    if not isinstance(data, (bytes, bytearray)):
        return False
    if data[:3] == b"\xef\xbb\xbf" or data[:2] in (b"\xff\xfe", b"\xfe\xff") or \
            b"\x00" in data[:4]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True  # json decodes with surrogatepass
    return False


_RAISE = object()
#: Every UTF-16 surrogate code point, to U+FFFD (str.translate's table; built on first use).
_SURROGATES: dict[int, int] = {}


def loads_input(data: bytes, default: Any = _RAISE) -> Any:
    """`loads(data)` for text from outside this process (hook input, a transcript line), made
    valid Unicode: bytes that are not UTF-8 and lone surrogates (a `"\\ud83d"` escape, an
    emoji cut in half by a harness) become U+FFFD. Every string it returns encodes as UTF-8,
    so the writes, spool files and log lines made of it cannot fail on one character.
    `default`, when given, is returned where the data is no JSON (as `try_loads`)."""
    text = data.decode("utf-8", "replace").removeprefix("\ufeff")  # json.loads skips a BOM
    value = loads(text) if default is _RAISE else try_loads(text, default)
    if "\\ud" in text or "\\uD" in text:  # a surrogate can only come from an escape
        value = _valid_text(value)
    return value


def encodes(text: str) -> bool:
    """Whether `text` encodes as UTF-8: False when it holds lone surrogates (bytes that were
    not UTF-8, decoded with surrogateescape; a JSON `"\\udce9"` escape)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _valid_text(value: Any) -> Any:
    """`value` (decoded JSON) with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        if encodes(value):
            return value
        if not _SURROGATES:
            _SURROGATES.update(dict.fromkeys(range(0xD800, 0xE000), 0xFFFD))
        return value.translate(_SURROGATES)
    if isinstance(value, list):
        return [_valid_text(item) for item in value]
    if isinstance(value, dict):
        return {_valid_text(key): _valid_text(item) for key, item in value.items()}
    return value


def _unserialisable(value: Any) -> Any:
    raise TypeError  # json.dumps below raises the real error


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """`json.dumps(value, ensure_ascii=False, default=default)`."""
    if _scan is not None:
        try:
            if isinstance(value, str):
                return str(_encode_str(value))
            # JSONEncoder.iterencode's one-shot C path with json.dumps's defaults.
            encode = _make_encoder({}, default or _unserialisable, _encode_str, None, ": ",
                                   ", ", False, False, True)
            return "".join(encode(value, 0))
        except Exception:  # noqa: BLE001 - json.dumps raises its own error below
            pass
    import json

    return json.dumps(value, ensure_ascii=False, default=default)


def connect(host: str | bytes, port: int, timeout: float) -> Any:
    """`socket.create_connection((host, port), timeout)`: a connected socket object with
    `sendall`, `recv`, `settimeout` and `close` (not a context manager). The name lookup is
    held to `timeout` too (`resolve`)."""
    try:
        import _socket
    except ImportError:
        import socket

        return socket.create_connection((host, port), timeout)  # type: ignore[arg-type]
    errors = []
    for family, kind, proto, _, address in resolve(host, port, timeout):
        sock = None
        try:
            sock = _socket.socket(family, kind, proto)
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            errors.append(exc)
            if sock is not None:
                sock.close()
    if errors:
        raise errors[0]  # what socket.create_connection raises
    raise OSError("getaddrinfo returns an empty list")


def resolve(host: str | bytes, port: int, timeout: float) -> list[tuple[Any, ...]]:
    """`getaddrinfo(host, port, 0, SOCK_STREAM)` within `timeout` seconds; TimeoutError past
    it. getaddrinfo cannot be interrupted (not by a socket timeout, not by the hook's alarm),
    and a resolver that never answers takes its own 5 s or more: a name is looked up in a
    thread left behind when time is up. An address needs no lookup and no thread."""
    import _socket

    try:
        return _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM, 0,
                                   _socket.AI_NUMERICHOST)
    except OSError:
        pass  # a name, not an address
    import _thread

    found: list[Any] = []
    done = _thread.allocate_lock()
    done.acquire()

    def lookup() -> None:
        try:
            found.append(_socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            found.append(exc)
        finally:
            done.release()

    _thread.start_new_thread(lookup, ())
    if not done.acquire(True, max(timeout, 0.0)):
        name = host.decode() if isinstance(host, bytes) else host
        raise TimeoutError(f"looking up {name} took longer than {timeout:.2f} s")
    if isinstance(found[0], BaseException):
        raise found[0]
    return found[0]


#: The SHA-256 constructor `sha256_hex` found (a failed import is not cached by Python: looked
#: for again, it costs ~0.3 ms each time on Python 3.11, where `_sha2` is missing).
_sha256: Any = None


def sha256_hex(data: bytes) -> str:
    """`hashlib.sha256(data).hexdigest()`: the interpreter's own SHA-256 where it has one
    (hashlib's import loads OpenSSL's, ~3 ms of CPU)."""
    global _sha256
    if _sha256 is None:
        try:
            from _sha2 import sha256  # Python 3.12+
        except ImportError:
            try:
                from _sha256 import sha256  # type: ignore[no-redef]
            except ImportError:
                from hashlib import sha256
        _sha256 = sha256
    return str(_sha256(data).hexdigest())


def replace_private(path: str | PathLike[str], data: bytes, *,
                    temp: str | PathLike[str] | None = None, durable: bool = False) -> None:
    """Replace the file `path` with `data` at once, readable by its owner only: written to
    `temp` beside it (`<path>.<pid>.tmp` by default) as 0600, whatever mode a stale temporary
    file of that name had, then renamed over `path`, so no reader sees half of it. `durable`:
    fsync'd before the rename (a spool write, the approvals). Raises OSError when it cannot
    be written, leaving no temporary file behind; everything beside the db is written this
    way (docs/security.md's file modes)."""
    import os

    tmp = os.fspath(temp) if temp is not None else f"{os.fspath(path)}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:  # a full disk, an interruption: no half-written file stays behind
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


try:  # the alarm the hook's watchdog runs on (POSIX)
    from _signal import ITIMER_REAL, SIGALRM, setitimer, signal
except ImportError:
    try:
        from signal import ITIMER_REAL, SIGALRM, setitimer, signal  # type: ignore[assignment]
    except ImportError:  # Windows: no alarm; the socket timeouts bound a hook there
        ITIMER_REAL = SIGALRM = 0
        setitimer = signal = None  # type: ignore[assignment]

#: Whether this platform has the alarm (`setitimer`).
HAS_ALARM = setitimer is not None


def pid_alive(pid: object) -> bool:
    """Whether a process `pid` exists (the discovery file's service; the hooks ask too)."""
    import os

    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return True


def read_discovery(path: str | PathLike[str], db: str | PathLike[str] | None = None
                   ) -> dict[str, Any] | None:
    """A service's discovery file, with `stale: true` added when its process is gone or its
    pid another program's now (`is_service`), or, given `db`, when it serves another db
    (`serves`: a data folder copied with its discovery file names the original's service);
    None when the file is absent or unreadable. The service and the hooks read it alike."""
    try:
        with open(path, "rb") as handle:
            data = try_loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    data["stale"] = not is_service(data) or (db is not None and not serves(data, db))
    return data


def serves(info: dict[str, Any], db: str | PathLike[str]) -> bool:
    """Whether the service a discovery file names serves `db` (its `db_path`; a file without
    one, an older release's, is taken for this db's)."""
    import os

    published = info.get("db_path")
    if not isinstance(published, str):
        return True
    try:
        return db_identity(published) == db_identity(db)
    except (OSError, ValueError):
        return published == os.fspath(db)


def db_identity(path: str | PathLike[str]) -> str:
    """What names a SQLite db file for every process: `~` expanded, symlinks and `..`
    resolved (a file not made yet: by its folder's real path), so a discovery file's
    `db_path`, a hook's MEMORY_DB_PATH and a service's db compare alike."""
    import os

    return os.path.realpath(os.path.expanduser(os.fspath(path)))


#: The prefixes a SQLite store URL's file path follows (stores/sqlite.py `path_of`).
_SQLITE_PREFIXES = ("sqlite:///", "sqlite://", "sqlite:", "file://")


def plugin_origin(plugin: str, distribution: str = "") -> str:
    """`plugin` with its distribution ("NAME VERSION"), as every problem line names it:
    "my_agent (my-agent 0.1)"; an in-process plugin has none."""
    return f"{plugin} ({distribution})" if distribution else plugin


def url_password_span(url: str) -> tuple[int, int] | None:
    """Where the userinfo's password of `url` is, by position rather than by URL parsing
    (which a password holding `@ / ? #` or a space defeats): from the first ':' after
    `scheme://` to the LAST '@' of the URL. A '@' further on (in the query string) takes in
    more than the password, never less. None without one."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    colon = rest.find(":", 0, at) if sep and at >= 0 else -1
    if colon < 0:
        return None
    start = len(scheme) + len(sep)
    return start + colon + 1, start + at


def store_identity(db_url: str, db_path: str) -> str:
    """The store a service serves, or a client expects, named the same on both sides: a
    SQLite file (MEMORY_DB_PATH, or a `sqlite:` MEMORY_DB_URL) by `db_identity`; any other
    URL without its password (the userinfo's, and every `*password*` query parameter), its
    scheme without a driver (`postgresql+psycopg`, `postgres`: `postgresql`)."""
    url = db_url.strip()
    if not url:
        return db_identity(db_path)
    for prefix in _SQLITE_PREFIXES:
        if url.startswith(prefix):
            return db_identity(url[len(prefix):])
    if (span := url_password_span(url)) is not None:
        url = url[:span[0] - 1] + url[span[1]:]  # the ':' before it too
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower().split("+", 1)[0]
    scheme = "postgresql" if scheme == "postgres" else scheme
    base, query_sep, query = rest.partition("?")
    kept = [p for p in query.split("&") if p and "password" not in p.split("=")[0].lower()]
    return f"{scheme}{sep}{base}" + (f"?{'&'.join(kept)}" if kept else "")


def store_tag(identity: str) -> str:
    """The short digest of a `store_identity` a client sends as X-Memory-Store: names no
    path or host, and says whether two are the same store."""
    return sha256_hex(identity.encode("utf-8", "surrogatepass"))[:16]


def is_service(info: dict[str, Any]) -> bool:
    """Whether the process a discovery file names is still the service that wrote it, not
    another program the system gave its pid to since (a hard kill, a reboot): its start time
    (`proc_start`, Linux) must be the one written. A file without it (an older release's, or
    written where /proc is missing: macOS, Windows) can only tell whether the pid lives; a
    command line would misjudge a service run inside another Python program. Reading /proc
    costs microseconds: hooks can afford it."""
    pid = info.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        return False
    written = info.get("proc_start")
    if not isinstance(written, int) or isinstance(written, bool):
        return True
    now = proc_start(pid)
    return now is None or now == written


def proc_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (/proc/<pid>/stat's 22nd field):
    with the pid, unique until the next boot. None without /proc or when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The 2nd field, the program's name in parentheses, may hold spaces and ")".
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None
