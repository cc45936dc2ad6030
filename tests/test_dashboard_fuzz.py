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
from pathlib import Path
from typing import Any

import pytest

import shardq
from shardq.web import DashboardConfig, create_app, openapi, roles, users
from tests.helpers import claim_all
from tests.web import serving

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

EXAMPLES = 15
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
def tokens(tmp_path: Path) -> dict[str, str]:
    """A users file with one user of each role: its path, and their tokens by role."""
    path = str(tmp_path / "users")
    return {"path": path, **{role: users.add(path, f"fuzz-{role}", role)
                             for role in roles.ROLES}}


@pytest.fixture
def site(client: shardq.Client, tokens: dict[str, str]) -> Iterator[str]:
    """A dashboard of named users, over queues with tasks waiting, scheduled and dead."""
    queue = f"fuzz-{uuid.uuid4().hex[:8]}"
    client.enqueue_many(queue, [{"n": n} for n in range(5)])
    client.enqueue(queue, {"later": True}, delay_s=600)
    dying = claim_all(client, queue, most=2)
    client.nack_many(dying, ["boom"] * 2, dead=[True] * 2)
    config = DashboardConfig(users_file=tokens["path"])
    with serving(create_app(client, config)) as url:
        yield url


@pytest.mark.parametrize("role", roles.ROLES)
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_the_api_keeps_its_document(site: str, tokens: dict[str, str], method: str,
                                    path: str, role: roles.Role) -> None:
    token = tokens[role]
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
