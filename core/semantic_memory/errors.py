"""Exceptions that cross module and plugin boundaries."""


class InvalidMemory(ValueError):
    """A memory that cannot be stored as given (empty, too large, bad field)."""


class Rejected(Exception):
    """Raised by a `filter_ingest` plugin to refuse a memory; the reason is reported."""


class UnknownMemory(LookupError):
    """No live memory has the uid asked for (never stored, forgotten, or purged)."""


def one_line(exc: BaseException) -> str:
    """An exception as one line for a log or a refusal: its type and its message's lines
    joined (pluggy's validation errors put the reason on the second line), never a traceback."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__
