"""Fixtures of the chaos suite: a throwaway PostgreSQL it may restart, and the fault proxy.

Scenarios marked ``chaos_long`` run only with ``SHARDQ_CHAOS_LONG=1``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("SHARDQ_CHAOS_LONG") == "1":
        return
    skip = pytest.mark.skip(reason="a long chaos scenario: set SHARDQ_CHAOS_LONG=1")
    for item in items:
        if "chaos_long" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def chaos_pg() -> Iterator[ThrowawayPostgres]:
    """The chaos suite's own PostgreSQL (never the shared one: tests restart it)."""
    server = ThrowawayPostgres()
    yield server
    server.close()


@pytest.fixture(scope="session")
def chaos_log_pg() -> Iterator[ThrowawayPostgres]:
    """A second server for the handlers' log, untouched by the faults of the first."""
    server = ThrowawayPostgres()
    yield server
    server.close()


@pytest.fixture
def proxy(chaos_pg: ThrowawayPostgres) -> Iterator[Proxy]:
    """A fault proxy in front of the chaos server, closed after the test."""
    with Proxy(("127.0.0.1", chaos_pg.port)) as p:
        yield p
