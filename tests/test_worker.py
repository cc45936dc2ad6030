"""The ``shardq consume`` daemon, run as a real subprocess against the test database."""

from __future__ import annotations

import itertools
import os
import signal
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.apps import recorder
from tests.daemons import Daemon
from tests.helpers import free_port, query, wait_for

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def daemons() -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def start(env: dict[str, str], *args: str) -> Daemon:
        started.append(Daemon(env, "tests.apps.recorder:app", *args))
        return started[-1]

    yield start
    for d in started:
        d.kill()


def test_every_task_runs_exactly_once(db: str, app_env: dict[str, str],
                                      daemons: Callable[..., Daemon]) -> None:
    recorder.record.enqueue_many([(n,) for n in range(1500)])
    recorder.arecord.enqueue_many([(n,) for n in range(1500, 2000)])
    daemon = daemons(app_env, "--queue", "work", "--concurrency", "6")
    wait_for(lambda: query(db, "SELECT count(*) FROM runs")[0][0] >= 1000)
    recorder.record.enqueue_many([(n,) for n in range(2000, 2500)])  # after start
    for n in range(2500, 2600):
        recorder.record.enqueue(n)
    wait_for(lambda: query(db, "SELECT count(*) FROM shardq.tasks") == [(0,)])
    daemon.signal()
    code, out = daemon.wait()
    assert code == 0, out
    assert query(db, "SELECT count(*), count(DISTINCT n), min(n), max(n), max(attempt) "
                     "FROM runs") == [(2600, 2600, 0, 2599, 1)]


def test_failures_back_off_then_die(db: str, app_env: dict[str, str],
                                    daemons: Callable[..., Daemon]) -> None:
    recorder.flaky.enqueue(1)
    recorder.retry_later.enqueue(2)
    recorder.poison.enqueue(3)
    daemon = daemons(app_env, "--queue", "flaky", "--backoff-base-s", "0.1",
                     "--backoff-jitter", "0")
    wait_for(lambda: query(db, "SELECT count(*) FROM shardq.tasks WHERE status = 'dead'")
             == [(2,)])
    daemon.signal()
    assert daemon.wait()[0] == 0
    runs = query(db, "SELECT n, attempt, started_at FROM runs ORDER BY started_at")
    flaky = [r for r in runs if r[0] == 1]
    assert [r[1] for r in flaky] == [1, 2, 3]
    gaps = [(b[2] - a[2]).total_seconds() for a, b in itertools.pairwise(flaky)]
    assert gaps[0] >= 0.2
    assert gaps[1] >= 0.4  # 0.1 s x 2^attempts
    dead = dict(query(db, "SELECT payload->'args'->>0, last_error FROM shardq.tasks "
                          "WHERE status = 'dead'"))
    assert "RuntimeError: flaky 1 failed" in dead["1"]
    assert "poison message" in dead["3"]
    assert len([r for r in runs if r[0] == 3]) == 1
    later = query(db, "SELECT status, exec_time - last_requeued_at FROM shardq.tasks "
                      "WHERE payload->'args'->>0 = '2'")
    assert later[0][0] == "available"
    assert later[0][1].total_seconds() == 3600


def test_heartbeats_keep_a_slow_task(db: str, app_env: dict[str, str],
                                     daemons: Callable[..., Daemon]) -> None:
    recorder.slow.enqueue(7, 5.0)  # 5 s of work on a 2 s lease
    daemon = daemons(app_env, "--queue", "slow", "--janitor-interval-s", "0.2")
    wait_for(lambda: query(db, "SELECT count(*) FROM shardq.tasks") == [(0,)], timeout=30)
    daemon.signal()
    assert daemon.wait()[0] == 0
    assert query(db, "SELECT n, attempt, outcome FROM runs") == [(7, 1, "ok")]


def test_sigterm_loses_nothing_and_leaves_nothing_locked(db: str, app_env: dict[str, str],
                                                         daemons: Callable[..., Daemon]) -> None:
    recorder.slow.enqueue_many([(n, 0.3) for n in range(200)])
    daemon = daemons(app_env, "--queue", "slow", "--concurrency", "4", "--batch", "10",
                     "--shutdown-grace-s", "10")
    wait_for(lambda: query(db, "SELECT count(*) FROM runs")[0][0] >= 8)
    daemon.signal()
    code, out = daemon.wait()
    assert code == 0, out
    assert query(db, "SELECT count(*) FROM shardq.tasks WHERE status <> 'available'") == [(0,)]
    done = query(db, "SELECT n FROM runs WHERE outcome = 'ok'")
    left = query(db, "SELECT (payload->'args'->>0)::int FROM shardq.tasks")
    assert sorted(n for (n,) in done + left) == list(range(200))  # each exactly once
    assert query(db, "SELECT count(*) FROM shardq.tasks WHERE attempts > 0") == [(0,)]


def test_second_signal_exits_at_once(db: str, app_env: dict[str, str],
                                     daemons: Callable[..., Daemon]) -> None:
    recorder.slow.enqueue_many([(n, 30.0) for n in range(4)])
    daemon = daemons(app_env, "--queue", "slow", "--concurrency", "4")
    wait_for(lambda: query(db, "SELECT count(*) FROM shardq.tasks WHERE status = 'locked'")
             == [(4,)])
    daemon.signal()
    # The second signal must come after the first was handled, or it would be the first.
    wait_for(lambda: "finishing running tasks" in daemon.output, timeout=30,
             what="the daemon to take the first signal")
    daemon.signal(signal.SIGINT)
    code, out = daemon.wait(timeout=25)  # handlers need 30 s: a graceful stop would wait
    assert code == 1
    assert "exiting now" in out
    assert "stopped" not in out
    # The leases are still held; the janitor will recover them once they expire.
    assert query(db, "SELECT count(*) FROM shardq.tasks WHERE status = 'locked'") == [(4,)]


def test_metrics_endpoint(db: str, app_env: dict[str, str],
                          daemons: Callable[..., Daemon]) -> None:
    recorder.record.enqueue_many([(n,) for n in range(50)])
    recorder.flaky.enqueue(99)
    port = free_port()
    daemon = daemons(app_env, "--metrics-port", str(port), "--log-format", "json")
    wait_for(lambda: query(db, "SELECT count(*) FROM runs")[0][0] >= 51)

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    wait_for(lambda: 'shardq_tasks_acked_total{queue="work"} 50.0' in scrape())
    text = scrape()
    for name in ("shardq_tasks_claimed_total", "shardq_tasks_failed_total",
                 "shardq_handler_seconds_bucket", "shardq_claim_batch_fill_bucket",
                 "shardq_lease_lost_total", "shardq_queue_available"):
        assert name in text
    daemon.signal()
    code, out = daemon.wait()
    assert code == 0
    assert '"task_id"' in out
    assert '"queue": "flaky"' in out  # JSON failure lines


def test_processes_share_the_work_and_stop_together(db: str, app_env: dict[str, str],
                                                    daemons: Callable[..., Daemon]) -> None:
    # Small batches and slow tasks, so that one process cannot take everything before
    # the other has started.
    recorder.slow.enqueue_many([(n, 0.2) for n in range(40)])
    daemon = daemons(app_env, "--queue", "slow", "--processes", "2", "--concurrency", "2",
                     "--batch", "2")
    wait_for(lambda: query(db, "SELECT count(*) FROM shardq.tasks") == [(0,)])
    daemon.signal(signal.SIGINT)  # as a terminal's Ctrl-C: the supervisor passes it on
    code, out = daemon.wait()
    assert code == 0, out
    assert query(db, "SELECT count(*), count(DISTINCT n), max(attempt) FROM runs") == [
        (40, 40, 1)]
    assert query(db, "SELECT count(DISTINCT pid) FROM runs") == [(2,)]
    assert out.count("stopped\n") == 2
    assert "exit codes [0, 0]" in out


def test_a_dead_process_stops_the_group(db: str, app_env: dict[str, str],
                                        daemons: Callable[..., Daemon]) -> None:
    recorder.slow.enqueue_many([(n, 0.5) for n in range(60)])
    daemon = daemons(app_env, "--queue", "slow", "--processes", "2", "--concurrency", "2",
                     "--batch", "2", "--claimers", "1")
    wait_for(lambda: query(db, "SELECT count(DISTINCT pid) FROM runs") == [(2,)])
    victim = query(db, "SELECT min(pid) FROM runs")[0][0]
    os.kill(victim, signal.SIGKILL)
    code, out = daemon.wait()
    assert code == 1
    assert f"worker process {victim} exited on its own" in out
    assert out.count("stopped\n") == 1  # the survivor stopped gracefully
    # The survivor gave back what it held; the victim's tasks (two running, two
    # batches prefetched at most) wait for their leases to expire.
    assert 1 <= query(db, "SELECT count(*) FROM shardq.tasks WHERE status = 'locked'"
                      )[0][0] <= 6


def test_slow_tasks_are_spread_over_the_processes(db: str, app_env: dict[str, str],
                                                  daemons: Callable[..., Daemon]) -> None:
    """A process claims about what its free slots take, not a whole batch: with slow
    handlers the other process's idle slots get their share instead of waiting while
    the first one's buffer hoards the tasks."""
    recorder.slow.enqueue_many([(n, 1.0) for n in range(24)])
    daemon = daemons(app_env, "--queue", "slow", "--processes", "2", "--concurrency", "4")
    wait_for(lambda: query(db, "SELECT count(*) FROM shardq.tasks") == [(0,)])
    daemon.signal()
    code, out = daemon.wait()
    assert code == 0, out
    per_process = [n for (n,) in query(db, "SELECT count(*) FROM runs GROUP BY pid")]
    assert sum(per_process) == 24
    assert len(per_process) == 2
    assert min(per_process) >= 8, per_process  # an even split is 12 each
