"""Every route passes the gate: it learns who the request comes from
(:class:`~shardq.web.auth.Authority`), sends anonymous callers of a dashboard that
needs a login to it, and lets actions check the caller's role (:func:`authorised`).

A refused action, a wrong CSRF field and a wrong token are recorded in the audit trail
(outcome ``refused``), in a transaction of their own.
"""

from __future__ import annotations

import hmac
import inspect
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from shardq.ops import audit
from shardq.web.auth import COOKIE, Caller, actor, cross_site, is_api
from shardq.web.context import context
from shardq.web.masks import Show
from shardq.web.roles import ACTIONS, User

Endpoint = Callable[[Request], Any]
ANONYMOUS = Caller(None)


def guarded(route: Route) -> Route:
    """``route`` with its endpoint behind the gate."""
    endpoint: Endpoint = route.endpoint

    async def gate(request: Request) -> Response:
        ctx = context(request)
        page = not is_api(request)
        try:
            found = await ctx.authority.identify(ctx.st, request, page=page)
        except HTTPException as exc:
            if exc.status_code == 403:  # a wrong bearer token: a failed login
                await refuse(request, None, "login", str(exc.detail))
            raise
        if found.user is None and not ctx.authority.open_reads:
            if page and request.method == "GET" and ctx.authority.logs_in:
                return RedirectResponse(_login(request), 303)
            raise HTTPException(401, "log in first" if page else
                                "this dashboard needs a credential: Authorization: Bearer ...",
                                headers=None if page else {"WWW-Authenticate": "Bearer"})
        request.state.caller = found
        if inspect.iscoroutinefunction(endpoint):
            response: Response = await endpoint(request)
        else:
            response = await run_in_threadpool(endpoint, request)
        if found.new_cookie:
            set_cookie(request, response, found.new_cookie)
        return response

    return Route(route.path, gate, methods=list(route.methods or ()), name=route.name)


def caller(request: Request) -> Caller:
    """Who the request comes from (the gate found it)."""
    found: Caller = getattr(request.state, "caller", ANONYMOUS)
    return found


async def authorised(request: Request, action: str, *, csrf: str | None = None,
                     queue: str | None = None) -> audit.Actor:
    """The actor of ``action`` (a key of :data:`~shardq.web.roles.ACTIONS`): 401 for an
    anonymous caller, 403 for a page's form without its session's CSRF field or a role
    that may not (recorded)."""
    found = caller(request)
    if found.user is None:
        if is_api(request):
            raise HTTPException(401, "this action needs a credential: Authorization: "
                                     "Bearer ...", headers={"WWW-Authenticate": "Bearer"})
        raise HTTPException(401, "log in first")
    resolved = context(request).authority.mode == "resolver"
    if request.method != "GET" and resolved and cross_site(request):
        # Behind a proxy or an app's own login, the browser's cookies are the credential:
        # another site's page must not act with them (pages carry CSRF fields; the JSON
        # API is guarded here).
        await refuse(request, found.user, action, "a request from another site", queue)
        raise HTTPException(403, "a request from another site's page is refused")
    if request.method != "GET" and not is_api(request) and (
            found.session is None or not hmac.compare_digest(
            csrf or "", found.session.csrf)):
        await refuse(request, found.user, action, "the form's CSRF field is missing or "
                     "wrong", queue)
        raise HTTPException(403, "the form's CSRF field is missing or wrong")
    if not found.user.may(action):
        why = f"{found.user.name} ({found.user.role}) may not {action}: it needs the role " \
              f"{ACTIONS[action]}"
        await refuse(request, found.user, action, why, queue)
        raise HTTPException(403, why)
    return actor(request, found.user)


async def refuse(request: Request, user: User | None, action: str, why: str,
                 queue: str | None = None) -> None:
    """Record a refused action (or failed login) of ``user`` (None: nobody known)."""
    st = context(request).st
    entry = audit.Entry(actor(request, user), action, queue,
                        params={"path": request.url.path})
    await run_in_threadpool(st.perform, audit.record(st, entry, "refused", why))


def set_cookie(request: Request, response: Response, value: str) -> None:
    """Set the session cookie: HttpOnly, SameSite=Strict, Secure over HTTPS, for this
    dashboard's path only."""
    ctx = context(request)
    response.set_cookie(COOKIE, value, max_age=int(ctx.authority.config.session_max_s),
                        httponly=True, samesite="strict", path=root(request),
                        secure=request.url.scheme == "https")


def root(request: Request) -> str:
    """The dashboard's own path (its mount point), ending in a slash."""
    return str(request.scope.get("root_path") or "") + "/"


def _login(request: Request) -> str:
    return str(request.url_for("login")) + "?" + urlencode({"next": request.url.path})



def showing(request: Request) -> Show:
    """How much of a payload the caller sees (see :mod:`shardq.web.masks`): its size when
    the dashboard hides payloads, its shape with every value masked for a viewer, else
    the payload masked by the redact rules."""
    if context(request).hide_payloads:
        return "sizes"
    found = caller(request)
    return "masked" if found.user is not None and found.user.role == "viewer" else "full"
