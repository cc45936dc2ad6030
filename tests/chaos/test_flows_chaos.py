"""A chord under fire: its callback runs once, with every member's result, in order.

2,000 members run in three ``shardq consume`` processes of 16 handler slots each, all
reaching the database through the fault proxy.  While they run:

- the replies of four acks are lost after the server committed them (``ack_results``:
  the members' results are kept for the callback);
- the replies of two resolver folds' COMMITs are lost (folds that took events), and
  later the reply of the COMMIT of the fold that released the callback;
- one process is killed (``kill -9``) while it holds members: they run again elsewhere
  once their lease ran out.

The callback records each of its runs as a row of its own (tests.chaos.flow_app),
which no deduplication of shardq's can merge: there is exactly one, with
``list(range(2000))``, and the flow has succeeded, each of its tasks counted once.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import psutil
import psycopg
import pytest

import shardq
from tests.chaos import flow_app
from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy
from tests.daemons import Daemon
from tests.helpers import query, scalar, wait_for

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = 2000
WORKERS = 3
SLOTS = "16"
MEMBER_S = 0.05  # each member's work: the run lasts seconds, so the kill lands mid-run
ACK = rb"'succeeded'::text AS outcome"  # acked.sql: ack_many's and ack_results' event
FOLD = rb"RETURNING e\.flow_id, e\.at, e\.task_id"  # flow_take: a fold that took events
RELEASE = rb"released AS \("  # flow_release: it returns a row only for a released task


def daemons(proxied: str, direct: str) -> list[Daemon]:
    """``WORKERS`` processes of flow_app through the proxy: short leases, quick janitors."""
    env = {**os.environ, "SHARDQ_DSN": proxied, "CHORD_LOG_DSN": direct,
           "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}
    return [Daemon(env, "tests.chaos.flow_app:app", "--concurrency", SLOTS, "--batch", "16",
                   "--lease-s", "3", "--janitor-interval-s", "0.5", "--backoff-base-s", "0.05",
                   "--no-sample-stats")
            for _ in range(WORKERS)]


def test_a_chord_whose_worker_is_killed_and_whose_replies_are_lost_calls_back_once(
        chaos_pg: ThrowawayPostgres, proxy: Proxy) -> None:
    name = chaos_pg.create_database()
    url = chaos_pg.url(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(flow_app.SETUP)
    fleet = daemons(proxy.url(name), url)
    try:
        wait_for(lambda: all(d.saw("consuming ") or d.proc.poll() is not None for d in fleet),
                 timeout=120, what="the workers to start")
        assert all(d.proc.poll() is None for d in fleet), [d.output for d in fleet]
        proxy.withhold_reply(ACK, times=4)
        proxy.withhold_commit(FOLD, times=2)
        canvas = shardq.chord([flow_app.member.s(i, MEMBER_S) for i in range(MEMBERS)],
                              flow_app.gather.s())
        with shardq.Client(url) as client:
            handle = client.enqueue_flow(canvas)
            victim = fleet[0]
            held = ("SELECT t.id FROM shardq.tasks AS t JOIN shardq.workers AS w "
                    "ON w.id = t.worker_id WHERE t.status = 'locked' AND w.pid = %s")

            def mid_run() -> bool:
                done = scalar(url, "SELECT count(*) FROM shardq.results WHERE flow_id = %s",
                              [handle.id])
                return bool(done >= 300 and query(url, held, [victim.proc.pid]))

            wait_for(mid_run, timeout=120, interval=0.02, what="the victim to hold members")
            # Its backends: a statement it sent just before dying (an ack, a claim) still
            # runs to its commit, so what it holds is counted once they are gone.
            ports = list(proxy.server_ports(
                {c.laddr.port for c in psutil.Process(victim.proc.pid).net_connections("tcp")
                 if c.raddr and c.raddr.port == proxy.port}))
            backends = "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(%s)"
            assert scalar(url, backends, [ports]) > 0  # the ports name its backends
            victim.signal(signal.SIGKILL)
            victim.proc.wait(timeout=10)
            wait_for(lambda: scalar(url, backends, [ports]) == 0, timeout=60,
                     what="the victim's backends to end")
            callback = "SELECT status FROM shardq.tasks WHERE id = %s"
            assert scalar(url, callback, [handle.result_id]) == "waiting"  # members left
            cut = {row[0] for row in query(url, held, [victim.proc.pid])}
            assert cut  # members the dead process held, rescued once their lease ends
            wait_for(lambda: proxy.pending_commits == 0, timeout=60,
                     what="the folds' lost commits")
            proxy.withhold_commit(RELEASE, times=1)

            def ended() -> bool:
                flow = client.flow(handle.id, limit=0)
                return flow is not None and flow.state != "running"

            wait_for(ended, timeout=150, interval=0.2, what="the flow to end")
            flow = client.flow(handle.id, limit=0)
            result = client.result(handle.result_id) if handle.result_id else None
    finally:
        for d in fleet:
            d.kill()
    assert flow is not None
    assert (flow.state, flow.tasks) == ("succeeded", MEMBERS + 1)
    assert flow.counts == {"waiting": 0, "pending": 0, "running": 0,
                           "succeeded": MEMBERS + 1, "dead": 0, "cancelled": 0}
    with psycopg.connect(url) as conn:
        runs = conn.execute("SELECT task_id, results FROM chord_runs").fetchall()
        rerun = {row[0] for row in conn.execute(
            "SELECT task_id FROM shardq.attempts WHERE outcome = 'lease_expired'")}
        missed = conn.execute("SELECT task_id, attempt, outcome, worker_pid FROM shardq.attempts "
                              "WHERE task_id = ANY(%s)", [sorted(cut - rerun)]).fetchall()
    assert [task for task, _ in runs] == [handle.result_id]  # the callback ran once
    assert runs[0][1] == list(range(MEMBERS))  # with every member's result, in order
    assert result is not None
    assert result.value == MEMBERS
    # Each member the victim held when it died, and its statements with it, ran again.
    assert cut <= rerun, (len(cut - rerun), len(cut), missed)
    # The faults happened: four acks, two folds, then the fold that released the callback.
    assert (proxy.pending_withholds, proxy.pending_commits) == (0, 0)
    commits = [w for w in proxy.withheld if w.startswith(b"COMMIT after ")]
    assert len(proxy.withheld) - len(commits) == 4, proxy.withheld
    assert [re.fullmatch(rb"COMMIT after " + p, w) is not None
            for w, p in zip(commits, [FOLD, FOLD, RELEASE], strict=True)] == [True] * 3, commits
