"""Queue control: pause and resume, cancel, purge — through the API, the CLI and a daemon."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import shardq
from tests.apps import recorder
from tests.conftest import Databases
from tests.daemons import Daemon
from tests.helpers import claim_all, query, scalar, shardq_cli, wait_for

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]

ROOT = Path(__file__).resolve().parent.parent
QUIET_S = 1.5  # how long a paused queue is watched for a claim (the daemons poll every 0.2 s)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_a_paused_queue_accepts_tasks_and_hands_out_none(client: shardq.Client) -> None:
    queue, other = fresh("paused"), fresh("running")
    first = client.pause(queue, create=True)  # before its first task
    assert client.pause(queue) == first  # pausing again keeps the first time
    assert client.paused()[queue] == first
    client.enqueue_many(queue, [{"n": n} for n in range(50)])
    client.enqueue_many(other, [{"n": n} for n in range(5)])
    assert claim_all(client, queue) == []
    assert client.claim(queue) == []
    assert len(claim_all(client, other)) == 5  # other queues are not affected
    assert client.resume(queue) is True
    assert client.resume(queue) is False
    assert queue not in client.paused()
    assert len(claim_all(client, queue)) == 50


def test_pause_refuses_bad_names(client: shardq.Client) -> None:
    for call in (client.pause, client.resume, client.purge):
        with pytest.raises(shardq.InvalidTask):
            call("_bad name")
    with pytest.raises(shardq.InvalidTask):
        client.cancel("not-a-uuid")


def test_cancel_a_waiting_task_removes_it(client: shardq.Client) -> None:
    queue = fresh("cancel")
    keep, drop = client.enqueue(queue, {"n": 1}), client.enqueue(queue, {"n": 2}, delay_s=60)
    done = client.cancel(drop)
    assert (done.task_id, done.status, done.was_running) == (drop, "available", False)
    assert client.get(drop) is None
    assert client.cancel(drop).status is None  # nothing left to cancel
    assert [t.id for t in claim_all(client, queue)] == [keep]


def test_cancel_leaves_dead_tasks_to_the_dead_letters(client: shardq.Client) -> None:
    queue = fresh("cancel-dead")
    task_id = client.enqueue(queue, {}, max_attempts=1)
    (task,) = claim_all(client, queue)
    client.nack(task, "boom")
    assert client.cancel(task_id).status is None
    info = client.get(task_id)
    assert info is not None
    assert info.status == "dead"


def test_cancel_a_claimed_task_loses_its_lease(client: shardq.Client) -> None:
    queue = fresh("cancel-running")
    task_id = client.enqueue(queue, {})
    (task,) = claim_all(client, queue)
    assert client.cancel(task_id).was_running
    with pytest.raises(shardq.LeaseLost):
        client.extend(task, 30)  # what the worker's heartbeat does: the handler is told


def test_purge_removes_waiting_tasks_only(databases: Databases) -> None:
    # One bucket, so that the purge needs several bounded batches.
    url = databases.create(bucket_count=1)
    with shardq.Client(url) as client:
        dying = client.enqueue("purged", {}, max_attempts=1)  # alone: the first claimed
        (dead,) = claim_all(client, "purged", most=1)
        assert dead.id == dying
        client.nack(dead, "boom")
        client.enqueue_many("purged", [{"n": n} for n in range(2400)])
        client.enqueue_many("purged", [{"n": n} for n in range(100)], delay_s=3600)
        client.enqueue_many("other", [{"n": n} for n in range(7)])
        running = claim_all(client, "purged", most=3)
        assert client.purge("purged") == 2497  # 2400 due and 100 scheduled, less 3 running
        assert client.purge("purged") == 0
        assert dict(query(url, "SELECT queue || ':' || status, count(*) FROM shardq.tasks "
                               "GROUP BY 1")) == {"purged:locked": 3, "purged:dead": 1,
                                                   "other:available": 7}
        client.ack_many(running)  # their leases are untouched


@pytest.fixture
def daemon(app_env: dict[str, str]) -> Iterator[Daemon]:
    started = Daemon(app_env, "tests.apps.recorder:app", "--queue", "work", "--queue", "patient",
                     "--poll-max-ms", "200")
    yield started
    started.signal()
    code, out = started.wait()
    assert code == 0, out


def runs(db: str) -> int:
    count: int = scalar(db, "SELECT count(*) FROM runs")
    return count


def test_pause_and_resume_a_running_daemon(db: str, daemon: Daemon) -> None:
    recorder.record.enqueue_many([(n,) for n in range(20)])
    wait_for(lambda: runs(db) == 20, what="the first tasks to run")
    out = shardq_cli("queue", "pause", "work", dsn=db).stdout
    assert out.startswith("queue work paused since ")
    recorder.record.enqueue_many([(n,) for n in range(20, 40)])
    time.sleep(QUIET_S)  # several polls of every bucket: none may take a task
    assert runs(db) == 20
    assert scalar(db, "SELECT count(*) FROM shardq.tasks WHERE status = 'available'") == 20
    assert shardq_cli("queue", "resume", "work", dsn=db).stdout.strip() == "queue work resumed"
    wait_for(lambda: runs(db) == 40, what="the tasks enqueued while paused to run")
    assert shardq_cli("queue", "resume", "work", dsn=db).stdout.strip() == \
        "queue work was not paused"


def test_api_pause_stops_a_running_daemon(db: str, daemon: Daemon) -> None:
    with shardq.Client(db) as client:
        client.pause("work", create=True)
        recorder.record.enqueue_many([(n,) for n in range(10)])
        time.sleep(QUIET_S)
        assert runs(db) == 0
        client.resume("work")
    wait_for(lambda: runs(db) == 10, what="the tasks to run after resume")


def test_cancel_a_running_task(db: str, daemon: Daemon) -> None:
    task_id = recorder.patient.enqueue(1, 60)  # checks shardq.current().cancelled as it runs
    wait_for(lambda: scalar(db, "SELECT count(*) FROM shardq.tasks WHERE status = 'locked'")
             == 1, what="the task to start")
    out = shardq_cli("task", "cancel", str(task_id), dsn=db).stdout
    assert "running" in out
    # The handler sees it at the next heartbeat (every lease_s / 3 = 2 s) and stops.
    wait_for(lambda: query(db, "SELECT outcome FROM runs") == [("cancelled",)], timeout=20,
             what="the handler to see the cancellation")
    assert scalar(db, "SELECT count(*) FROM shardq.tasks") == 0  # nothing written back
    missing = shardq_cli("task", "cancel", str(task_id), dsn=db, check=False)
    assert missing.returncode == 1
    assert "no waiting or running task" in missing.stderr


def test_cli_purge_needs_yes(db: str) -> None:
    with shardq.Client(db) as client:
        client.enqueue_many("doomed", [{"n": n} for n in range(30)])
    refused = shardq_cli("queue", "purge", "doomed", dsn=db, check=False)
    assert refused.returncode == 2
    assert "--yes" in refused.stderr
    assert scalar(db, "SELECT count(*) FROM shardq.tasks") == 30
    out = shardq_cli("queue", "purge", "doomed", "--yes", dsn=db).stdout
    assert out.strip() == "purged 30 waiting task(s) of doomed"
    assert scalar(db, "SELECT count(*) FROM shardq.tasks") == 0


def test_cli_refuses_a_bad_queue_name(db: str) -> None:
    result: Any = shardq_cli("queue", "pause", "_nope", dsn=db, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("shardq: invalid queue name")
