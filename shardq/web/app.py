"""The dashboard's ASGI application: :func:`create_app`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shardq.client import Client
from shardq.core.errors import (
    DatabaseError,
    InvalidTask,
    PermissionDenied,
    ShardqError,
    UnknownQueue,
)
from shardq.web import api, assets, flowpages, pages, trail
from shardq.web.auth import Authority, Resolver
from shardq.web.config import DashboardConfig
from shardq.web.context import Context
from shardq.web.gate import guarded
from shardq.web.headers import SecurityHeaders
from shardq.web.masks import Masks
from shardq.web.proxy import Forwarded, ProxyIdentity
from shardq.web.users import UsersFile

if TYPE_CHECKING:
    from shardq.app import App


def create_app(client: Client, config: DashboardConfig | None = None, *,
               token: str | None = None, resolver: Resolver | None = None,
               app: App | None = None) -> Starlette:
    """The dashboard for ``client``'s schema, as an ASGI app to serve or to mount.

    Who may use it: with ``token``, whoever holds it acts as ``admin`` and anyone reads;
    with ``config.users_file``, each named credential's role decides; with
    ``config.proxy_user_header``, a trusted proxy's headers do; with ``resolver`` (a
    function of the request returning a :class:`~shardq.web.roles.User` or None, or an
    awaitable of one), the embedding app does.  Without any, or with
    ``config.read_only``, no action is served.  The client stays the caller's to
    close.  Every response carries the headers of :mod:`shardq.web.headers` (a strict
    Content-Security-Policy; ``config.frame_ancestors`` may frame the pages).  With
    ``app``, each task's payload is masked by its function's ``redact`` rule
    (``@app.task(redact=...)``), besides the fields of ``config.redact``.  Mount it
    under a path of your own app::

        Mount("/queues", app=create_app(client, token=secret))
    """
    config = config or DashboardConfig()
    if config.read_only and (token is not None or resolver is not None):
        raise ValueError("a read-only dashboard takes no token nor resolver")
    if config.proxy_user_header:
        resolver = ProxyIdentity(config)
    users = UsersFile(config.users_file) if config.users_file else None
    authority = Authority(config, token=token, users=users, resolver=resolver)
    routes = [*api.READS, *pages.READS, *flowpages.READS]
    if authority.mode != "open":
        routes += [*pages.LOGOUT, *trail.ROUTES]
    if authority.acts:
        routes += [*api.ACTIONS, *pages.ACTIONS, *flowpages.ACTIONS]
    public = [*assets.ROUTES, *api.DOCUMENT, *(pages.LOGIN if authority.logs_in else [])]
    site = Starlette(routes=[*public, *(guarded(r) for r in routes)], exception_handlers={
        HTTPException: _http_error, UnknownQueue: _unknown, InvalidTask: _invalid,
        PermissionDenied: _refused, DatabaseError: _unavailable, ShardqError: _invalid})
    site.state.shardq = Context(client.statements, authority, config.hide_payloads,
                                config.refresh_ms, Masks.of(app, config.redact))
    site.add_middleware(ServerTiming)
    site.add_middleware(SecurityHeaders, frame_ancestors=config.frame_ancestors)
    # Outermost (added last): the others see the scheme and client a proxy forwarded.
    site.add_middleware(Forwarded, trusted=config.proxies())
    return site


class ServerTiming:
    """Adds ``Server-Timing: app;dur=<ms>`` to every response: the time from the request's
    arrival to its headers (the benchmark reads it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = (time.perf_counter() - started) * 1000
                message["headers"] = [*message.get("headers", []),
                                      (b"server-timing", f"app;dur={took:.2f}".encode())]
            await send(message)

        await self.app(scope, receive, timed)


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith(str(request.scope.get("root_path", "")) + "/api/")


def _error(request: Request, status: int, message: str,
           headers: dict[str, str] | None = None) -> Response:
    if _wants_json(request):
        return JSONResponse({"error": message}, status, headers=headers)
    return pages.render(request, "error.html", {"status": status, "message": message}, status)


async def _http_error(request: Request, exc: Any) -> Response:
    return _error(request, exc.status_code, exc.detail, exc.headers)


async def _invalid(request: Request, exc: Any) -> Response:
    return _error(request, 400, str(exc))


async def _unknown(request: Request, exc: Any) -> Response:
    return _error(request, 404, str(exc))


async def _refused(request: Request, exc: Any) -> Response:
    role = exc.role or "of the dashboard"
    return _error(request, 403, f"{exc.refused} (role {role}): the dashboard's role may not "
                  "do this; serve it --read-only, or with a role granted "
                  f"`shardq migrate --grants {exc.role or 'ROLE'}`")


async def _unavailable(request: Request, exc: Any) -> Response:
    return _error(request, 503, f"the database did not answer: {exc}")
