"""The dashboard's OpenAPI document (``GET /api/openapi.json``): written from the routes
(every route has a spec, a new one without fails), types to schemas, valid OpenAPI 3.1,
what each dashboard serves, and each read's real answer, on a dashboard with tasks
waiting, running and dead, a flow, a parked durable task and a worker, valid under its
schema.  Validating needs schemathesis (and the jsonschema_rs it brings), as CI's server
stage installs; the rest runs without."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount, Route

import shardq
from shardq.loops.resolver import resolve
from shardq.ops import workers
from shardq.web import DashboardConfig, api, create_app, openapi, roles, trail
from shardq.web.schemas import Schemas
from tests.durable_views_kit import app as durable_app
from tests.durable_views_kit import approval, park
from tests.helpers import claim_all
from tests.web import TOKEN, call, serving

pytestmark = pytest.mark.behaviour
ROUTES = [*api.READS, *api.DOCUMENT, *trail.API, *api.ACTIONS]
READS = [*api.READS, *api.DOCUMENT]  # what an open, read-only dashboard serves
flows = shardq.App()  # its function only names the flow's tasks


@flows.task
def step(n: int) -> int:
    return n


def keys(routes: list[Any]) -> set[tuple[str, str]]:
    return {(m, r.path) for r in routes for m in r.methods - {"HEAD"}}


def test_every_route_has_a_spec_and_every_spec_a_route() -> None:
    assert keys(ROUTES) == set(openapi.SPECS)
    actions = {spec.action for spec in openapi.SPECS.values() if spec.action}
    assert actions <= set(roles.ACTIONS)
    assert len(actions) == len(api.ACTIONS) + len(trail.API)


def test_a_route_without_a_spec_is_refused() -> None:
    new = Route("/api/new", api.get_workers)
    with pytest.raises(LookupError, match="no OpenAPI spec for GET /api/new"):
        openapi.document([*ROUTES, new])


@dataclass(frozen=True)
class Inner:
    """An inner record."""

    at: datetime


@dataclass(frozen=True)
class Outer:
    """An outer record."""

    id: UUID
    name: str
    n: int
    share: float
    on: bool
    kind: Literal["a", "b"]
    inner: Inner
    maybe: Inner | None
    items: list[str]
    pairs: tuple[int, ...]
    counts: dict[str, int] = field(default_factory=dict)
    anything: Any = None


def test_types_become_schemas() -> None:
    s = Schemas()
    assert s.of(Outer) == {"$ref": "#/components/schemas/Outer"}
    ref = {"$ref": "#/components/schemas/Inner"}
    assert s.components["Outer"] == {
        "type": "object", "description": "An outer record.", "additionalProperties": False,
        "required": ["id", "name", "n", "share", "on", "kind", "inner", "maybe", "items",
                     "pairs", "counts", "anything"],
        "properties": {
            "id": {"type": "string", "format": "uuid"}, "name": {"type": "string"},
            "n": {"type": "integer"}, "share": {"type": "number"}, "on": {"type": "boolean"},
            "kind": {"enum": ["a", "b"]}, "inner": ref,
            "maybe": {"anyOf": [ref, {"type": "null"}]},
            "items": {"type": "array", "items": {"type": "string"}},
            "pairs": {"type": "array", "items": {"type": "integer"}},
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "anything": {}}}
    assert s.components["Inner"]["properties"] == {"at": {"type": "string",
                                                          "format": "date-time"}}
    with pytest.raises(TypeError, match="no JSON schema"):
        s.of(set[int])


def test_actions_name_their_least_role_and_the_bearer_scheme() -> None:
    doc = openapi.document(ROUTES)
    for route in [*api.ACTIONS, *trail.API]:
        [op] = doc["paths"][route.path].values()
        assert op["x-shardq-role"] == roles.ACTIONS[op["operationId"]]
        assert op["security"] == [{"bearer": []}]
        assert {"401", "403", "503"} <= set(op["responses"])
    for route in api.READS:  # open on some dashboards, a credential's on others
        assert doc["paths"][route.path]["get"]["security"] == [{"bearer": []}, {}]
    queue = doc["paths"]["/api/queues/{name}/pause"]["post"]
    assert queue["summary"].startswith("Pause the queue named")
    assert queue["parameters"][0]["schema"]["pattern"].startswith("^[A-Za-z0-9]")


def test_the_document_is_valid_openapi_3_1() -> None:
    schemathesis = pytest.importorskip("schemathesis", reason="validates the document: "
                                       "pip install schemathesis (CI's server stage does)")
    schemathesis.openapi.from_dict(openapi.document(ROUTES)).validate()


def test_each_dashboard_documents_what_it_serves(client: shardq.Client) -> None:
    with serving(create_app(client, token=TOKEN)) as url:
        full = call(f"{url}/api/openapi.json")
    assert full.status == 200
    assert full.headers["content-type"] == "application/json"
    assert keys(ROUTES) == {(m.upper(), p) for p, ops in full.json()["paths"].items()
                            for m in ops}
    with serving(create_app(client, DashboardConfig(read_only=True))) as url:
        reads = call(f"{url}/api/openapi.json").json()
    assert set(reads["paths"]) == {r.path for r in READS}
    mounted = Starlette(routes=[Mount("/queues", app=create_app(client))])
    with serving(mounted) as url:
        assert call(f"{url}/queues/api/openapi.json").json()["servers"] == [{"url": "/queues"}]


@pytest.fixture
def busy(client: shardq.Client, dsn: str) -> dict[str, str]:
    """Tasks waiting, scheduled, running, retried and dead, a failed flow, a parked durable
    task and a registered worker; the ids the reads take."""
    queue = f"openapi-{uuid.uuid4().hex[:8]}"
    client.enqueue_many(queue, [{"n": n} for n in range(3)])
    client.enqueue(queue, {"later": True}, delay_s=600)
    [retried, dying, running] = claim_all(client, queue, most=3)
    client.set_limits(queue, max_running=5, rate=shardq.Rate(10, 60))
    client.nack(retried, "ValueError: once", retry_in_s=0)
    client.nack(dying, "ValueError: for good", dead=True)
    s = step.si(0).set(queue=f"{queue}-flow")
    flow = client.enqueue_flow(shardq.chain(s, s), name="openapi")
    [first] = claim_all(client, f"{queue}-flow")
    client.nack(first, "ValueError: boom", dead=True)
    resolve(client.statements)
    st = client.statements
    st.perform(workers.register(st, uuid.uuid4(), "w", "host", 1, [queue]))
    durable_app.use_client(client)
    parked = approval.enqueue(uuid.uuid4().hex)
    park(dsn, client, {parked: "event"})
    return {"queue": queue, "task": str(running.id), "retried": str(retried.id),
           "dead": str(dying.id), "flow": str(flow.id), "parked": str(parked)}


def reads(ids: dict[str, str]) -> list[tuple[str, str]]:
    """Each read route with the real calls to make of it."""
    return [
        ("/api/queues", "/api/queues"),
        ("/api/queues/{name}", f"/api/queues/{ids['queue']}"),
        ("/api/tasks/{id}", f"/api/tasks/{ids['task']}"),
        ("/api/tasks/{id}", f"/api/tasks/{ids['dead']}"),
        ("/api/tasks/{id}", f"/api/tasks/{ids['parked']}"),
        ("/api/tasks/{id}/attempts", f"/api/tasks/{ids['retried']}/attempts"),
        ("/api/flows/{id}", f"/api/flows/{ids['flow']}"),
        ("/api/flows/{id}", f"/api/flows/{ids['flow']}?limit=0"),
        ("/api/workers", "/api/workers"),
        ("/api/throughput", "/api/throughput"),
        ("/api/throughput", f"/api/throughput?queue={ids['queue']}"),
        ("/api/openapi.json", "/api/openapi.json"),
    ]


@pytest.mark.parametrize("hide_payloads", [False, True])
def test_real_answers_match_their_schemas(client: shardq.Client, busy: dict[str, str],
                                          hide_payloads: bool) -> None:
    jsonschema_rs = pytest.importorskip("jsonschema_rs", reason="validates the answers: "
                                        "pip install schemathesis (CI's server stage does)")
    doc = openapi.document(ROUTES)
    config = DashboardConfig(hide_payloads=hide_payloads)

    def check(path: str, status: str, answer: Any) -> None:
        schema = doc["paths"][path]["get"]["responses"][status]["content"][
            "application/json"]["schema"]
        validator = jsonschema_rs.Draft202012Validator(
            {**schema, "components": doc["components"]}, validate_formats=True)
        errors = [f"{e.instance_path}: {e.message}" for e in validator.iter_errors(answer)]
        assert not errors, (path, errors)

    with serving(create_app(client, config, token=TOKEN)) as url:
        called = reads(busy)
        assert {path for path, _ in called} == {r.path for r in READS}
        for path, target in called:
            reply = call(url + target)
            assert reply.status == 200, (target, reply.text)
            check(path, "200", reply.json())
        page = call(f"{url}/api/queues/{busy['queue']}").json()
        assert all(page[name] for name in ("dead", "running", "next_scheduled"))
        call(f"{url}/api/queues/{busy['queue']}/pause", "POST", token=TOKEN)
        trail_reply = call(f"{url}/api/audit", token=TOKEN)
        assert trail_reply.json()["audit"]
        check("/api/audit", "200", trail_reply.json())
        parked = call(f"{url}/api/tasks/{busy['parked']}").json()
        assert parked["steps"]
        assert parked["waiting_for"]
        assert ("payload_bytes" in parked) is hide_payloads
        assert call(f"{url}/api/tasks/{busy['retried']}/attempts").json()["attempts"]
        assert call(f"{url}/api/workers").json()["workers"]
        gone = call(f"{url}/api/tasks/{uuid.uuid4()}")
        assert gone.status == 404
        check("/api/tasks/{id}", "404", gone.json())
        bad = call(f"{url}/api/flows/{busy['flow']}?limit=x")
        assert bad.status == 400
        check("/api/flows/{id}", "400", bad.json())
