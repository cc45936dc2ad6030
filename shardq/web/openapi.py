"""The dashboard's JSON API as an OpenAPI 3.1 document (``GET /api/openapi.json``),
written from its routes.

The routes (:mod:`shardq.web.api`) give the paths, their parameters, the methods and
each call's summary and description (its endpoint's docstring); :data:`SPECS` gives,
for each route by method and path, what a route does not say: the schema of its answer
(made from the dataclasses it is written from, :mod:`shardq.web.schemas`), the errors
it may answer, its query parameters and body, and for an action its name among the
roles' (:data:`shardq.web.roles.ACTIONS`), whose least role the document names
(``x-shardq-role``).  A route without a spec is refused (:func:`document` raises
LookupError), so none is served undocumented.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from starlette.routing import BaseRoute, Route

from shardq import __version__
from shardq.core.task import Attempt, Step, TaskInfo
from shardq.core.validate import MAX_RUNNING, QUEUE_NAME
from shardq.flows.nodes import Flow
from shardq.ops.audit import LIST_MOST, Record
from shardq.ops.graphs import MAX_LISTED
from shardq.ops.history import Minute
from shardq.ops.queuestats import QueueStats
from shardq.ops.workers import WorkerInfo
from shardq.web import roles
from shardq.web.actions import ACTION_ROWS, LIMIT_FIELDS, Done
from shardq.web.reads import Progress, QueueView
from shardq.web.schemas import PREFIX, Schema, Schemas, obj, plain_text

Answer = Callable[[Schemas], Schema]
UUID_TEXT: Schema = {"type": "string", "format": "uuid"}
QUEUE: Schema = {"type": "string", "pattern": f"^{QUEUE_NAME.pattern}$"}
BYTES: Schema = {"type": "integer", "minimum": 0}
ERRORS = {
    400: "Bad input: an invalid name, id, parameter or body.",
    401: "No credential where one is needed (`Authorization: Bearer <token>`).",
    403: "A wrong token, or a role that may not do this (the database's or the user's).",
    404: "No such queue, task or flow.",
    503: "The database did not answer.",
}
PATH_PARAMETERS = {"name": QUEUE, "id": UUID_TEXT}  # /queues/{name}, /tasks|flows/{id}
SLO_KEYS = ("slo_s", "slo_breach_in_s", "consumers_needed")  # only with an SLO


@dataclass(frozen=True)
class Spec:
    """What a route's :class:`~starlette.routing.Route` does not say: its answer's
    schema, the errors it may answer besides 503 (an action's 401 and 403 go without
    saying), its query parameters and JSON body, and an action's name in
    :data:`shardq.web.roles.ACTIONS`."""

    answer: Answer
    errors: tuple[int, ...] = ()
    query: tuple[Schema, ...] = ()
    body: Schema | None = None
    action: str | None = None


def task(s: Schemas) -> Schema:
    """A task's record; a dashboard that hides payloads gives their size in bytes
    (``payload_bytes``, a step's ``value_bytes``) instead of them."""
    s.record(Step, optional=("value", "value_bytes"), extra={"value_bytes": BYTES},
             either=("value", "value_bytes"))
    return s.record(TaskInfo, optional=("payload", "payload_bytes"),
                    extra={"payload_bytes": BYTES}, either=("payload", "payload_bytes"))


def queue_stats(s: Schemas) -> Schema:
    """A queue's figures (``QueueStats.as_dict``: the SLO's keys only with one)."""
    return s.record(QueueStats, optional=SLO_KEYS)


def queue_page(s: Schemas) -> Schema:
    """A queue's figures, task lists and hour (``reads.queue_json``)."""
    task(s)
    queue_stats(s)
    return s.record(QueueView)


def flow(s: Schemas) -> Schema:
    """A flow with its progress (``reads.flow_json``)."""
    done = s.record(Progress, name="FlowProgress", drop=("shares",))
    return s.record(Flow, extra={"progress": done})


def listed(key: str, item: Answer) -> Answer:
    """The answer ``{key: [item, ...]}``."""
    return lambda s: obj(**{key: {"type": "array", "items": item(s)}})


def done(s: Schemas) -> Schema:
    """What an action did."""
    return s.of(Done)


def query(name: str, schema: Schema, description: str) -> Schema:
    """An optional query parameter."""
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


DEAD_BODY: Schema = {"oneOf": [
    {**obj(queue=QUEUE), "description": f"The newest {ACTION_ROWS:,} of the queue's."},
    {**obj(ids={"type": "array", "items": UUID_TEXT, "minItems": 1,
                "maxItems": ACTION_ROWS}), "description": "These dead tasks."}]}
LIMITS_BODY: Schema = {
    "type": "object", "additionalProperties": False,
    "description": "The limits to change; one not named stays, null removes one.",
    "properties": {
        **{name: {"anyOf": [{"type": "string", "pattern": r"^\d+/\d+(\.\d+)?(/\d+)?$"},
                            {"type": "null"}], "description": "COUNT/PERIOD_S[/BURST]"}
           for name in LIMIT_FIELDS if name.startswith("rate")},
        **{name: {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_RUNNING},
                            {"type": "null"}]}
           for name in LIMIT_FIELDS if not name.startswith("rate")},
        "create": {"type": "boolean", "description": "Limit a queue shardq does not know."},
    }}
PAUSE_BODY: Schema = {
    "type": "object", "additionalProperties": False,
    "description": "Optional: without it (or without until) the pause lasts until resumed.",
    "properties": {"until": {"type": "string", "format": "date-time",
                             "description": "When the pause ends (with its offset)."}}}
SECONDS: Schema = {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]}
REDRIVE_BODY: Schema = {
    "type": "object", "additionalProperties": False, "required": ["queue"],
    "description": "Which dead tasks of the queue: by their last error and how long ago "
                   "they died; with dry_run, counted only.",
    "properties": {"queue": QUEUE,
                   "error": {"anyOf": [{"type": "string"}, {"type": "null"}],
                             "description": "A part of the last error, in any case."},
                   "older_than_s": SECONDS, "newer_than_s": SECONDS,
                   "dry_run": {"type": "boolean"}}}
CREATE = query("create", {"type": "string", "enum": ["1", "true", "yes"]},
               "Limit a queue shardq does not know (as `\"create\": true` does).")

SPECS: dict[tuple[str, str], Spec] = {
    ("GET", "/api/queues"): Spec(listed("queues", queue_stats)),
    ("GET", "/api/queues/{name}"): Spec(queue_page, (400,)),
    ("GET", "/api/tasks/{id}"): Spec(task, (400, 404)),
    ("GET", "/api/tasks/{id}/attempts"): Spec(listed("attempts", lambda s: s.of(Attempt)),
                                              (400,)),
    ("GET", "/api/flows/{id}"): Spec(flow, (400, 404), (query(
        "limit", {"type": "integer", "minimum": 0, "maximum": MAX_LISTED},
        "How many of its tasks to list (1,000 by default)."),)),
    ("GET", "/api/workers"): Spec(listed("workers", lambda s: s.of(WorkerInfo))),
    ("GET", "/api/throughput"): Spec(listed("minutes", lambda s: s.of(Minute)), (400,), (
        query("queue", QUEUE, "One queue's (every queue's without)."),)),
    ("GET", "/api/openapi.json"): Spec(lambda s: {
        "type": "object", "required": ["openapi", "info", "paths"],
        "description": "This document."}),
    ("POST", "/api/queues/{name}/pause"): Spec(done, (400, 404), body=PAUSE_BODY,
                                               action="pause"),
    ("POST", "/api/queues/{name}/resume"): Spec(done, (400, 404), action="resume"),
    ("POST", "/api/queues/{name}/purge"): Spec(done, (400,), action="purge"),
    ("POST", "/api/queues/{name}/limits"): Spec(done, (400, 404), (CREATE,), LIMITS_BODY,
                                                "limits"),
    ("POST", "/api/dead/retry"): Spec(done, (400,), body=DEAD_BODY, action="retry_dead"),
    ("POST", "/api/dead/purge"): Spec(done, (400,), body=DEAD_BODY, action="purge_dead"),
    ("POST", "/api/dead/redrive"): Spec(done, (400, 404), body=REDRIVE_BODY,
                                        action="redrive"),
    ("POST", "/api/tasks/{id}/cancel"): Spec(done, (400,), action="cancel"),
    ("POST", "/api/flows/{id}/cancel"): Spec(done, (400, 404), action="cancel_flow"),
    ("GET", "/api/audit"): Spec(listed("audit", lambda s: s.of(Record)), (400,), (
        query("actor", {"type": "string"}, "Only this user's."),
        query("action", {"type": "string"}, "Only this action's (pause, login, ...)."),
        query("queue", {"type": "string"}, "Only those on this queue."),
        query("before", {"type": "string", "format": "date-time"},
              "Only those before this time (with its zone): the last row's, to page back."),
        query("limit", {"type": "integer", "minimum": 1, "maximum": LIST_MOST},
              "At most this many (100 by default)."),), action="audit"),
}


def document(routes: Iterable[BaseRoute], root_path: str = "") -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes`` (the API's, as served under ``root_path``)."""
    s = Schemas()
    s.components["Error"] = obj(error={"type": "string"})
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not isinstance(route, Route) or route.methods is None:
            raise LookupError(f"no OpenAPI document for the route {route!r}")
        for method in sorted(route.methods - {"HEAD"}):
            spec = SPECS.get((method, route.path))
            if spec is None:
                raise LookupError(f"no OpenAPI spec for {method} {route.path}: add one to "
                                  "shardq.web.openapi.SPECS")
            paths.setdefault(route.path, {})[method.lower()] = operation(route, spec, s)
    return {
        "openapi": "3.1.0",
        "info": {"title": "shardq dashboard", "version": __version__,
                 "description": "The JSON API of shardq's dashboard: reads, and actions "
                                "that need `Authorization: Bearer <token>`."},
        "servers": [{"url": root_path or "/"}],
        "paths": paths,
        "components": {"schemas": s.components,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


def operation(route: Route, spec: Spec, s: Schemas) -> dict[str, Any]:
    """One route's method as an OpenAPI operation."""
    text = plain_text(route.endpoint.__doc__ or "")
    # Any call may need a credential (a dashboard of named users, or behind a proxy).
    errors = {*spec.errors, 503, 401, 403}
    out: dict[str, Any] = {
        "operationId": spec.action or route.name,
        "summary": re.split(r"(?<=\.)\s", text, maxsplit=1)[0].rstrip("."),
        "description": text,
        "parameters": [path_parameter(route.path, name) for name in route.param_convertors]
                      + list(spec.query),
        "responses": {"200": json_answer("The answer.", spec.answer(s)),
                      **{str(code): error(code) for code in sorted(errors)}},
    }
    if spec.body is not None:
        # A body whose every field may be left out may be left out whole.
        out["requestBody"] = {"required": "required" in spec.body or "oneOf" in spec.body,
                              "content": {"application/json": {"schema": spec.body}}}
    out["security"] = [{"bearer": []}, {}]  # reads are open on some dashboards
    if spec.action:
        out["security"] = [{"bearer": []}]
        out["x-shardq-role"] = roles.ACTIONS[spec.action]
    return out


def path_parameter(path: str, name: str) -> Schema:
    """The path parameter ``name`` of ``path``: ``/api/tasks/{id}`` is a task's id."""
    parts = path.split("/")
    kind = parts[parts.index("{" + name + "}") - 1].removesuffix("s")
    return {"name": name, "in": "path", "required": True, "schema": PATH_PARAMETERS[name],
            "description": f"The {kind}'s {name}."}


def json_answer(description: str, schema: Schema) -> dict[str, Any]:
    """A response of JSON ``schema``."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error(code: int) -> dict[str, Any]:
    """An error response: ``{"error": message}``."""
    out = json_answer(ERRORS[code], {"$ref": PREFIX + "Error"})
    if code == 401:
        out["headers"] = {"WWW-Authenticate": {"schema": {"type": "string", "const": "Bearer"}}}
    return out
