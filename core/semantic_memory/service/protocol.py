"""uvicorn's httptools protocol with a JSON body on the 400 its parser sends.

A request the HTTP parser itself refuses (malformed request line, unknown method, a bad or
duplicated Content-Length, Content-Length together with Transfer-Encoding, …) never reaches the
ASGI app, so no middleware can shape that answer: uvicorn writes `400 Invalid HTTP request
received.` as text/plain straight to the socket. Passing this subclass as `uvicorn.Config(http=…)`
is the narrowest hook there is: one overridden method, `send_400_response`, which uvicorn calls
from exactly that place; the parsing, flow control and keep-alive logic stay uvicorn's own.
(httptools is a dependency of the package, so this is the protocol uvicorn would pick anyway.)
"""

from __future__ import annotations

import sys

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .edges import error_body, one_line


class JSONErrorHttpToolsProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        # uvicorn calls this inside `except httptools.HttpParserError`: the parser's own reason
        # ("Invalid method encountered", …) is the more useful message.
        reason = sys.exc_info()[1]
        detail = one_line(str(reason), 400) if reason is not None and str(reason) else ""
        message = f"invalid HTTP request: {detail}" if detail else "invalid HTTP request"
        start, body = error_body(400, message, [(b"connection", b"close")])
        content = [STATUS_LINE[400]]
        for name, value in [*self.server_state.default_headers, *start["headers"]]:
            content += [name, b": ", value, b"\r\n"]
        content += [b"\r\n", body["body"]]
        self.transport.write(b"".join(content))
        self.transport.close()
