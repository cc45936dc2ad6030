"""The web pages: every queue, one queue, one task, the hour's chart, and the forms (a
flow's page is :mod:`shardq.web.flowpages`).

Pages are rendered on the server (Jinja2, autoescaped); a few lines of script
refresh their figures in place from the fragment routes (``/fragments/...``) and
reload the chart.  Forms post to ``/actions/...`` with the session cookie and CSRF
field (:mod:`shardq.web.auth`) and come back to the page with what was done.
"""

from __future__ import annotations

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
from shardq.ops import attempts, history, inspection, queuestats, workers
from shardq.text import durable, figures, limits
from shardq.web import actions, chart, reads
from shardq.web.auth import COOKIE
from shardq.web.context import Context, context
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
    ctx = context(request)
    logged_in = ctx.guard is not None and ctx.guard.logged_in(request)
    return TEMPLATES.TemplateResponse(request, name, {
        "ctx": ctx, "now": reads.now(ctx.st), "logged_in": logged_in,
        "csrf": ctx.guard.csrf if logged_in and ctx.guard else "",
        "done": request.query_params.get("done"), **values}, status_code=status)


def queues_page(request: Request) -> Response:
    """Every queue's figures and the hour's chart of all of them."""
    st = context(request).st
    return render(request, "queues.html", {"queues": st.perform(queuestats.queues(st))})


def queues_rows(request: Request) -> Response:
    """The rows of the queues' table (the page refreshes them in place)."""
    st = context(request).st
    return render(request, "_queue_rows.html", {"queues": st.perform(queuestats.queues(st))})


def queue_page(request: Request) -> Response:
    """One queue: figures, tasks in line, running tasks, dead letters, its hour."""
    view = reads.queue_view(context(request).st, request.path_params["name"])
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
    st = context(request).st
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
    """The form that asks for the token."""
    return render(request, "login.html", {"next": _local(request, request.query_params)})


async def login(request: Request) -> Response:
    """Check the token; on success set the session cookie and go back."""
    ctx, form = _guarded(request), await _form(request)
    assert ctx.guard is not None
    if not ctx.guard.matches(form.get("token", "")):
        return render(request, "login.html", {"next": _local(request, form),
                                              "error": "wrong token"}, 403)
    response = RedirectResponse(_local(request, form), 303)
    response.set_cookie(COOKIE, ctx.guard.session, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path=_root(request))
    return response


async def logout(request: Request) -> Response:
    """Forget the session cookie."""
    response = RedirectResponse(request.url_for("queues"), 303)
    response.delete_cookie(COOKIE, path=_root(request))
    return response


async def queue_action(request: Request) -> Response:
    """Pause, resume, purge or limit the queue named, then show its page."""
    ctx, form = await checked(request)
    name, verb = request.path_params["name"], request.path_params["verb"]
    if verb == "limit":  # the form's four fields: an empty one (not posted) removes it
        fields = {f: form.get(f) for f in actions.LIMIT_FIELDS}
        try:
            done = await run_in_threadpool(actions.limit, ctx.st, name, fields)
        except UnknownQueue as exc:  # the API's hint names create=True: not for a form
            raise UnknownQueue(exc.queue, exc.known) from None
        return back(request, "queue", done, name=name)
    if verb == "pause":  # until: empty, or the form's time
        done = await run_in_threadpool(actions.pause, ctx.st, name, form.get("until"))
        return back(request, "queue", done, name=name)
    act = {"resume": actions.resume, "purge": actions.purge}.get(verb)
    if act is None:
        raise HTTPException(404, f"no action {verb!r}")
    done = await run_in_threadpool(act, ctx.st, name)
    return back(request, "queue", done, name=name)


async def dead_action(request: Request) -> Response:
    """Retry or purge dead letters of the page's queue (those ticked, or a batch), or
    redrive (or count) those its filters choose."""
    ctx, form = await checked(request)
    verb = request.path_params["verb"]
    if verb == "redrive":
        return await redrive_action(request, ctx, form)
    act = {"retry": actions.retry_dead, "purge": actions.purge_dead}.get(verb)
    if act is None:
        raise HTTPException(404, f"no action {verb!r}")
    queue, ids = form.get("queue", ""), form.getlist("id")
    done = await run_in_threadpool(act, ctx.st, None if ids else queue, ids or None)
    return back(request, "queue", done, name=queue)


async def redrive_action(request: Request, ctx: Context, form: Form) -> Response:
    """Redrive the dead letters the form's filters choose (its count button: count them),
    then show the queue's page with the filters filled in again."""
    queue = form.get("queue")
    filters = {f: form.get(f) for f in REDRIVE_FILTERS}
    done = await run_in_threadpool(lambda: actions.redrive(
        ctx.st, queue, **filters, dry_run=form.get("dry_run")))
    url = request.url_for("queue", name=queue).include_query_params(
        done=done.message, **{f: v for f, v in filters.items() if v})
    return RedirectResponse(url, 303)


async def cancel_action(request: Request) -> Response:
    """Cancel the task, then show its queue's page."""
    ctx, form = await checked(request)
    done = await run_in_threadpool(actions.cancel, ctx.st, request.path_params["id"])
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


def _guarded(request: Request) -> Context:
    ctx = context(request)
    if ctx.guard is None:  # the routes exist only with a guard; this is for the type
        raise HTTPException(404)
    return ctx


async def checked(request: Request) -> tuple[Context, Form]:
    """The dashboard's context and the posted form, once its session and CSRF field are
    checked (401, 403 otherwise)."""
    ctx, form = _guarded(request), await _form(request)
    assert ctx.guard is not None
    ctx.guard.check_form(request, form.get("csrf"))
    return ctx, form


def back(request: Request, route: str, done: actions.Done, **params: str) -> Response:
    """Go back to page ``route`` saying what was done."""
    url = request.url_for(route, **params).include_query_params(done=done.message)
    return RedirectResponse(url, 303)


def _root(request: Request) -> str:
    return str(request.scope.get("root_path") or "") + "/"


def _local(request: Request, fields: Any) -> str:
    """The ``next`` field when it is a path of this dashboard, else its first page."""
    wanted = str(fields.get("next") or "")
    root = _root(request)
    if wanted.startswith(root) and not wanted.startswith("//") and "\\" not in wanted:
        return wanted
    return root


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
ACTIONS = [
    Route("/login", login_page, name="login"),
    Route("/login", login, methods=["POST"], name="login_post"),
    Route("/logout", logout, methods=["POST"], name="logout"),
    Route("/actions/queues/{name}/{verb}", queue_action, methods=["POST"], name="queue_action"),
    Route("/actions/dead/{verb}", dead_action, methods=["POST"], name="dead_action"),
    Route("/actions/tasks/{id}/cancel", cancel_action, methods=["POST"], name="cancel_action"),
]
