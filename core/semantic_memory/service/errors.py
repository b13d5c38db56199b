"""The one error type the REST routes raise; answered as JSON with its status."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


class ApiError(Exception):
    """An error answered as `{"error": message, "field": field}` with this status."""

    def __init__(self, status: int, message: str, field: str | None = None,
                 errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.errors = status, message, field, errors

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"error": self.message}
        if self.field:
            body["field"] = self.field
        if self.errors:
            body["errors"] = self.errors
        return JSONResponse(body, status_code=self.status)
