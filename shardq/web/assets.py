"""The dashboard's style sheet, script and icon, served at ``/static/<name>`` from the package
(the pages' Content-Security-Policy allows no inline style or script).

Their content types are fixed here rather than guessed from the platform's MIME table,
which on some hosts maps ``.js`` to ``text/plain``: under ``X-Content-Type-Options:
nosniff`` a browser would then refuse the script.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

TYPES = {"dashboard.css": "text/css", "dashboard.js": "text/javascript",
         "favicon.svg": "image/svg+xml"}


@cache
def _read(name: str) -> tuple[bytes, str]:
    """File ``name``'s bytes and its ETag."""
    body = resources.files("shardq.web").joinpath("static", name).read_bytes()
    return body, f'"{hashlib.sha256(body).hexdigest()[:32]}"'


def asset(request: Request) -> Response:
    """One of the files in :data:`TYPES`; browsers check theirs is current (``no-cache``
    and its ETag), so a new version of shardq is picked up at once."""
    name = request.path_params["path"]
    if name not in TYPES:
        raise HTTPException(404, "no such file")
    body, etag = _read(name)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=TYPES[name], headers=headers)


ROUTES = [Route("/static/{path}", asset, name="static")]
