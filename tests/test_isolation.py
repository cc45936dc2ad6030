"""A task whose lease expired without a result is suspect and runs alone, in a process of
its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.apps import leases
from tests.helpers import expire_leases, wait_for


@pytest.fixture
def fast(client: shardq.Client, dsn: str) -> Any:
    """A client on the emptied test database whose retries come due at once."""
    with shardq.Client(dsn, backoff_base_s=0.001) as c:
        yield c


def make_suspect(client: shardq.Client, queue: str) -> shardq.Task:
    """Enqueue one task and let its lease run out unsettled, as when the worker holding it
    died; the janitor puts it back as suspect."""
    task_id = client.enqueue(queue, {"poison": True})
    claimed = expire_leases(client, queue)
    assert [t.id for t in claimed] == [task_id]
    info = client.get(task_id)
    assert info is not None
    assert info.last_error is not None
    assert info.last_error.startswith("lease expired: the worker holding it died")
    return claimed[0]


def test_a_rescued_task_comes_back_suspect_and_others_do_not(fast: shardq.Client) -> None:
    poison = make_suspect(fast, "iso")
    fast.enqueue_many("iso", [{"n": i} for i in range(3)])
    claimed = [t for b in range(fast.bucket_count) for t in fast.claim_bucket("iso", b)]
    assert {t.id for t in claimed if t.suspect} == {poison.id}
    assert sum(not t.suspect for t in claimed) == 3


@pytest.fixture
def leased(db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[shardq.Client]:
    """tests.apps.leases' app on the fresh database ``db``, whose retries and rescued
    tasks come due at once."""
    monkeypatch.setenv("SHARDQ_DSN", db)
    monkeypatch.setenv("SHARDQ_TEST_PID", str(os.getpid()))
    with shardq.Client(db, backoff_base_s=0.001) as client:
        leases.app.use_client(client)
        yield client


def worker_for(db: str, **settings: Any) -> Worker:
    """A worker of tests.apps.leases' app whose retries come due at once."""
    return Worker(leases.app, ClientConfig(dsn=db, backoff_base_s=0.001),
                  WorkerConfig(janitors=0, listen=False, **settings))


def runs(dsn: str) -> list[tuple[Any, ...]]:
    """Every recorded run: (n, attempt, pid, outcome, started_at, ended_at)."""
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT n, attempt, pid, outcome, started_at, ended_at FROM runs "
                            "ORDER BY started_at").fetchall()


def test_a_suspect_runs_in_its_own_process_while_the_worker_runs_the_rest(
        db: str, leased: shardq.Client) -> None:
    suspect = leases.long.enqueue(0, 4.0)
    expire_leases(leased, "long")
    others = leases.long.enqueue_many([(n, 0.0) for n in range(1, 201)])
    worker = worker_for(db, concurrency=8, batch=100)
    worker.start()
    try:
        wait_for(lambda: leased.get(suspect) is None, timeout=60, what="the suspect's ack")
        wait_for(lambda: all(leased.get(i) is None for i in others[-5:]), timeout=30,
                 what="the other tasks' acks")
    finally:
        worker.stop(5)
    done = {n: (attempt, pid, outcome, started, ended)
            for n, attempt, pid, outcome, started, ended in runs(db)}
    assert sorted(done) == list(range(201))  # each ran once
    attempt, pid, outcome, _, suspect_ended = done[0]
    assert (attempt, outcome) == (1, "ok")  # its first expiry gave the attempt back
    assert pid != os.getpid()  # in a process of its own
    # Everything else ran in the worker, with no attempt lost, while the suspect ran.
    assert {(a, p, o) for n, (a, p, o, _, _) in done.items() if n} == {(1, os.getpid(), "ok")}
    assert max(ended for n, (*_, ended) in done.items() if n) < suspect_ended


def test_a_suspect_that_kills_its_process_fails_alone_and_dies_after_its_attempts(
        db: str, leased: shardq.Client) -> None:
    culprit = leases.crash.enqueue(0)
    expire_leases(leased, "iso")
    worker = worker_for(db, concurrency=4)
    worker.start()
    try:
        wait_for(lambda: (info := leased.get(culprit)) is not None and info.state == "dead",
                 timeout=60, what="the culprit to die")
        # The worker survived it and goes on running tasks.
        after = leases.long.enqueue(1, 0.0)
        wait_for(lambda: leased.get(after) is None, timeout=30, what="a task after it")
    finally:
        worker.stop(5)
    info = leased.get(culprit)
    assert info is not None
    assert info.attempts == 2
    assert info.last_error is not None
    assert info.last_error.startswith("process died: the handler's process was killed by "
                                      "SIGKILL")
    crashes = [r for r in runs(db) if r[3] == "crashing"]
    assert [(n, attempt) for n, attempt, *_ in crashes] == [(0, 1), (0, 2)]
    assert all(pid != os.getpid() for _, _, pid, *_ in crashes)


def test_a_suspect_that_raises_fails_with_its_own_traceback(
        db: str, leased: shardq.Client) -> None:
    task_id = leases.fails.enqueue(7)
    expire_leases(leased, "iso")
    worker = worker_for(db)
    worker.start()

    def failures() -> list[shardq.Attempt]:
        return [a for a in leased.attempts(task_id) if a.outcome == "failed"]

    try:
        wait_for(lambda: bool(failures()), timeout=60, what="the failure to be recorded")
    finally:
        worker.stop(5)
    # The suspect's run (the attempt after its lease expired), whatever retries came after.
    first = failures()[0]
    assert first.error is not None
    assert "tests/apps/leases.py" in first.error  # the child's traceback
    assert first.error.rstrip().endswith("ValueError: bad input 7")


def test_a_suspect_on_its_last_attempt_dies_with_its_history(
        timed: shardq.Client, clock: shardq.ManualClock) -> None:
    client = timed
    task_id = client.enqueue("iso", {}, max_attempts=1)
    # (rescued, dead) of each pass: what else a pass did (results of other tests on the
    # shared database expiring under the moved clock) is not this test's.
    for expiry, expected in enumerate([(1, 0), (0, 1)]):
        if expiry:  # wait out the backoff of the first rescue
            clock.advance(3600)
        claimed = [t for b in range(client.bucket_count)
                   for t in client.claim_bucket("iso", b, lease_s=5)]
        assert len(claimed) == 1
        assert claimed[0].attempts == 1  # the first expiry gave the attempt back
        clock.advance(6)  # the lease runs out
        report = client.run_janitor_once()
        assert (report.rescued, report.dead) == expected
    info = client.get(task_id)
    assert info is not None
    assert info.state == "dead"
    assert info.last_error is not None
    assert "died" in info.last_error
