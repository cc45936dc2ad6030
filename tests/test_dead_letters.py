"""Dead letters: listing, retrying, purging, retention; and per-item history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, ManualClock
from tests.helpers import claim_all

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]


def bury(client: Client, queue: str, n: int, error: str = "boom",
         key: str | None = None) -> list[shardq.Task]:
    if key is None:
        client.enqueue_many(queue, [{"n": i} for i in range(n)])
    else:
        client.enqueue(queue, {"n": 0}, key=key)
    tasks = claim_all(client, queue)
    client.nack_many(tasks, [error] * len(tasks), dead=[True] * len(tasks))
    return tasks


def test_dead_lists_newest_first_with_history(timed: Client, clock: ManualClock) -> None:
    first = bury(timed, "q", 3, "old failure")
    clock.advance(10)
    second = bury(timed, "q", 2, "new failure")
    bury(timed, "other", 4)
    listed = timed.dead("q", limit=10)
    assert len(listed) == 5  # both burials of "q", nothing of "other"
    # Newest first; the tasks of one burial died at the same time, in no set order.
    assert {i.id for i in listed[:2]} == {t.id for t in second}
    assert {i.id for i in listed[2:]} == {t.id for t in first}
    assert all(i.state == "dead" and i.times_claimed == 1 and i.attempts == 1 for i in listed)
    assert listed[0].last_error == "new failure"
    assert listed[-1].last_error == "old failure"
    assert [i.exec_time for i in listed] == sorted((i.exec_time for i in listed), reverse=True)
    assert {i.id for i in timed.dead("q", limit=2)} == {t.id for t in second}


def test_retry_dead_by_id_and_by_queue(timed: Client, connect: psycopg.Connection[Any]) -> None:
    tasks = bury(timed, "q", 5)
    assert set(timed.retry_dead([tasks[0].id, str(tasks[1].id)])) == {tasks[0].id, tasks[1].id}
    assert timed.stats("q")["available"] == 2
    assert timed.stats("q")["dead"] == 3
    assert len(timed.retry_dead(queue="q")) == 3
    rows = connect.execute("SELECT DISTINCT status, attempts, last_error FROM shardq.tasks"
                           ).fetchall()
    assert rows == [("available", 0, "boom")]  # fresh attempts, last error kept
    assert timed.retry_dead(queue="q") == []
    with pytest.raises(shardq.InvalidTask):
        timed.retry_dead()


def test_keyed_dead_task_stays_dead_beside_a_waiting_one(timed: Client) -> None:
    [dead] = bury(timed, "q", 1, key="k")
    waiting = timed.enqueue("q", {"new": True}, key="k")
    assert timed.retry_dead([dead.id]) == []
    assert timed.stats("q")["dead"] == 1
    assert not waiting.coalesced


def test_purge_dead(timed: Client, clock: ManualClock) -> None:
    bury(timed, "q", 3)
    clock.advance(100)
    bury(timed, "q", 2)
    assert timed.purge_dead("q", older_than_s=50) == 3
    assert timed.stats("q")["dead"] == 2
    assert timed.purge_dead("q") == 2
    assert timed.stats("q")["dead"] == 0


def test_retention_in_the_janitor(dsn: str, client: Client, clock: ManualClock) -> None:
    with shardq.Client(dsn, clock=clock, dead_retention_s=3600, janitor_batch=2) as c:
        bury(c, "a", 3)
        bury(c, "b", 2)
        clock.advance(1800)
        bury(c, "a", 1)
        assert c.run_janitor_once().purged == 0
        clock.advance(1801)
        assert c.run_janitor_once().purged == 5
        assert c.stats("a")["dead"] == 1
        assert c.stats("b")["dead"] == 0


def test_cli_dead_commands(dsn: str, client: Client) -> None:
    tasks = bury(client, "cli", 2, "Traceback...\nValueError: bad row")
    env = {**os.environ, "SHARDQ_DSN": dsn}

    def cli(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "shardq", "dead", *args], env=env,
                              capture_output=True, text=True, check=True).stdout

    lines = [json.loads(line) for line in cli("list", "cli").splitlines()]
    assert {line["id"] for line in lines} == {str(t.id) for t in tasks}
    assert lines[0]["last_error"] == "ValueError: bad row"
    assert cli("retry", str(tasks[0].id)).strip() == "retried 1 task(s)"
    assert cli("purge", "cli", "--yes").strip() == "purged 1 task(s)"
    assert client.stats("cli")["available"] == 1


def test_task_show_tells_a_bad_apple(dsn: str, client: Client) -> None:
    task_id = client.enqueue("q", {"apple": "bad"}, max_attempts=5)
    for _ in range(3):
        [task] = claim_all(client, "q")
        client.nack(task, "still bad", retry_in_s=0)
    shown = subprocess.run([sys.executable, "-m", "shardq", "task", "show", str(task_id),
                            "--dsn", dsn], capture_output=True, text=True, check=True).stdout
    # The fields, up to the attempts table that follows them.
    fields = dict(line.split(": ", 1)
                  for line in shown.partition("\nattempts:")[0].splitlines())
    assert fields["times_claimed".rjust(22)] == "3"
    assert fields["times_requeued".rjust(22)] == "3"
    assert fields["last_error".rjust(22)] == "still bad"
    assert fields["state".rjust(22)] == "available"
