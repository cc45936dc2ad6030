"""Durable tasks under fire: each journey ends right, every step's function ran, and one
ran twice only where its worker was killed while running it.

300 journeys (a step, a sleep, an event, three children awaited, a step) run in three
``shardq consume`` processes reaching the database through the fault proxy.  While they
run:

- the replies of four checkpoints' writes are lost after the server committed them (the
  write is run again, finds the checkpoint and returns it: the function is not run again);
- the replies of two parks are lost after the server committed them (the task is parked
  all the same, and wakes when due);
- the COMMIT reply of an emit of many events is lost (run again, it emits nothing more and
  wakes the same tasks);
- one process is killed (``kill -9``) while it runs journeys: they run again elsewhere
  once their lease ran out, replayed from their checkpoints.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import psycopg
import pytest

import shardq
from tests.chaos import durable_app
from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy
from tests.daemons import Daemon
from tests.helpers import scalar, wait_for

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
JOURNEYS = 300
WORKERS = 3
WORK_S = 0.05
SAVE = rb"INSERT INTO shardq\.steps AS s"  # step_save: a checkpoint's write
PARK = rb"'parked'::text AS outcome"  # park_many
EMIT = rb"INSERT INTO shardq\.events AS e \(name, payload"  # event_emit


def daemons(proxied: str, direct: str) -> list[Daemon]:
    env = {**os.environ, "SHARDQ_DSN": proxied, "DURABLE_LOG_DSN": direct,
           "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}
    return [Daemon(env, "tests.chaos.durable_app:app", "--concurrency", "16", "--batch", "16",
                   "--lease-s", "3", "--janitor-interval-s", "0.5", "--backoff-base-s", "0.05",
                   "--no-sample-stats")
            for _ in range(WORKERS)]


def test_journeys_whose_worker_is_killed_and_whose_replies_are_lost_end_right(
        chaos_pg: ThrowawayPostgres, proxy: Proxy) -> None:
    name = chaos_pg.create_database()
    url = chaos_pg.url(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(durable_app.SETUP)
    fleet = daemons(proxy.url(name), url)
    try:
        wait_for(lambda: all(d.saw("consuming ") or d.proc.poll() is not None for d in fleet),
                 timeout=120, what="the workers to start")
        assert all(d.proc.poll() is None for d in fleet), [d.output for d in fleet]
        proxy.withhold_reply(SAVE, times=4)
        with shardq.Client(url) as client, shardq.Client(proxy.url(name)) as proxied:
            durable_app.app.use_client(client)
            ids = [durable_app.journey.enqueue(i, WORK_S) for i in range(JOURNEYS)]
            charged = "SELECT count(DISTINCT task_id) FROM durable_runs WHERE what LIKE 'charge %'"
            wait_for(lambda: scalar(url, charged) >= JOURNEYS // 3, timeout=120,
                     what="a third of the journeys to charge")
            proxy.withhold_reply(PARK, times=2)
            victim = fleet[0]
            victim.signal(signal.SIGKILL)
            victim.proc.wait(timeout=10)
            # Every journey waits for its approval: emitted in one call whose COMMIT's
            # reply is lost (the client runs it again).
            wait_for(lambda: scalar(url, "SELECT count(*) FROM shardq.tasks WHERE parked "
                                         "= 'event'") >= JOURNEYS // 2,
                     timeout=120, what="journeys to wait for their approval")
            proxy.withhold_commit(EMIT, times=1)
            proxied.emit_events({f"approve-{i}": {"by": "chaos"} for i in range(JOURNEYS)})
            results = [client.result(i, wait_s=150) for i in ids]
    finally:
        for d in fleet:
            d.kill()
    assert [r.value for r in results] == [
        [i, {"by": "chaos"}, list(range(durable_app.KIDS)), i * 10] for i in range(JOURNEYS)]
    with psycopg.connect(url) as conn:
        runs = Counter(w for (w,) in conn.execute("SELECT what FROM durable_runs"))
        rescued = conn.execute("SELECT count(*) FROM shardq.attempts "
                               "WHERE outcome = 'lease_expired'").fetchone()
        left = conn.execute("SELECT count(*) FROM shardq.steps").fetchone()
    expected = {f"{w} {i}" for w in ("charge", "ship") for i in range(JOURNEYS)}
    expected |= {f"kid {i}.{j}" for i in range(JOURNEYS) for j in range(durable_app.KIDS)}
    assert set(runs) == expected  # every step and child ran
    twice = sum(n - 1 for n in runs.values())
    assert rescued is not None
    assert twice <= rescued[0]  # only what the killed worker was running ran again
    assert left == (0,)  # each journey's checkpoints went with its success
    assert (proxy.pending_withholds, proxy.pending_commits) == (0, 0)
