"""Flow control across a fleet: three ``shardq consume`` processes of 16 handlers each
never run more of a queue's tasks at once (or claim more per second) than its limits
allow, whatever a worker believed, and a worker killed mid-run leaks no capacity.

Two observers owe nothing to the claim: every handler records its own start and end
(tests.apps.limited, through a connection of its own), and a sampler counts the
queue's held (locked) tasks in shardq.tasks while the fleet runs.  A rate's observer is
a trigger that logs each spend of its tokens.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

import shardq
from tests.apps import limited
from tests.conftest import Databases
from tests.daemons import Daemon
from tests.helpers import query, scalar, wait_for

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 3
SLOTS = "16"
QUEUES = ("capped", "grouped", "rated", "leased")

pytestmark = [pytest.mark.server, pytest.mark.timeout(180)]


@dataclass(frozen=True)
class Run:
    """One recorded handler run; ``ended`` None: the run never finished."""

    task_id: Any
    n: int
    group: str | None
    attempt: int
    claims: int
    pid: int
    started: float
    ended: float | None


@dataclass
class Fleet:
    """A database with tests.apps.limited's observer table, a client that the app's task
    functions enqueue through, and ``WORKERS`` ``shardq consume`` processes of ``SLOTS``
    handlers consuming every queue of the app (each with a janitor, and quick retries
    of what a janitor puts back; few connections, on a server that other tests share)."""

    url: str
    client: shardq.Client
    daemons: list[Daemon]

    def start(self) -> None:
        """Start the processes."""
        env = {**os.environ, "SHARDQ_DSN": self.url, "PYTHONPATH": str(ROOT)}
        queues = [arg for q in QUEUES for arg in ("--queue", q)]
        self.daemons += [Daemon(env, "tests.apps.limited:app", *queues, "--concurrency", SLOTS,
                                "--backoff-base-s", "0.05", "--backoff-jitter", "0",
                                "--no-sample-stats", "--pool-max-size", "4")
                         for _ in range(WORKERS)]

    def runs(self, queue: str) -> list[Run]:
        """Every recorded run of ``queue``, in start order."""
        rows = query(self.url, "SELECT task_id, n, grp, attempt, claims, pid, "
                               "extract(epoch FROM started_at)::float8, "
                               "extract(epoch FROM ended_at)::float8 "
                               "FROM limited_runs WHERE queue = %s ORDER BY started_at",
                     [queue])
        return [Run(*row) for row in rows]

    def drained(self, queue: str) -> bool:
        """Whether ``queue`` has no task left (every one acked)."""
        return bool(scalar(self.url, "SELECT count(*) = 0 FROM shardq.tasks WHERE queue = %s",
                           [queue]))


@pytest.fixture(scope="module")
def fleet(databases: Databases) -> Iterator[Fleet]:
    """One fleet for the module, on a fresh database (a process takes seconds to start
    on a busy machine); each test enqueues to a queue of its own after setting its
    limits (a worker that has not yet seen them claims nothing of it meanwhile)."""
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(limited.SETUP)
    with shardq.Client(url) as client:
        limited.app.use_client(client)
        f = Fleet(url, client, [])
        try:
            f.start()
            yield f
        finally:
            for d in f.daemons:
                d.kill()


class Sampler:
    """Counts, until stopped, the tasks of ``queue`` that shardq.tasks holds (locked), in
    all and per group: the database's view of what runs, beside the handlers' own."""

    def __init__(self, url: str, queue: str) -> None:
        self.url, self.queue = url, queue
        self.most = 0
        self.most_per_group: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(0.01):
                rows = conn.execute(
                    "SELECT coalesce(task_group, ''), count(*) FROM shardq.tasks "
                    "WHERE queue = %s AND status = 'locked' GROUP BY 1", [self.queue]).fetchall()
                self.samples += 1
                self.most = max(self.most, sum(n for _, n in rows))
                for group, n in rows:
                    self.most_per_group[group] = max(self.most_per_group[group], n)


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most of ``intervals`` that hold one instant (an end and a start at the same
    instant do not overlap)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def most_in_span(times: list[float], span_s: float) -> int:
    """The most of ``times`` in any closed span of ``span_s`` seconds."""
    ordered = sorted(times)
    most, first = 0, 0
    for last, t in enumerate(ordered):
        while t - ordered[first] > span_s:
            first += 1
        most = max(most, last - first + 1)
    return most


def finished_once(runs: list[Run], count: int) -> list[Run]:
    """The runs that ended, after checking that each of tasks 0 … ``count`` - 1 ended
    exactly once."""
    done = [r for r in runs if r.ended is not None]
    assert sorted(r.n for r in done) == list(range(count))
    assert len({r.task_id for r in done}) == count
    return done


def intervals(runs: list[Run]) -> list[tuple[float, float]]:
    """The [start, end] of each finished run."""
    return [(r.started, r.ended) for r in runs if r.ended is not None]


def test_max_running_is_never_exceeded_across_workers(fleet: Fleet) -> None:
    fleet.client.set_limits("capped", max_running=4, create=True)
    limited.capped.enqueue_many([(n, 0.1) for n in range(60)])
    with Sampler(fleet.url, "capped") as sampler:
        wait_for(lambda: fleet.drained("capped"), timeout=90, what="the queue to drain")
    runs = fleet.runs("capped")
    done = finished_once(runs, 60)
    assert len(runs) == 60  # nothing ran twice
    assert {r.attempt for r in done} == {1}
    # Which workers ran them is not asked: a worker hands each place it frees to its own
    # next task in the ack's transaction, so whoever took the first places may keep all
    # four to the end while the others' claims find none free (and never pass the limit).
    most = most_at_once(intervals(done))
    assert 1 < most <= 4
    assert sampler.samples > 0
    assert sampler.most <= 4
    assert fleet.client.limits("capped").running == 0


def test_max_running_per_group_is_never_exceeded_and_groups_run_side_by_side(
        fleet: Fleet) -> None:
    fleet.client.set_limits("grouped", max_running_per_group=2, create=True)
    groups = ("A", "B", "C")
    for i, g in enumerate(groups):
        limited.grouped.enqueue_many([(n, 0.1, g) for n in range(i * 15, i * 15 + 15)], group=g)
    with Sampler(fleet.url, "grouped") as sampler:
        wait_for(lambda: fleet.drained("grouped"), timeout=90, what="the queue to drain")
    runs = fleet.runs("grouped")
    done = finished_once(runs, 45)
    assert len(runs) == 45
    by_group: dict[str | None, list[Run]] = defaultdict(list)
    for r in done:
        by_group[r.group].append(r)
    assert sorted(by_group, key=str) == list(groups)
    for g in groups:
        assert most_at_once(intervals(by_group[g])) <= 2, g
        assert sampler.most_per_group[g] <= 2, g
    assert most_at_once(intervals(done)) > 2  # the groups' limits are apart
    control = fleet.client.limits("grouped")
    assert (control.running, control.running_most_group) == (0, 0)


# Every move of the "rated" queue's theoretical arrival time, in the order of its row lock,
# by the database's clock: each claim's spend of tokens (rate_take) and each give-back
# of the ones it did not use (rate_refund).
RATE_MOVES = """
CREATE TABLE rate_moves (
    seq bigserial PRIMARY KEY, pid int NOT NULL, at timestamptz NOT NULL,
    old_tat timestamptz, new_tat timestamptz NOT NULL
);
CREATE FUNCTION log_rate_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rate_moves (pid, at, old_tat, new_tat)
    VALUES (pg_backend_pid(), now(), OLD.rate_tat, NEW.rate_tat);
    RETURN NULL;
END $$;
CREATE TRIGGER rate_moves AFTER UPDATE OF rate_tat ON shardq.queues FOR EACH ROW
    WHEN (NEW.name = 'rated' AND NEW.rate_tat IS NOT NULL) EXECUTE FUNCTION log_rate_move();
"""


def tokens_used(url: str, step_s: float) -> list[float]:
    """The time of each rate token that a claim spent and kept, from ``rate_moves``: a
    spend moves the arrival time from max(old, now) on by n steps; a give-back moves it
    back, and belongs to the last spend of its connection (spend, claim and give-back
    run on one connection, one after the other)."""
    rows = query(url, "SELECT pid, extract(epoch FROM at)::float8, "
                      "extract(epoch FROM old_tat)::float8, extract(epoch FROM new_tat)::float8 "
                      "FROM rate_moves ORDER BY seq")
    spends: list[list[float]] = []  # [at, n] of each spend
    last: dict[int, list[float]] = {}
    for pid, at, old, new in rows:
        if old is not None and new < old:
            last[pid][1] -= round((old - new) / step_s)
        else:
            last[pid] = [at, round((new - max(old or at, at)) / step_s)]
            spends.append(last[pid])
    assert all(n >= 0 for _, n in spends)
    return [at for at, n in spends for _ in range(int(n))]


def test_a_rate_is_never_exceeded_across_workers(fleet: Fleet) -> None:
    # The log first: a spend made before it and given back after would be paired with
    # an earlier spend of its connection (or none), and a claim of the tasks enqueued
    # below would go unseen.  (Setting a new rate clears the arrival time: not logged.)
    with psycopg.connect(fleet.url, autocommit=True) as conn:
        conn.execute(RATE_MOVES)
    rate = shardq.Rate(10, 1.0, burst=2)
    fleet.client.set_limits("rated", rate=rate, create=True)
    limited.rated.enqueue_many([(n, 0.05) for n in range(35)])
    wait_for(lambda: fleet.drained("rated"), timeout=90, what="the queue to drain")
    runs = fleet.runs("rated")
    done = finished_once(runs, 35)
    assert len(runs) == 35
    assert len({r.pid for r in done}) > 1
    # The documented bound is on claims, by the database's clock (a claim spends its
    # token in a statement of its own, then claims): no span of t seconds holds more
    # than burst + count * t / period tokens spent and kept; over 1 s, 2 + 10.  The
    # handlers' starts are not held to it: each follows its claim by however long its
    # worker took to get to it (on a loaded machine, a claim late to start has been
    # seen to start beside the next second's).
    used = tokens_used(fleet.url, rate.period_s / rate.count)
    # Every run spent a token; a claim that found none gives its token back, but one may
    # still be on its way when the log is read.
    assert len(used) >= 35
    for span_s in (1.0, 2.0, 3.0):
        assert most_in_span(used, span_s) <= 2 + 10 * span_s, span_s
    # And the rate held them back: the 35th token comes (35 - 2) steps after the first.
    assert max(used) - min(used) >= 3.3 - 0.01


def test_a_worker_killed_mid_run_leaks_no_capacity_and_never_lets_the_limit_be_passed(
        fleet: Fleet) -> None:
    fleet.client.set_limits("leased", max_running=4, create=True)
    limited.leased.enqueue_many([(n, 1.0) for n in range(16)])
    with Sampler(fleet.url, "leased") as sampler:
        chosen: list[Daemon] = []

        def a_run_began() -> bool:
            # A run of 1 s that began less than 0.6 s ago: the kill of its worker cuts it
            # (a loaded machine may take a few tenths of a second to read the runs and
            # send it).  Whichever worker it is: under the limit, the slots may all go
            # to the others for as long as the 16 tasks last.
            for r in fleet.runs("leased"):
                if r.ended is None and time.time() - r.started < 0.6:
                    chosen[:] = [d for d in fleet.daemons if d.proc.pid == r.pid]
                    return bool(chosen)
            return False

        wait_for(a_run_began, timeout=60, interval=0.02, what="a worker to start a run")
        victim = chosen[0]
        pid = victim.proc.pid
        victim.signal(signal.SIGKILL)
        victim.proc.wait(timeout=10)
        killed_at = time.time()  # no later than its handlers stopped
        wait_for(lambda: fleet.drained("leased"), timeout=90, what="the queue to drain")
    runs = fleet.runs("leased")
    cut = [r for r in runs if r.ended is None]
    assert cut
    assert {r.pid for r in cut} == {pid}  # only the killed worker's runs never ended
    done = [r for r in runs if r.ended is not None]
    assert sorted({r.n for r in done}) == list(range(16))  # every task ran to its end
    assert all((r.ended or 0) <= killed_at for r in done if r.pid == pid)
    # Once, or twice when the victim had ended a run but not yet acked it.
    ran = Counter(r.task_id for r in done)
    assert all(n == 1 or (n == 2 and [r.pid for r in done if r.task_id == t].count(pid) == 1)
               for t, n in ran.items())
    # The runs it cut ran again, to the end, in another process once their lease (and
    # the claim it was: the task was claimed again) had run out.
    again = [r for r in done if r.task_id in {c.task_id for c in cut}]
    assert len(again) == len(cut)
    assert all(r.pid != pid and r.started > killed_at and r.claims > 1 for r in again)
    # The cut runs held their slots until the kill (and, unseen here, until their
    # lease ran out): together with every other run, never more than 4 at once.
    most = most_at_once([*intervals(done), *((r.started, killed_at) for r in cut)])
    assert 1 < most <= 4
    assert sampler.most <= 4
    assert fleet.client.limits("leased").running == 0


def test_most_at_once_and_most_in_span_count_what_they_say() -> None:
    # The two measures the tests above rely on, on intervals and times made by hand.
    assert most_at_once([]) == 0
    assert most_at_once([(0, 1), (1, 2)]) == 1  # touching intervals do not overlap
    assert most_at_once([(0, 3), (1, 2), (1.5, 4), (3.5, 5)]) == 3
    assert most_in_span([0, 0, 0.5, 1.0, 1.01], 1.0) == 4
    assert most_in_span([0, 2, 4], 1.0) == 1



def test_outcomes_of_an_awaited_limit_are_written_at_once(dsn: str) -> None:
    """Under max_running=1 every task waits for the one before to be acknowledged.  With
    acks batched for up to a minute (ack_flush_ms), five tasks would take minutes; an
    outcome under a limit that claims wait for is written as its handler ends, and its
    slot taken again at once."""
    from shardq.core.config import ClientConfig
    from shardq.ops.flow import LISTED_SLOTS
    from shardq.worker.config import WorkerConfig
    from shardq.worker.daemon import Worker

    app = shardq.App(dsn)
    ran: list[int] = []

    @app.task(queue="one-at-a-time")
    def job(n: int) -> None:
        ran.append(n)

    with shardq.Client(dsn) as client:
        client.set_limits("one-at-a-time", max_running=1, create=True)
        assert client.limits("one-at-a-time").awaited
        assert not shardq.Control(shardq.Limits(max_running=LISTED_SLOTS + 1)).awaited
        app.use_client(client)
        job.enqueue_many([(n,) for n in range(5)])
        worker = Worker(app, ClientConfig(dsn=dsn),
                        WorkerConfig(janitors=0, ack_flush_ms=60_000))
        worker.start()
        try:
            wait_for(lambda: scalar(dsn, "SELECT count(*) FROM shardq.tasks "
                                         "WHERE queue = 'one-at-a-time'") == 0, timeout=30)
        finally:
            worker.stop(5)
    assert sorted(ran) == [0, 1, 2, 3, 4]


def test_the_listed_slots_bound_is_the_one_the_claims_use() -> None:
    """The bound is bound in from Python: the file never states a number of its own."""
    from shardq.core import sqlfiles
    from shardq.ops.flow import LISTED_SLOTS, limited_fragments

    assert not re.search(r"\b\d{3,}\b", sqlfiles.text("free_slots"))
    for group in (None, "g"):
        fragments = tuple(sorted(limited_fragments(group, False, "rate_spent").items()))
        text = sqlfiles.query("claim_limited", "postgresql", "bucket", 100,
                              fragments=fragments).as_string(None)
        uses = 1 if group is None else 2  # the queue's free slots, and the group's
        assert text.count(f"<= {LISTED_SLOTS}") == 3 * uses, group
        assert text.count(f"> {LISTED_SLOTS}") == uses, group


def test_a_claim_draws_enough_slot_numbers_for_the_share_of_the_limit_in_use() -> None:
    """Above the listed bound, a claim of 100 draws 100 numbers and a few more when the
    limit is far from used, twice as many when half of it is, and at most ten per task."""
    from shardq.ops.flow import Control, Limits, draws

    assert draws(Control(Limits(max_running=1_000_000)), 100) == 108
    assert draws(Control(Limits(max_running=2_000), running=1_000), 100) == 208
    assert draws(Control(Limits(max_running=2_000), running=2_000), 100) == 1_008
    assert draws(Control(Limits(max_running=1_000_000, max_running_per_group=5_000),
                         running=10, running_most_group=4_000), 100) == 508

