"""The JSON API behind the pages.

Reads: ``GET /api/queues``, ``/api/queues/{name}``, ``/api/tasks/{id}`` (its
``history`` holds its attempts), ``/api/tasks/{id}/attempts`` (a finished task's too),
``/api/flows/{id}[?limit=]``, ``/api/workers``, ``/api/throughput[?queue=]``, and for
admins ``/api/audit[?actor=&action=&queue=&before=&limit=]``.  Actions (served only to
a dashboard that knows who acts, each needing ``Authorization: Bearer <token>`` of a
role that may, see :mod:`shardq.web.roles`):
``POST /api/queues/{name}/pause|resume|purge`` (pause takes ``{"until": "ISO 8601
time"}``), ``POST /api/queues/{name}/limits`` (404 for a queue shardq does not know,
unless ``?create=1``), ``POST /api/dead/retry|purge`` with ``{"queue": ...}`` or
``{"ids": [...]}``, ``POST /api/dead/redrive`` with ``{"queue", "error",
"older_than_s", "newer_than_s", "dry_run"}``, ``POST /api/tasks/{id}/cancel`` and
``POST /api/flows/{id}/cancel``.  Actions answer ``{"message", "count", "more"}``;
``more`` says a bounded action left work to do (call it again).  ``GET
/api/openapi.json`` is the API's OpenAPI 3.1 document (:mod:`shardq.web.openapi`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from shardq.core.errors import UnknownQueue
from shardq.core.statements import Statements
from shardq.ops import attempts, history, inspection, queuestats, workers
from shardq.ops.audit import Actor
from shardq.web import actions, openapi, reads
from shardq.web.context import context
from shardq.web.gate import authorised, showing

Endpoint = Callable[[Request], Awaitable[JSONResponse]]
TRUE = ("1", "true", "yes")
FLOW_LIMIT = 1000  # a flow's tasks listed unless ?limit= says otherwise
REDRIVE_FIELDS = {"queue", "error", "older_than_s", "newer_than_s", "dry_run"}


def get_queues(request: Request) -> JSONResponse:
    """Every queue's figures."""
    st = context(request).st
    return JSONResponse({"queues": [q.as_dict() for q in st.perform(queuestats.queues(st))]})


def get_queue(request: Request) -> JSONResponse:
    """One queue's figures, task lists and hour of throughput."""
    ctx = context(request)
    view = reads.queue_view(ctx.st, request.path_params["name"])
    return JSONResponse(reads.queue_json(view, showing(request), ctx.masks))


def get_task(request: Request) -> JSONResponse:
    """One task's record (404 when it is gone)."""
    ctx = context(request)
    task = ctx.st.perform(inspection.get(ctx.st, request.path_params["id"]))
    if task is None:
        raise HTTPException(404, "no such task (finished, purged or never enqueued)")
    return JSONResponse(reads.task_json(task, showing(request), ctx.masks))


def get_attempts(request: Request) -> JSONResponse:
    """A task's attempts, which outlive it (an empty list when none are kept)."""
    st = context(request).st
    found = st.perform(attempts.attempts(st, request.path_params["id"]))
    return JSONResponse({"attempts": [reads.plain(dataclasses.asdict(a)) for a in found]})


def get_flow(request: Request) -> JSONResponse:
    """One flow: its state, counts, progress and first ``limit`` tasks (1,000 by default;
    404 for an unknown id)."""
    raw = request.query_params.get("limit", str(FLOW_LIMIT))
    try:
        limit = int(raw)
    except ValueError:
        raise HTTPException(400, f"limit must be an integer, got {raw!r}") from None
    found = reads.flow(context(request).st, request.path_params["id"], limit)
    if found is None:
        raise HTTPException(404, "no such flow (it ended longer ago than its keep_result_s, "
                                 "or never existed)")
    return JSONResponse(reads.flow_json(found))


def get_workers(request: Request) -> JSONResponse:
    """The registered workers, alive or stale, with the tasks each holds."""
    st = context(request).st
    return JSONResponse({"workers": reads.workers_json(st.perform(workers.listing(st)))})


def get_throughput(request: Request) -> JSONResponse:
    """Tasks enqueued and completed per minute over the last hour."""
    st = context(request).st
    minutes = st.perform(history.series(st, request.query_params.get("queue")))
    return JSONResponse({"minutes": reads.minutes_json(minutes)})


def get_openapi(request: Request) -> JSONResponse:
    """This API's OpenAPI 3.1 document: the calls this dashboard serves."""
    from shardq.web import trail  # the audit's routes import the pages, which import this

    authority = context(request).authority
    served = [*READS, *DOCUMENT, *(trail.API if authority.mode != "open" else []),
              *(ACTIONS if authority.acts else [])]
    return JSONResponse(openapi.document(served, request.scope.get("root_path", "")))


def queue_action(action: str, act: Callable[[Statements, Actor, str], actions.Done]
                 ) -> Endpoint:
    """The endpoint that runs ``act`` (resume or purge) on the queue named."""
    async def endpoint(request: Request) -> JSONResponse:
        name = request.path_params["name"]
        who = await authorised(request, action, queue=name)
        return _done(await run_in_threadpool(act, context(request).st, who, name))
    endpoint.__doc__ = act.__doc__  # the API's document describes the call by it
    return endpoint


def dead_action(action: str, act: Callable[[Statements, Actor, str | None, list[str] | None],
                                           actions.Done]) -> Endpoint:
    """The endpoint that runs ``act`` (retry or purge) on dead letters: by ids, or a
    bounded batch of a queue's newest."""
    async def endpoint(request: Request) -> JSONResponse:
        body = await _body(request)
        who = await authorised(request, action, queue=body.get("queue"))
        return _done(await run_in_threadpool(act, context(request).st, who,
                                             body.get("queue"), body.get("ids")))
    endpoint.__doc__ = act.__doc__  # the API's document describes the call by it
    return endpoint


async def post_pause(request: Request) -> JSONResponse:
    """Pause the queue named: until resumed, or with ``{"until": "ISO 8601 time"}`` (its
    offset included) until then."""
    body = await _fields(request, {"until"}, '{"until": "2026-12-01T09:00:00+00:00"}, '
                                             "or no body")
    name = request.path_params["name"]
    who = await authorised(request, "pause", queue=name)
    return _done(await run_in_threadpool(actions.pause, context(request).st, who, name,
                                          body.get("until")))


async def post_redrive(request: Request) -> JSONResponse:
    """Make a queue's dead tasks eligible again, chosen by their last error and how long
    ago they died, a bounded batch a call; with ``"dry_run": true``, count them."""
    body = await _fields(request, REDRIVE_FIELDS,
                         '{"queue": name, "error": text, "older_than_s": N, '
                         '"newer_than_s": N, "dry_run": true}, all but queue optional')
    if not isinstance(body.get("queue"), str):
        raise HTTPException(400, 'give {"queue": name, ...}')
    if not isinstance(body.get("dry_run", False), bool):  # a dry run mistyped would redrive
        raise HTTPException(400, '"dry_run" must be true or false')
    who = await authorised(request, "redrive", queue=body["queue"])
    st = context(request).st
    return _done(await run_in_threadpool(
        lambda: actions.redrive(st, who, body["queue"], error=body.get("error"),
                                older_than_s=body.get("older_than_s"),
                                newer_than_s=body.get("newer_than_s"),
                                dry_run=body.get("dry_run") is True)))


async def post_limits(request: Request) -> JSONResponse:
    """Change the queue's limits named in the body (``{"max_running": 8, "rate":
    "100/60"}``; null removes one, one not named stays).  A queue shardq does not know
    is answered 404 unless ``?create=1`` or ``"create": true`` in the body."""
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise HTTPException(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise HTTPException(400, 'give {"max_running": N, "rate": "COUNT/PERIOD_S[/BURST]", '
                                 '...}, null to remove one')
    create = body.pop("create", False) is True or request.query_params.get("create") in TRUE
    fields = {k: "none" if v is None else str(v) for k, v in body.items()}
    name = request.path_params["name"]
    who = await authorised(request, "limits", queue=name)
    try:
        return _done(await run_in_threadpool(actions.limit, context(request).st, who,
                                              name, fields, create=create))
    except UnknownQueue as exc:  # the API's hint names create=True: give the API's way
        raise UnknownQueue(exc.queue, exc.known, "to limit it before its first task, add "
                           '?create=1 or "create": true') from None


async def post_cancel(request: Request) -> JSONResponse:
    """Cancel a waiting or running task."""
    who = await authorised(request, "cancel")
    return _done(await run_in_threadpool(actions.cancel, context(request).st, who,
                                         request.path_params["id"]))


async def post_cancel_flow(request: Request) -> JSONResponse:
    """Cancel every task of a flow that has not finished (404 for an unknown flow)."""
    who = await authorised(request, "cancel_flow")
    done = await run_in_threadpool(actions.cancel_flow, context(request).st, who,
                                   request.path_params["id"])
    if done is None:
        raise HTTPException(404, "no such flow (it ended longer ago than its keep_result_s, "
                                 "or never existed)")
    return _done(done)


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise HTTPException(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict) or set(body) - {"queue", "ids"}:
        raise HTTPException(400, 'give {"queue": name} or {"ids": [task ids]}')
    return body


async def _fields(request: Request, allowed: set[str], usage: str) -> dict[str, Any]:
    """The body's JSON object, of the fields ``allowed`` (400 with ``usage`` otherwise)."""
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise HTTPException(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict) or set(body) - allowed:
        raise HTTPException(400, f"give {usage}")
    return body


def _done(done: actions.Done) -> JSONResponse:
    return JSONResponse(dataclasses.asdict(done))


READS = [
    Route("/api/queues", get_queues),
    Route("/api/queues/{name}", get_queue),
    Route("/api/tasks/{id}", get_task),
    Route("/api/tasks/{id}/attempts", get_attempts),
    Route("/api/flows/{id}", get_flow),
    Route("/api/workers", get_workers),
    Route("/api/throughput", get_throughput),
]
DOCUMENT = [Route("/api/openapi.json", get_openapi)]  # served to anyone: it holds no data
ACTIONS = [
    Route("/api/queues/{name}/pause", post_pause, methods=["POST"]),
    *(Route(f"/api/queues/{{name}}/{verb}", queue_action(verb, act), methods=["POST"])
      for verb, act in (("resume", actions.resume), ("purge", actions.purge))),
    Route("/api/queues/{name}/limits", post_limits, methods=["POST"]),
    *(Route(f"/api/dead/{verb}", dead_action(f"{verb}_dead", act), methods=["POST"])
      for verb, act in (("retry", actions.retry_dead), ("purge", actions.purge_dead))),
    Route("/api/dead/redrive", post_redrive, methods=["POST"]),
    Route("/api/tasks/{id}/cancel", post_cancel, methods=["POST"]),
    Route("/api/flows/{id}/cancel", post_cancel_flow, methods=["POST"]),
]
