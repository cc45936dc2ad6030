"""A task whose lease expired without a result is suspect and runs alone."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

import shardq
from shardq.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from shardq.worker.isolation import Gate


@pytest.fixture
def fast(client: shardq.Client, dsn: str) -> Any:
    """A client on the emptied test database whose retries come due at once."""
    with shardq.Client(dsn, backoff_base_s=0.001) as c:
        yield c


def make_suspect(client: shardq.Client, queue: str) -> shardq.Task:
    """Enqueue one task, claim it on a short lease and let the lease run out unsettled,
    as when the worker holding it died; the janitor puts it back as suspect."""
    task_id = client.enqueue(queue, {"poison": True})
    claimed = [t for b in range(client.bucket_count)
               for t in client.claim_bucket(queue, b, lease_s=0.05)]
    assert [t.id for t in claimed] == [task_id]
    time.sleep(0.2)
    assert client.run_janitor_once().rescued == 1
    info = client.get(task_id)
    assert info is not None
    assert info.last_error is not None
    assert info.last_error.startswith("lease expired: the worker holding it died")
    return claimed[0]


def test_a_rescued_task_comes_back_suspect_and_others_do_not(fast: shardq.Client) -> None:
    poison = make_suspect(fast, "iso")
    fast.enqueue_many("iso", [{"n": i} for i in range(3)])
    time.sleep(0.05)  # past the 2 ms backoff of its first retry
    claimed = [t for b in range(fast.bucket_count) for t in fast.claim_bucket("iso", b)]
    assert {t.id for t in claimed if t.suspect} == {poison.id}
    assert sum(not t.suspect for t in claimed) == 3


def test_a_suspect_runs_alone_and_its_batch_mates_lose_no_attempt(
        dsn: str, fast: shardq.Client, connect: psycopg.Connection[Any]) -> None:
    poison = make_suspect(fast, "iso")
    fast.enqueue_many("iso", [{"n": i} for i in range(200)])
    app = shardq.App(dsn)
    running = 0
    beside: list[int] = []
    attempts: dict[bool, set[int]] = {True: set(), False: set()}
    lock = threading.Lock()
    done = threading.Event()

    @app.handler("iso")
    def handle(payload: dict[str, Any]) -> None:
        nonlocal running
        with lock:
            running += 1
            attempts[bool(payload.get("poison"))].add(shardq.current().task.attempts)
            if payload.get("poison"):
                beside.append(running - 1)  # how many others ran at the same time
        time.sleep(0.005)
        with lock:
            running -= 1

    # One bucket holds everything, so the suspect is claimed inside a full batch.
    worker = Worker(app, ClientConfig(dsn=dsn),
                    WorkerConfig(janitors=0, listen=False, concurrency=8, batch=100))
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if connect.execute("SELECT count(*) FROM shardq.tasks").fetchone() == (0,):
                done.set()
                break
            time.sleep(0.05)
    finally:
        worker.stop(5)
    assert done.is_set(), connect.execute(
        "SELECT status, attempts, last_error IS NOT NULL, count(*) FROM shardq.tasks "
        "GROUP BY 1, 2, 3").fetchall()
    assert beside == [0]  # the suspect ran once, and alone
    assert attempts[True] == {poison.attempts}  # its first expiry gave the attempt back
    # The tasks claimed beside it were given back without an attempt counted.
    assert attempts[False] == {1}


def test_a_suspect_on_its_last_attempt_dies_with_its_history(
        client: shardq.Client) -> None:
    task_id = client.enqueue("iso", {}, max_attempts=1)
    for expiry, report in enumerate([shardq.JanitorReport(rescued=1),
                                     shardq.JanitorReport(dead=1)]):
        if expiry:  # wait out the backoff of the first rescue
            client.statements.db.run(lambda c: c.execute(
                "UPDATE shardq.tasks SET exec_time = now()"))
        claimed = [t for b in range(client.bucket_count)
                   for t in client.claim_bucket("iso", b, lease_s=0.05)]
        assert len(claimed) == 1
        assert claimed[0].attempts == 1  # the first expiry gave the attempt back
        time.sleep(0.2)
        assert client.run_janitor_once() == report
    info = client.get(task_id)
    assert info is not None
    assert info.state == "dead"
    assert info.last_error is not None
    assert "died" in info.last_error


def test_the_gate_never_lets_a_suspect_in_beside_another_handler() -> None:
    # Shared passes take no lock; suspects close the gate under it.  Eight threads
    # pass shared as fast as they can while suspects pass one after another: whenever
    # a suspect is inside, no one else may be, and every pass must get through.
    gate = Gate()
    stop = threading.Event()
    inside_lock = threading.Lock()
    inside = {"shared": 0, "exclusive": 0}
    seen_together: list[dict[str, int]] = []
    passes = {"shared": 0, "exclusive": 0}

    def step(kind: str) -> None:
        gate.enter(kind == "exclusive")
        with inside_lock:
            inside[kind] += 1
            passes[kind] += 1
            if inside["exclusive"] and (inside["shared"] or inside["exclusive"] > 1):
                seen_together.append(dict(inside))
        time.sleep(0)  # let the others run while this one is inside
        with inside_lock:
            inside[kind] -= 1
        gate.leave(kind == "exclusive")

    def shared() -> None:
        while not stop.is_set():
            step("shared")

    def suspects() -> None:
        for _ in range(200):
            gate.expect(1)
            step("exclusive")

    handlers = [threading.Thread(target=shared) for _ in range(8)]
    suspect_threads = [threading.Thread(target=suspects) for _ in range(2)]
    for thread in handlers + suspect_threads:
        thread.start()
    for thread in suspect_threads:
        thread.join(60)
    stop.set()
    for thread in handlers:
        thread.join(60)
    assert not any(t.is_alive() for t in handlers + suspect_threads)
    assert seen_together == []
    assert passes["exclusive"] == 400
    assert passes["shared"] > 0
    assert not gate.isolating
