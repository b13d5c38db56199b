"""Exceptions that cross module and plugin boundaries."""


class InvalidMemory(ValueError):
    """A memory that cannot be stored as given (empty, too large, bad field)."""


class Rejected(Exception):
    """Raised by a `filter_ingest` plugin to refuse a memory; the reason is reported."""


class UnknownMemory(LookupError):
    """No live memory has the uid asked for (never stored, forgotten, or purged)."""
