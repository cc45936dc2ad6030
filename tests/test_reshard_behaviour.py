"""A reshard and its status through each client, as the behavioural tests run (behind
PgBouncer too: in transaction mode a reshard is refused in one line, since it needs a
server session of its own; the status reads as anywhere)."""

from __future__ import annotations

import asyncio
import time

import pytest

import shardq
from shardq.core.boundary import LAYOUT_CHECK_S
from shardq.ops.reshard import ReshardStatus
from tests.conftest import POOLER, Databases
from tests.helpers import claim_all

pytestmark = pytest.mark.behaviour


def statuses(kind: str, url: str, count: int) -> tuple[ReshardStatus, ReshardStatus, int]:
    """The status before, what a reshard to ``count`` by the ``kind`` client returns, and
    the bucket count that a client of that kind opened before it follows to."""
    if kind == "Client":
        with shardq.Client(url) as before, shardq.Client(url) as client:
            status = client.reshard_status(), client.reshard(count)
            time.sleep(LAYOUT_CHECK_S)
            before.follow_layout()
            return (*status, before.bucket_count)

    async def run() -> tuple[ReshardStatus, ReshardStatus, int]:
        async with shardq.AsyncClient(url) as before, shardq.AsyncClient(url) as client:
            status = await client.reshard_status(), await client.reshard(count)
            await asyncio.sleep(LAYOUT_CHECK_S)
            await before.follow_layout()
            return (*status, before.bucket_count)

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
def test_a_reshard_changes_the_bucket_count_and_its_status_says_so(databases: Databases,
                                                                   kind: str) -> None:
    url = databases.create(bucket_count=16)
    with shardq.Client(url) as client:
        ids = set(client.enqueue_many("behaved", [{"n": n} for n in range(40)]))
    if POOLER == "transaction":
        with pytest.raises(shardq.ConfigError, match="needs a server session of its own"):
            statuses(kind, url, 32)
        return
    before, after, followed = statuses(kind, url, 32)
    assert followed == 32
    assert (before.bucket_count, before.generation, before.phase) == (16, 0, "done")
    assert (after.bucket_count, after.generation, after.phase) == (32, 1, "done")
    with shardq.Client(url) as client:
        assert client.bucket_count == 32
        assert {t.id for t in claim_all(client, "behaved")} == ids
