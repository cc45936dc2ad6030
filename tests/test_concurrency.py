"""Many claimers at once: exclusivity and round-robin fairness."""

from __future__ import annotations

import functools
import itertools
import threading
from collections import Counter
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client
from tests.helpers import in_threads

pytestmark = pytest.mark.server


def test_eight_threads_claim_each_task_exactly_once(dsn: str, client: Client,
                                                    connect: psycopg.Connection[Any]) -> None:
    total = 20_000
    client.enqueue_many("q", [{"n": n} for n in range(total)])
    seen: list[tuple[Any, Any]] = []
    lock = threading.Lock()

    def worker(c: Client) -> None:
        empty_rounds = 0
        while empty_rounds < 2:
            tasks = c.claim("q", limit=50, lease_s=300)
            if not tasks:
                empty_rounds += 1
                continue
            empty_rounds = 0
            with lock:
                seen.extend((t.id, t.lease_token) for t in tasks)

    with shardq.Client(dsn, pool_max_size=9) as shared:
        errors = in_threads(*[functools.partial(worker, shared)] * 8)
    assert errors == []
    ids = Counter(task_id for task_id, _ in seen)
    assert len(ids) == total
    assert max(ids.values()) == 1
    assert connect.execute(
        "SELECT count(*), count(DISTINCT lease_token), min(attempts), max(attempts) "
        "FROM shardq.tasks WHERE status = 'locked'").fetchone() == (
            total, len({token for _, token in seen}), 1, 1)
    tokens = dict(seen)
    rows = connect.execute("SELECT id, lease_token FROM shardq.tasks").fetchall()
    assert all(tokens[i] == tok for i, tok in rows)


def test_claims_visit_buckets_round_robin(client: Client) -> None:
    client.enqueue_many("q", [{} for _ in range(16 * 40)])
    visited = []
    for _ in range(32):
        tasks = client.claim("q", limit=5)
        assert tasks
        assert len({t.bucket for t in tasks}) == 1
        visited.append(tasks[0].bucket)
    # Every bucket has work, so each call takes the next bucket: two full rounds.
    assert Counter(visited) == Counter({b: 2 for b in range(16)})
    assert all((b - a) % 16 == 1 for a, b in itertools.pairwise(visited))


def test_separate_clients_start_at_spread_offsets(dsn: str, client: Client) -> None:
    client.enqueue_many("q", [{} for _ in range(16 * 10)])
    starts = set()
    for _ in range(12):
        with shardq.Client(dsn) as c:
            starts.add(c.claim("q", limit=1)[0].bucket)
    assert len(starts) > 1
