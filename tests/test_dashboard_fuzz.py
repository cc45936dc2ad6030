"""Schemathesis against a live dashboard over HTTP (a real uvicorn on a real database, with
tasks waiting and dead letters): every operation of its OpenAPI document, called with
generated input valid and invalid, answers no 5xx, only the status codes and content
types it documents, and bodies valid under its schemas.  Each operation runs with each
user's credentials, and a user never gets a 2xx from an action its role may not do.

The examples are bounded (:data:`EXAMPLES` an operation) and derandomised: the same
cases every run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import shardq
from shardq.web import create_app, openapi, roles
from tests.helpers import claim_all
from tests.web import TOKEN, serving

schemathesis = pytest.importorskip(
    "schemathesis", reason="fuzzes the dashboard's API: pip install schemathesis (CI's "
    "server stage does)")

from hypothesis import HealthCheck, given, settings  # noqa: E402 (after the skip)
from hypothesis import strategies as st  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

EXAMPLES = 25
CREDENTIALS = [pytest.param(TOKEN, "admin", id="admin")]
"""(bearer token, its user's role): one token today, whose user may do everything.  Users
with roles add their credentials here, and :func:`role_respected` holds each to its
role."""
OPERATIONS = [pytest.param(method, path, id=f"{method} {path}")
              for method, path in sorted(openapi.SPECS)]


def role_respected(role: roles.Role) -> Any:
    """A check: an action whose least role (``x-shardq-role``) is above ``role`` answers no
    2xx."""
    def check(ctx: Any, response: Any, case: Any) -> None:
        needed = case.operation.definition.raw.get("x-shardq-role")
        if needed and roles.ROLES.index(role) < roles.ROLES.index(needed) \
                and 200 <= response.status_code < 300:
            raise AssertionError(f"{case.operation.label} needs the role {needed}, yet a "
                                 f"{role} got {response.status_code}")
    check.__name__ = f"role_respected_{role}"
    return check


@pytest.fixture
def site(client: shardq.Client) -> Iterator[str]:
    """A dashboard with the token, over queues with tasks waiting, scheduled and dead."""
    queue = f"fuzz-{uuid.uuid4().hex[:8]}"
    client.enqueue_many(queue, [{"n": n} for n in range(5)])
    client.enqueue(queue, {"later": True}, delay_s=600)
    dying = claim_all(client, queue, most=2)
    client.nack_many(dying, ["boom"] * 2, dead=[True] * 2)
    with serving(create_app(client, token=TOKEN)) as url:
        yield url


@pytest.mark.parametrize(("token", "role"), CREDENTIALS)
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_the_api_keeps_its_document(site: str, method: str, path: str, token: str,
                                    role: roles.Role) -> None:
    schema = schemathesis.openapi.from_url(f"{site}/api/openapi.json")
    operation = schema[path][method]
    cases = st.one_of(operation.as_strategy(schemathesis.GenerationMode.POSITIVE),
                      operation.as_strategy(schemathesis.GenerationMode.NEGATIVE))
    checks = [not_a_server_error, status_code_conformance, content_type_conformance,
              response_schema_conformance, role_respected(role)]

    def fuzz(case: Any) -> None:
        case.call_and_validate(base_url=site, headers={"Authorization": f"Bearer {token}"},
                               checks=checks)

    settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
             suppress_health_check=list(HealthCheck))(given(case=cases)(fuzz))()
