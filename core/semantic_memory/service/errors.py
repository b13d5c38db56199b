"""The one error type the REST routes raise; answered as JSON with its status."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

#: The most field errors one answer lists; the rest are counted (`more_errors`). A body of
#: 200,000 unknown keys got a 9 MB answer naming every one.
MAX_LISTED_ERRORS = 10


class ApiError(Exception):
    """An error answered as `{"error": message, "field": field, "errors": [...]}` with this
    status (the first MAX_LISTED_ERRORS of `errors`)."""

    def __init__(self, status: int, message: str, field: str | None = None,
                 errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.errors = status, message, field, errors

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"error": self.message}
        if self.field:
            body["field"] = self.field
        if self.errors:
            body["errors"] = self.errors[:MAX_LISTED_ERRORS]
            if len(self.errors) > MAX_LISTED_ERRORS:
                body["more_errors"] = len(self.errors) - MAX_LISTED_ERRORS
        return JSONResponse(body, status_code=self.status)
