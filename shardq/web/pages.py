"""The web pages: every queue, one queue, one task, the hour's chart, and the forms (a
flow's page is :mod:`shardq.web.flowpages`).

Pages are rendered on the server (Jinja2, autoescaped); a few lines of script
refresh their figures in place from the fragment routes (``/fragments/...``) and
reload the chart.  Forms post to ``/actions/...`` with the session cookie and CSRF
field (:mod:`shardq.web.auth`) and come back to the page with what was done.
"""

from __future__ import annotations

from math import ceil
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, PackageLoader
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from shardq.core.errors import UnknownQueue
from shardq.ops import (
    attempts,
    audit,
    history,
    inspection,
    queuestats,
    reshard,
    sessions,
    workers,
)
from shardq.ops.audit import Actor
from shardq.ops.sessions import Opened
from shardq.text import durable, figures, layout, limits
from shardq.web import actions, chart, masks, reads
from shardq.web.auth import COOKIE, actor, address
from shardq.web.context import context
from shardq.web.gate import authorised, caller, refuse, root, set_cookie, showing
from shardq.web.roles import User
from shardq.web.timeline import timeline

REDRIVE_FILTERS = ("error", "older_than_s", "newer_than_s")
ENV = Environment(loader=PackageLoader("shardq.web", "templates"), autoescape=True)
ENV.filters.update(short=figures.short, duration=figures.duration, figure=figures.count,
                   size=reads.payload_bytes, limits=limits.summary,
                   rate_field=limits.rate_field, paused=figures.paused,
                   labelled=lambda h: list(zip(h, durable.outcomes(h), strict=True)))
TEMPLATES = Jinja2Templates(env=ENV)


def render(request: Request, name: str, values: dict[str, Any], status: int = 200) -> Response:
    """Template ``name`` with the values every page uses."""
    ctx, found = context(request), caller(request)
    return TEMPLATES.TemplateResponse(request, name, {
        "ctx": ctx, "now": reads.now(ctx.st), "user": found.user,
        "logged_in": found.user is not None,
        "csrf": found.session.csrf if found.session is not None else "",
        "hide_payloads": showing(request) == "sizes",
        # Forms need the session's CSRF token: a page shows those its user may post.
        "may": lambda action: bool(ctx.actions and found.user is not None and found.session
                                   and found.user.may(action)),
        "done": request.query_params.get("done"), **values}, status_code=status)


def queues_page(request: Request) -> Response:
    """Every queue's figures, the hour's chart of all of them, and the bucket layout (a
    reshard's progress while one runs)."""
    st = context(request).st
    return render(request, "queues.html", {"queues": st.perform(queuestats.queues(st)),
                                           "layout": layout.line(st.perform(reshard.status(st)))})


def queues_rows(request: Request) -> Response:
    """The rows of the queues' table (the page refreshes them in place)."""
    st = context(request).st
    return render(request, "_queue_rows.html", {"queues": st.perform(queuestats.queues(st))})


def queue_page(request: Request) -> Response:
    """One queue: figures, tasks in line, running tasks, dead letters, its hour."""
    ctx = context(request)
    view = reads.shown_view(reads.queue_view(ctx.st, request.path_params["name"]),
                            showing(request), ctx.masks)
    return render(request, "queue.html", {"view": view, "q": view.stats})


def queue_figures(request: Request) -> Response:
    """One queue's figures (the page refreshes them in place)."""
    st = context(request).st
    q = st.perform(queuestats.stats(st, request.path_params["name"]))
    return render(request, "_figures.html", {"q": q})


def task_find(request: Request) -> Response:
    """The task page of the id typed into the search box."""
    task_id = request.query_params.get("id", "").strip()
    if not task_id:
        return RedirectResponse(request.url_for("queues"), 303)
    return RedirectResponse(request.url_for("task", id=task_id), 303)


def task_page(request: Request) -> Response:
    """One task: state, payload, history, attempts, lease, and its flow if it has one.  A
    task that is gone (it finished, or was cancelled or purged) shows the attempts it
    left, if any; the id of a flow goes to the flow's page."""
    ctx = context(request)
    st = ctx.st
    task = st.perform(inspection.get(st, request.path_params["id"]))
    if task is None:
        history = st.perform(attempts.attempts(st, request.path_params["id"]))
        if not history:
            if reads.flow(st, request.path_params["id"], 0) is not None:  # a flow's id, typed
                return RedirectResponse(request.url_for("flow", id=request.path_params["id"]),
                                        303)
            raise HTTPException(404, "no such task: it finished, was purged, or never existed")
        return render(request, "task_gone.html", {"task_id": request.path_params["id"],
                                                  "history": history})
    task = masks.shown(task, showing(request), ctx.masks)
    return render(request, "task.html", {"task": task, "events": timeline(task),
                                         "history": task.history})


def workers_page(request: Request) -> Response:
    """The worker processes: alive or stale, what each holds, when each was last seen."""
    st = context(request).st
    return render(request, "workers.html", {"workers": st.perform(workers.listing(st))})


def chart_svg(request: Request) -> Response:
    """The hour's throughput (one queue's with ``?queue=``) as SVG."""
    st = context(request).st
    minutes = st.perform(history.series(st, request.query_params.get("queue") or None))
    return Response(chart.svg(minutes, reads.now(st)), media_type="image/svg+xml",
                    headers={"Cache-Control": "no-store"})


def login_page(request: Request) -> Response:
    """The form that asks for a token."""
    return render(request, "login.html", {"next": _local(request, request.query_params)})


async def login(request: Request) -> Response:
    """Check the token (at most ``login_attempts`` tries per address and window); on
    success open a session, set its cookie and go back.  Both are recorded."""
    ctx, form = context(request), await _form(request)
    authority = ctx.authority
    wait_s = authority.throttle.allow(address(request) or "")
    if wait_s:
        await refuse(request, None, "login", "too many login attempts")
        return render(request, "login.html", {
            "next": _local(request, form),
            "error": f"too many attempts: try again in {ceil(wait_s)} s"}, 429)
    found = await run_in_threadpool(authority.credential, form.get("token", ""))
    if found is None:
        await refuse(request, None, "login", "wrong token")
        return render(request, "login.html", {"next": _local(request, form),
                                              "error": "wrong token"}, 403)
    user, credential = found
    opened = await run_in_threadpool(_open, request, user, credential)
    response = RedirectResponse(_local(request, form), 303)
    set_cookie(request, response, opened.cookie)
    return response


def _open(request: Request, user: User, credential: str) -> Opened:
    st = context(request).st
    entry = audit.Entry(actor(request, user), "login")
    opened = context(request).authority.open(st, user, credential, address(request))
    st.perform(audit.record(st, entry, "ok", f"{user.name} logged in as {user.role}"))
    return opened


async def logout(request: Request) -> Response:
    """End the session (recorded) and forget its cookie."""
    ctx, found = context(request), caller(request)
    cookie = request.cookies.get(COOKIE)
    if cookie and found.user is not None:
        entry = audit.Entry(actor(request, found.user), "logout")
        await run_in_threadpool(ctx.st.perform, audit.audited(
            ctx.st, sessions.close(ctx.st, cookie), entry, lambda _: "logged out"))
    response = RedirectResponse(request.url_for("queues"), 303)
    response.delete_cookie(COOKIE, path=root(request))
    return response


async def queue_action(request: Request) -> Response:
    """Pause, resume, purge or limit the queue named, then show its page."""
    form = await _form(request)
    name, verb = request.path_params["name"], request.path_params["verb"]
    st = context(request).st
    if verb == "limit":  # the form's four fields: an empty one (not posted) removes it
        who = await authorised(request, "limits", csrf=form.get("csrf"), queue=name)
        fields = {f: form.get(f) for f in actions.LIMIT_FIELDS}
        try:
            done = await run_in_threadpool(actions.limit, st, who, name, fields)
        except UnknownQueue as exc:  # the API's hint names create=True: not for a form
            raise UnknownQueue(exc.queue, exc.known) from None
        return back(request, "queue", done, name=name)
    if verb == "pause":  # until: empty, or the form's time
        who = await authorised(request, "pause", csrf=form.get("csrf"), queue=name)
        done = await run_in_threadpool(actions.pause, st, who, name, form.get("until"))
        return back(request, "queue", done, name=name)
    act = {"resume": actions.resume, "purge": actions.purge}.get(verb)
    if act is None:
        raise HTTPException(404, f"no action {verb!r}")
    who = await authorised(request, verb, csrf=form.get("csrf"), queue=name)
    done = await run_in_threadpool(act, st, who, name)
    return back(request, "queue", done, name=name)


async def dead_action(request: Request) -> Response:
    """Retry or purge dead letters of the page's queue (those ticked, or a batch), or
    redrive (or count) those its filters choose."""
    form = await _form(request)
    verb = request.path_params["verb"]
    if verb == "redrive":
        return await redrive_action(request, form)
    act = {"retry": actions.retry_dead, "purge": actions.purge_dead}.get(verb)
    if act is None:
        raise HTTPException(404, f"no action {verb!r}")
    queue, ids = form.get("queue", ""), form.getlist("id")
    who = await authorised(request, f"{verb}_dead", csrf=form.get("csrf"), queue=queue)
    done = await run_in_threadpool(act, context(request).st, who, None if ids else queue,
                                   ids or None)
    return back(request, "queue", done, name=queue)


async def redrive_action(request: Request, form: Form) -> Response:
    """Redrive the dead letters the form's filters choose (its count button: count them),
    then show the queue's page with the filters filled in again."""
    queue = form.get("queue")
    who = await authorised(request, "redrive", csrf=form.get("csrf"), queue=queue)
    filters = {f: form.get(f) for f in REDRIVE_FILTERS}
    st = context(request).st
    done = await run_in_threadpool(lambda: actions.redrive(
        st, who, queue, **filters, dry_run=form.get("dry_run")))
    url = request.url_for("queue", name=queue).include_query_params(
        done=done.message, **{f: v for f, v in filters.items() if v})
    return RedirectResponse(url, 303)


async def cancel_action(request: Request) -> Response:
    """Cancel the task, then show its queue's page."""
    form = await _form(request)
    who = await authorised(request, "cancel", csrf=form.get("csrf"))
    done = await run_in_threadpool(actions.cancel, context(request).st, who,
                                   request.path_params["id"])
    queue = form.get("queue")
    return back(request, "queue", done, name=queue) if queue else back(request, "queues", done)


class Form(dict[str, list[str]]):
    """A posted form's fields."""

    def get(self, name: str, default: str = "") -> str:  # type: ignore[override]
        """The field's first value."""
        return self.getlist(name)[0] if self.getlist(name) else default

    def getlist(self, name: str) -> list[str]:
        """Every value of the field."""
        return list(super().get(name, []))


async def _form(request: Request) -> Form:
    # URL-encoded forms only (the pages post nothing else): parsed here, no extra package.
    return Form(parse_qs((await request.body()).decode("utf-8", "replace")))


async def checked(request: Request, action: str) -> tuple[Actor, Form]:
    """The actor of ``action`` and the posted form, once the form's CSRF field and the
    caller's role are checked (401, 403 otherwise)."""
    form = await _form(request)
    return await authorised(request, action, csrf=form.get("csrf")), form


def back(request: Request, route: str, done: actions.Done, **params: str) -> Response:
    """Go back to page ``route`` saying what was done."""
    url = request.url_for(route, **params).include_query_params(done=done.message)
    return RedirectResponse(url, 303)


def _local(request: Request, fields: Any) -> str:
    """The ``next`` field when it is a path of this dashboard, else its first page."""
    wanted = str(fields.get("next") or "")
    base = root(request)
    if wanted.startswith(base) and not wanted.startswith("//") and "\\" not in wanted:
        return wanted
    return base


def login_url(request: Request) -> str:
    """The login page, coming back to this page."""
    return str(request.url_for("login")) + "?" + urlencode({"next": request.url.path})


ENV.globals["login_url"] = login_url

READS = [
    Route("/", queues_page, name="queues"),
    Route("/fragments/queues", queues_rows, name="queues_rows"),
    Route("/queues/{name}", queue_page, name="queue"),
    Route("/fragments/queues/{name}", queue_figures, name="queue_figures"),
    Route("/tasks", task_find, name="task_find"),
    Route("/tasks/{id}", task_page, name="task"),
    Route("/workers", workers_page, name="workers"),
    Route("/chart.svg", chart_svg, name="chart"),
]
LOGIN = [  # served to anyone: the gate does not stand before them
    Route("/login", login_page, name="login"),
    Route("/login", login, methods=["POST"], name="login_post"),
]
LOGOUT = [Route("/logout", logout, methods=["POST"], name="logout")]
ACTIONS = [
    Route("/actions/queues/{name}/{verb}", queue_action, methods=["POST"], name="queue_action"),
    Route("/actions/dead/{verb}", dead_action, methods=["POST"], name="dead_action"),
    Route("/actions/tasks/{id}/cancel", cancel_action, methods=["POST"], name="cancel_action"),
]
