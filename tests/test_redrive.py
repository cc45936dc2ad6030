"""Redriving dead letters chosen by their error and time of death, bounded, with a dry run."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import shardq
from shardq import Client, ManualClock
from shardq.ops.deadletters import Redriven
from tests.helpers import claim_all, shardq_cli

pytestmark = [pytest.mark.server, pytest.mark.both_clients, pytest.mark.behaviour]


def bury(client: Client, queue: str, n: int, error: str, key: str | None = None) -> None:
    if key is None:
        client.enqueue_many(queue, [{"n": i} for i in range(n)])
    else:
        client.enqueue(queue, {}, key=key)
    tasks = claim_all(client, queue)
    client.nack_many(tasks, [error] * len(tasks), dead=[True] * len(tasks))


def states(conn: psycopg.Connection[Any], queue: str) -> dict[tuple[str, str], int]:
    """(status, last error) -> how many tasks of ``queue``."""
    rows = conn.execute("SELECT status, last_error, count(*) FROM shardq.tasks "
                        "WHERE queue = %s GROUP BY 1, 2", (queue,)).fetchall()
    return {(status, error): n for status, error, n in rows}


def test_redrive_by_error_counts_first(timed: Client, connect: psycopg.Connection[Any]) -> None:
    bury(timed, "q", 3, "SMTP 550: mailbox unavailable")
    bury(timed, "q", 2, "quota 100%_used")
    bury(timed, "other", 4, "smtp 550")
    found = timed.redrive_dead("q", error="smtp 550", dry_run=True)
    assert (found.count, found.more, found.dry_run) == (3, False, True)
    assert states(connect, "q")[("dead", "SMTP 550: mailbox unavailable")] == 3  # unchanged
    # LIKE's wildcards are plain characters: "%_" matches only the error holding them.
    assert timed.redrive_dead("q", error="0%_u", dry_run=True).count == 2
    assert timed.redrive_dead("q", error="_", dry_run=True).count == 2
    done = timed.redrive_dead("q", error="Smtp 550")
    assert (done.count, done.more, done.dry_run) == (3, False, False)
    assert states(connect, "q") == {("available", "SMTP 550: mailbox unavailable"): 3,
                                    ("dead", "quota 100%_used"): 2}
    assert states(connect, "other") == {("dead", "smtp 550"): 4}  # another queue's
    assert timed.redrive_dead("q", error="smtp").count == 0
    [task] = claim_all(timed, "q", most=1)
    assert task.attempts == 1  # fresh attempts, as retry_dead gives


def test_redrive_by_time_of_death(timed: Client, clock: ManualClock) -> None:
    bury(timed, "q", 3, "old")
    clock.advance(100)
    bury(timed, "q", 2, "new")
    clock.advance(10)
    assert timed.redrive_dead("q", older_than_s=50, dry_run=True).count == 3
    assert timed.redrive_dead("q", newer_than_s=50, dry_run=True).count == 2
    assert timed.redrive_dead("q", older_than_s=5, newer_than_s=50, dry_run=True).count == 2
    assert timed.redrive_dead("q", older_than_s=20, newer_than_s=50, dry_run=True).count == 0
    assert timed.redrive_dead("q", newer_than_s=50).count == 2
    assert timed.stats("q")["dead"] == 3
    assert timed.redrive_dead("q", older_than_s=50).count == 3


def test_redrive_is_bounded_and_says_more_remain(timed: Client) -> None:
    bury(timed, "q", 5, "boom")
    assert timed.redrive_dead("q", limit=2) == Redriven(2, more=True)
    assert timed.redrive_dead("q", limit=2) == Redriven(2, more=True)
    assert timed.redrive_dead("q", limit=2) == Redriven(1, more=False)
    assert timed.stats("q")["available"] == 5


def test_redrive_brings_back_one_task_per_key(timed: Client) -> None:
    bury(timed, "q", 1, "boom", key="k")
    bury(timed, "q", 1, "boom", key="k")  # a second dead task of the key
    bury(timed, "q", 1, "boom", key="j")
    assert timed.redrive_dead("q", dry_run=True).count == 3
    assert timed.redrive_dead("q").count == 2  # k's oldest and j: one waiting task a key
    assert timed.stats("q")["dead"] == 1
    assert timed.redrive_dead("q", dry_run=True).count == 0  # its key has a waiting task
    assert timed.redrive_dead("q").count == 0


@pytest.mark.parametrize("arguments", [
    {"limit": 0}, {"limit": 10_001}, {"limit": True}, {"error": ""},
    {"error": "x" * 1001}, {"older_than_s": -1}, {"newer_than_s": float("nan")},
    {"older_than_s": 60, "newer_than_s": 60}, {"older_than_s": 60, "newer_than_s": 30},
])
def test_redrive_refuses_bad_arguments(client: Client, arguments: dict[str, Any]) -> None:
    with pytest.raises(shardq.InvalidTask):
        client.redrive_dead("q", **arguments)
    with pytest.raises(shardq.InvalidTask):
        client.redrive_dead("_bad name")


@pytest.mark.blocking_client
def test_cli_dead_redrive(dsn: str, client: Client) -> None:
    bury(client, "cli", 3, "Traceback...\nConnectionError: refused")
    bury(client, "cli", 1, "ValueError: bad row")

    def cli(*args: str) -> str:
        return shardq_cli("dead", "redrive", "cli", *args, dsn=dsn).stdout.strip()

    assert cli("--error", "connectionerror", "--dry-run") == \
        "would redrive 3 dead task(s) of cli"
    assert cli("--error", "connectionerror", "--limit", "2") == \
        "redrove 2 dead task(s) of cli; more remain: run again"
    assert cli("--error", "connectionerror", "--older-than-s", "0", "--newer-than-s",
               "3600") == "redrove 1 dead task(s) of cli"
    assert cli("--dry-run") == "would redrive 1 dead task(s) of cli"
    assert client.stats("cli")["available"] == 3
    refused = shardq_cli("dead", "redrive", "cli", "--limit", "0", dsn=dsn, check=False)
    assert refused.returncode == 2
    assert refused.stderr.startswith("shardq: limit must be")
