"""The browse page at `GET /`: one HTML, one JS and one CSS file shipped in the package
(`service/web/`), no build step, nothing fetched from elsewhere. The page reads everything
through the `/api/*` routes.

The three files hold no data, so they are served without the token (auth.PUBLIC_PATHS lists
them): the page must load to be able to ask for the token, which it then sends with every
`/api` call. Memory content is untrusted, so the page builds its DOM with `textContent` only,
and the Content-Security-Policy below would stop a script that got in anyway: scripts and
styles only from these files (no inline script, no eval, no inline style), requests only to
this origin, and the page may not be framed.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",  # for browsers that predate frame-ancestors
    # A service upgrade changes the files under the same names: revalidate every time.
    "cache-control": "no-cache",
}
#: URL path -> (file in service/web/, media type).
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/ui/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/ui/app.css": ("app.css", "text/css; charset=utf-8"),
}


@cache
def asset(name: str) -> bytes:
    """A file of the page, read from the installed package once."""
    return files(__package__).joinpath("web", name).read_bytes()


async def page_file(request: Request) -> Response:
    name, media_type = ASSETS[request.url.path]
    return Response(asset(name), media_type=media_type, headers=HEADERS)


ROUTES = [Route(path, page_file, methods=["GET", "HEAD"]) for path in ASSETS]
