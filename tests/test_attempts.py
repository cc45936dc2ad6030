"""Per-attempt history and the workers: every way an attempt ends is recorded by the
statement that ends it, with the worker that ran it; a first success records nothing;
the history is bounded; workers register, are listed with what they hold, and are
forgotten when stale; two real ``shardq consume`` processes share a task's attempts."""

from __future__ import annotations

import json
import os
import socket
import uuid
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Attempt, Client, ManualClock
from shardq.ops import workers
from tests.daemons import ROOT, Daemon
from tests.helpers import claim_all, scalar, shardq_cli, wait_for
from tests.plans import explain
from tests.web import TOKEN, call, serving

pytestmark = [pytest.mark.server, pytest.mark.behaviour,
              pytest.mark.client_settings(backoff_base_s=1, backoff_cap_s=10, backoff_jitter=0)]

LEASE_ERROR = ("lease expired: the worker holding it died, stalled or overran its lease; "
               "it runs alone next time")


def register(client: Client, name: str, pid: int = 4321) -> uuid.UUID:
    """A worker row, as ``shardq consume`` writes at start; returns its id."""
    worker_id = uuid.uuid4()
    client.perform(workers.register(client.statements, worker_id, name, "host-1", pid, ["q"]))
    return worker_id


def take(client: Client, worker_id: uuid.UUID | None, queue: str = "q") -> shardq.Task:
    [task] = claim_all(client, queue, worker_id=worker_id)
    return task


def summary(history: list[Attempt] | tuple[Attempt, ...]) -> list[tuple[Any, ...]]:
    return [(a.attempt, a.outcome, a.error, a.worker_name, a.worker_pid, a.duration_s)
            for a in history]


def test_a_task_that_succeeds_at_once_records_no_attempt(
        timed: Client, connect: psycopg.Connection[Any]) -> None:
    worker = register(timed, "w1")
    ids = timed.enqueue_many("q", [{"n": n} for n in range(20)])
    timed.ack_many(claim_all(timed, "q", worker_id=worker))
    assert scalar(connect, "SELECT count(*) FROM shardq.attempts") == 0
    assert timed.attempts(ids[0]) == []


def test_every_way_an_attempt_ends_is_recorded_with_its_worker(
        timed: Client, clock: ManualClock) -> None:
    worker = register(timed, "w1")
    task_id = timed.enqueue("q", {})
    task = take(timed, worker)
    # While it runs, get() shows the attempt under way and who holds the task.
    running = timed.get(task_id)
    assert running is not None
    assert running.worker_id == worker
    assert summary(running.history) == [(1, "running", None, "w1", 4321, None)]
    clock.advance(2)
    timed.nack(task, "boom")
    clock.advance(2)  # past the backoff of 1 s x 2^1
    task = take(timed, worker)
    clock.advance(1)
    timed.release(task)
    task = take(timed, worker)
    clock.advance(3)
    timed.defer(task, delay_s=5)
    clock.advance(5)
    task = take(timed, worker)
    clock.advance(0.5)
    timed.ack(task)
    assert timed.get(task_id) is None
    history = timed.attempts(task_id)
    assert summary(history) == [(1, "failed", "boom", "w1", 4321, 2.0),
                                (2, "released", None, "w1", 4321, 1.0),
                                (3, "deferred", None, "w1", 4321, 3.0),
                                (4, "acked", None, "w1", 4321, 0.5)]
    assert {a.worker_id for a in history} == {worker}
    assert history[0].worker == "w1 (host-1, pid 4321)"


def test_a_claim_outside_a_worker_records_no_worker(timed: Client, clock: ManualClock) -> None:
    task_id = timed.enqueue("q", {}, max_attempts=1)
    timed.nack(take(timed, None), "no more")
    [attempt] = timed.attempts(task_id)
    assert (attempt.outcome, attempt.error, attempt.worker_id, attempt.worker) == (
        "dead", "no more", None, None)
    info = timed.get(task_id)
    assert info is not None
    assert info.state == "dead"
    assert summary(info.history) == summary([attempt])


def test_a_cancelled_running_task_records_its_attempt(timed: Client) -> None:
    worker = register(timed, "w1")
    waiting, running = timed.enqueue("q", {"n": 1}), timed.enqueue("other", {"n": 2})
    take(timed, worker, "other")
    assert timed.cancel(waiting).status == "available"
    assert timed.cancel(running).status == "locked"
    assert timed.attempts(waiting) == []  # never claimed: no attempt
    assert summary(timed.attempts(running)) == [(1, "cancelled", None, "w1", 4321, 0.0)]


def test_the_worker_is_copied_so_the_history_outlives_its_row(timed: Client,
                                                               clock: ManualClock) -> None:
    worker = register(timed, "gone-soon")
    task_id = timed.enqueue("q", {})
    task = take(timed, worker)
    timed.perform(workers.remove(timed.statements, worker))
    timed.nack(task, "boom")  # the row is gone: only the id is known
    clock.advance(2)
    task = take(timed, register(timed, "w2"))
    timed.nack(task, "again")
    first, second = timed.attempts(task_id)
    assert (first.worker_id, first.worker_name, first.worker) == (worker, None, str(worker))
    assert second.worker_name == "w2"


def test_the_janitor_records_expired_leases(timed: Client, clock: ManualClock) -> None:
    worker = register(timed, "w1")
    task_id = timed.enqueue("q", {}, max_attempts=1)
    take(timed, worker)
    clock.advance(31)  # past the 30 s lease
    assert timed.run_janitor_once().rescued == 1
    clock.advance(2)
    take(timed, worker)  # a suspect now, on its last attempt
    clock.advance(31)
    assert timed.run_janitor_once().dead == 1
    assert summary(timed.attempts(task_id)) == [(1, "lease_expired", LEASE_ERROR, "w1", 4321, 31.0),
                                                (2, "dead", LEASE_ERROR, "w1", 4321, 31.0)]


def test_keyed_tasks_record_their_attempts(timed: Client, clock: ManualClock) -> None:
    worker = register(timed, "w1")
    task_id = timed.enqueue("q", {}, key="k")
    timed.nack(take(timed, worker), "keyed boom")
    clock.advance(2)
    timed.release(take(timed, worker))
    take(timed, worker)
    clock.advance(31)
    timed.run_janitor_once()
    assert [(a.attempt, a.outcome, a.error) for a in timed.attempts(task_id)] == [
        (1, "failed", "keyed boom"), (2, "released", None), (3, "lease_expired", LEASE_ERROR)]


@pytest.mark.client_settings(attempts_kept_per_task=3, attempts_retention_s=3600)
def test_each_task_keeps_its_latest_attempts_and_the_janitor_drops_old_ones(
        timed: Client, clock: ManualClock, connect: psycopg.Connection[Any]) -> None:
    task_id = timed.enqueue("q", {}, max_attempts=20)
    other = timed.enqueue("q2", {})
    for n in range(1, 8):
        timed.nack(take(timed, None), f"failure {n}", retry_in_s=0)
    assert [(a.attempt, a.error) for a in timed.attempts(task_id)] == [
        (5, "failure 5"), (6, "failure 6"), (7, "failure 7")]
    assert scalar(connect, "SELECT count(*) FROM shardq.attempts") == 3
    clock.advance(1800)
    timed.nack(take(timed, None, "q2"), "later")
    clock.advance(1800)  # the first task's attempts are an hour old, the other's half that
    report = timed.run_janitor_once()
    assert report.expired_attempts == 3
    assert timed.attempts(task_id) == []
    assert [a.error for a in timed.attempts(other)] == ["later"]


def test_workers_are_listed_with_what_they_hold_and_forgotten_when_stale(
        timed: Client, clock: ManualClock) -> None:
    busy, idle = register(timed, "busy"), register(timed, "idle")
    timed.enqueue_many("q", [{}] * 5)
    claim_all(timed, "q", worker_id=busy)
    listed = {w.name: w for w in timed.workers()}
    assert {n: (w.alive, w.holding, w.queues) for n, w in listed.items()} == {
        "busy": (True, 5, ["q"]), "idle": (True, 0, ["q"])}
    clock.advance(45)
    timed.perform(workers.register(timed.statements, idle, "idle", "host-1", 4321, ["q"]))
    clock.advance(30)  # busy last seen 75 s ago, idle 30 s ago (stale after 60 s)
    assert {w.name: w.alive for w in timed.workers()} == {"busy": False, "idle": True}
    assert timed.run_janitor_once().stale_workers == 1
    assert [w.name for w in timed.workers()] == ["idle"]


def test_a_worker_registers_refreshes_and_leaves(dsn: str, client: Client) -> None:
    """An in-process worker: its row is there while it runs, moved by its heartbeat, and
    gone once it stopped; the tasks it claimed carry its id."""
    from shardq.core.config import load
    from shardq.worker.config import WorkerConfig
    from shardq.worker.daemon import Worker

    app = shardq.App()
    seen: list[uuid.UUID] = []

    @app.task(queue="reg")
    def job() -> None:
        info = client.get(shardq.current().task.id)
        assert info is not None
        assert info.worker_id is not None
        seen.append(info.worker_id)

    # Its settings as a daemon's, SHARDQ_* variables included (--no-listen behind PgBouncer).
    worker = Worker(app, shardq.ClientConfig(dsn=dsn, worker_stale_s=1),
                    load(WorkerConfig, {"worker_name": "in-process", "janitors": 0}))
    worker.presence.every_s = 0.05
    worker.start()
    try:
        [row] = client.workers()
        assert (row.id, row.name, row.pid, row.host, row.queues) == (
            worker.presence.id, "in-process", os.getpid(), socket.gethostname(), ["reg"])
        first_seen = row.last_seen_at
        wait_for(lambda: client.workers()[0].last_seen_at > first_seen, timeout=20)
        app.use_client(client)
        job.enqueue()
        wait_for(lambda: bool(seen), timeout=20)
    finally:
        worker.stop(5)
    assert seen == [worker.presence.id]
    assert client.workers() == []


def test_two_workers_fail_twice_then_succeed_and_the_history_says_who_ran_each(
        db: str) -> None:
    """Worker A runs the first attempt and stops; worker B runs the second and third."""
    from tests.apps import thrice

    env = {**os.environ, "SHARDQ_DSN": db, "PYTHONPATH": str(ROOT)}
    with Client(db) as client:
        thrice.app.use_client(client)
        task_id = thrice.thrice.enqueue(7)
        # A's backoff keeps the task from A for 5 s or more after its failure; B's is short.
        a = Daemon({**env, "SHARDQ_BACKOFF_BASE_S": "3"}, "tests.apps.thrice:app",
                   "--worker-name", "worker-a")
        try:
            # The attempt's row is written "running" at claim and settled by the nack after.
            wait_for(lambda: [h.outcome for h in client.attempts(task_id)] == ["failed"],
                     timeout=60)
            assert [w.name for w in client.workers()] == ["worker-a"]
        finally:
            assert a.stop() == 0
        assert client.workers() == []  # a clean stop deletes the worker's row
        b = Daemon({**env, "SHARDQ_BACKOFF_BASE_S": "0.05"}, "tests.apps.thrice:app",
                   "--worker-name", "worker-b")
        try:
            wait_for(lambda: client.get(task_id) is None, timeout=60)
        finally:
            assert b.stop() == 0, b.output
        history = client.attempts(task_id)
    pid_a, pid_b = a.proc.pid, b.proc.pid
    # A handler's error is its traceback, whose last line is the exception.
    assert [(h.attempt, h.outcome, h.error and h.error.strip().splitlines()[-1], h.worker_name,
             h.worker_pid) for h in history] == [
        (1, "failed", f"RuntimeError: attempt 1 of task 7 failed in pid {pid_a}", "worker-a",
         pid_a),
        (2, "failed", f"RuntimeError: attempt 2 of task 7 failed in pid {pid_b}", "worker-b",
         pid_b),
        (3, "acked", None, "worker-b", pid_b)]
    assert {h.worker_host for h in history} == {socket.gethostname()}
    assert len({h.worker_id for h in history}) == 2
    assert all(h.duration_s is not None and h.duration_s >= 0 for h in history)
    assert history[0].ended_at <= history[1].claimed_at  # type: ignore[operator]


def test_task_show_and_workers_commands(dsn: str, timed: Client, clock: ManualClock) -> None:
    worker = register(timed, "cli-worker")
    task_id = timed.enqueue("q", {})
    timed.nack(take(timed, worker), "first failure")
    clock.advance(2)
    held = take(timed, worker)
    env = {"SHARDQ_DSN": dsn}
    shown = shardq_cli("task", "show", str(task_id), env=env).stdout
    assert "attempts:" in shown
    assert "failed" in shown
    assert "first failure" in shown
    assert "running" in shown
    assert "cli-worker (host-1, pid 4321)" in shown
    listed = shardq_cli("workers", "--json", env=env).stdout.splitlines()
    assert [json.loads(line)["name"] for line in listed] == ["cli-worker"]
    assert json.loads(listed[0])["holding"] == 1
    # A finished task's attempts are still shown, after the line that says it is gone.
    timed.ack(held)
    finished = shardq_cli("task", "show", str(task_id), env=env)
    assert "no task" in finished.stderr
    assert "acked" in finished.stdout
    assert shardq_cli("task", "show", str(uuid.uuid4()), env=env, check=False).returncode == 1


def test_the_dashboard_shows_attempts_and_workers(timed: Client, clock: ManualClock) -> None:
    from shardq.web import create_app

    worker = register(timed, "web-worker")
    task_id = timed.enqueue("q", {})
    timed.nack(take(timed, worker), "<b>boom</b>")
    clock.advance(2)
    timed.ack(take(timed, worker))
    with serving(create_app(timed, token=TOKEN)) as site:
        page = call(f"{site}/tasks/{task_id}")  # finished: its attempts are still shown
        assert page.status == 200
        assert 'id="attempts"' in page.text
        assert "web-worker" in page.text
        assert "&lt;b&gt;boom&lt;/b&gt;" in page.text
        assert "acked" in page.text
        api = call(f"{site}/api/tasks/{task_id}/attempts").json()["attempts"]
        assert [(a["outcome"], a["worker_name"]) for a in api] == [
            ("failed", "web-worker"), ("acked", "web-worker")]
        assert call(f"{site}/tasks/{uuid.uuid4()}").status == 404
        timed.enqueue("q", {})
        take(timed, worker)
        workers_page = call(f"{site}/workers")
        assert workers_page.status == 200
        assert "web-worker" in workers_page.text
        [listed] = call(f"{site}/api/workers").json()["workers"]
        assert (listed["name"], listed["alive"], listed["holding"]) == ("web-worker", True, 1)


def test_the_history_reads_are_index_probes(connect: psycopg.Connection[Any],
                                            client: Client) -> None:
    """A task's attempts are one range of attempts_pkey and one probe of tasks_ids; the
    janitor's retention reads the old end of attempts_ended."""
    connect.execute("""
        INSERT INTO shardq.attempts (task_id, slot, attempt, queue, ended_at, outcome)
        SELECT gen_random_uuid(), 0, 1, 'q', now() - g * interval '1 s', 'failed'
        FROM generate_series(1, 20000) AS g""")
    # Many tasks locked: a read of the partial index of locked tasks would cost them all.
    connect.execute("""
        INSERT INTO shardq.tasks (queue, payload, exec_time, status, lease_token, attempts)
        SELECT 'q', '{}', now() + interval '10 min', 'locked', gen_random_uuid(), 1
        FROM generate_series(1, 20000)""")
    connect.execute("ANALYZE shardq.attempts")
    connect.execute("ANALYZE shardq.tasks")
    st = client.statements
    listed = explain(connect, st.query("attempts_list").decode(),
                     {"id": uuid.uuid4(), "now": None})
    assert {n.get("Index Name") for n in listed if n.get("Relation Name") in (
        "attempts", "tasks")} == {"attempts_pkey", "tasks_ids"}
    assert not [n for n in listed if n["Node Type"] == "Seq Scan"]
    purge = explain(connect, st.query("janitor_attempts", 100).decode(),
                    {"attempts_retention_s": 19_900.0, "now": None})
    scans = [n for n in purge if n.get("Relation Name") == "attempts" and "Scan" in n["Node Type"]
             and n["Node Type"] != "Tid Scan"]
    assert [n["Index Name"] for n in scans] == ["attempts_ended"]
    assert scans[0]["Actual Rows"] == 100


def test_a_worker_id_must_be_a_uuid(timed: Client) -> None:
    timed.enqueue("q", {})
    with pytest.raises(shardq.InvalidTask, match="not a worker id"):
        timed.claim("q", worker_id="worker-7")
    [task] = timed.claim("q", worker_id=str(uuid.UUID(int=7)))
    info = timed.get(task.id)
    assert info is not None
    assert info.worker_id == uuid.UUID(int=7)


def test_each_process_of_a_named_worker_gets_a_name_of_its_own() -> None:
    from shardq.worker.config import WorkerConfig
    from shardq.worker.processes import child_config

    named = WorkerConfig(processes=3, worker_name="emails")
    assert [child_config(named, i).worker_name for i in range(3)] == [
        "emails-0", "emails-1", "emails-2"]
    assert child_config(WorkerConfig(processes=2), 1).worker_name is None  # host:pid
