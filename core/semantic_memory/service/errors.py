"""The one error type the REST routes raise; answered as JSON with its status. And the log
line of a store problem, said once a minute however many requests meet it."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from starlette.responses import JSONResponse

from ..safety.redaction import redact_many

#: The most field errors one answer lists; the rest are counted (`more_errors`). A body of
#: 200,000 unknown keys got a 9 MB answer naming every one.
MAX_LISTED_ERRORS = 10
#: How often one store problem is logged again while requests keep meeting it.
STORE_PROBLEM_LOG_S = 60.0

log = logging.getLogger("semantic_memory.service")


class ApiError(Exception):
    """An error answered as `{"error": message, "field": field, "errors": [...]}` with this
    status (the first MAX_LISTED_ERRORS of `errors`). Its texts are redacted (`shown`)."""

    def __init__(self, status: int, message: str, field: str | None = None,
                 errors: list[dict[str, str]] | None = None) -> None:
        listed = (errors or [])[:MAX_LISTED_ERRORS]
        message, field, *texts = shown(message, field or "",
                                       *(v for e in listed for v in e.values()))
        if errors:  # (only the listed ones are answered, so only they are redacted)
            it = iter(texts)
            errors = [{k: next(it) for k in e} for e in listed] + errors[MAX_LISTED_ERRORS:]
        super().__init__(message)
        self.status, self.message, self.errors = status, message, errors
        self.field = field or None

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"error": self.message}
        if self.field:
            body["field"] = self.field
        if self.errors:
            body["errors"] = self.errors[:MAX_LISTED_ERRORS]
            if len(self.errors) > MAX_LISTED_ERRORS:
                body["more_errors"] = len(self.errors) - MAX_LISTED_ERRORS
        return JSONResponse(body, status_code=self.status)


def shown(*texts: str) -> list[str]:
    """`texts` with their secrets redacted, in one call: an error quotes what the caller sent
    (a `created_at`, a `replaces` or path uid, an unknown field's name, a `kind`), and a
    hook's failure detail copies the body into `hooks.jsonl`. The MCP tools' errors too."""
    return redact_many(list(texts))


class StoreProblemLog:
    """A store problem's line, logged once a STORE_PROBLEM_LOG_S however many requests meet
    it: during a database outage every `/health` poll, hook and recall met it, one warning
    each (a `doctor` loop or a monitor polling `/health` filled the log). The next line after
    a quiet spell counts the requests it stood for; each answer still carries the line."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._said: dict[str, tuple[float, int]] = {}  # line -> (when logged, requests since)

    def warn(self, method: str, path: str, line: str) -> None:
        now = time.monotonic()
        with self._lock:
            logged, since = self._said.get(line, (-STORE_PROBLEM_LOG_S, 0))
            if now - logged < STORE_PROBLEM_LOG_S:
                self._said[line] = (logged, since + 1)
                return
            if len(self._said) > 100:  # a bounded memory of distinct lines
                self._said = {k: v for k, v in self._said.items()
                              if now - v[0] < STORE_PROBLEM_LOG_S}
            self._said[line] = (now, 0)
        more = f" ({since} more requests met it since the last line)" if since else ""
        log.warning("%s %s: %s%s", method, path, line, more)


store_problems = StoreProblemLog()
