"""Serving a dashboard in a test: a real uvicorn server on a free port, and a small HTTP
client (urllib) that returns status, headers and body without raising on errors."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import uvicorn

from tests.helpers import free_port

TOKEN = "a-test-token-of-32-characters-xx"


@dataclass(frozen=True)
class Reply:
    """An HTTP response."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 for the block; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off",
                                           proxy_headers=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the dashboard did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Lets a test see a redirect rather than follow it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def call(url: str, method: str = "GET", body: Any = None, *, token: str | None = None,
         form: bytes | None = None, cookie: str | None = None,
         headers: dict[str, str] | None = None) -> Reply:
    """One request: JSON ``body`` or URL-encoded ``form``, a bearer ``token``, a ``cookie``,
    other ``headers``."""
    headers = dict(headers or {})
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    if form is not None:
        data, headers["Content-Type"] = form, "application/x-www-form-urlencoded"
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if cookie is not None:
        headers["Cookie"] = cookie
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with OPENER.open(request, timeout=30) as response:
            return Reply(response.status, dict(response.headers.items()), response.read())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, dict(exc.headers.items()), exc.read())


@dataclass(frozen=True)
class Session:
    """A logged-in page session: the Cookie header's value and the forms' CSRF field."""

    cookie: str
    csrf: str


def log_in(site: str, token: str, path: str = "/") -> Session:
    """Log in on ``site``'s login page with ``token``; the session it opened."""
    done = call(f"{site}/login", "POST", form=urlencode({"token": token}).encode())
    assert done.status == 303, (done.status, done.text)
    cookie = done.headers["set-cookie"].split(";")[0]
    page = call(f"{site}{path}", cookie=cookie).text
    found = re.search(r'<meta name="shardq-csrf" content="([^"]+)">', page)
    assert found, "the page carries no CSRF token"
    return Session(cookie, found.group(1))
