"""Worker parts in-process: claim scheduling and sizes, lease loss, prefetched tasks given back."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

import shardq
from shardq.core.config import ClientConfig
from shardq.worker.claimer import claim_size
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from shardq.worker.metrics import Metrics
from shardq.worker.schedule import FIRST_COOLDOWN_S, Schedule
from tests.chaos.proxy import Proxy
from tests.conftest import Databases
from tests.helpers import query, wait_for, worker_for
from tests.tcp_postgres import tcp_server


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_schedule_round_robin_from_offset() -> None:
    targets = [("q", b) for b in range(4)]
    schedule = Schedule(targets, offset=2, poll_max_s=1.0, clock=FakeTime())
    picks = []
    for _ in range(6):
        index, wait = schedule.pick()
        assert wait == 0
        picks.append(schedule.targets[index][1])
        schedule.record(index, 5)
    assert picks == [2, 3, 0, 1, 2, 3]


def test_schedule_cools_empty_buckets_and_resets() -> None:
    clock = FakeTime()
    schedule = Schedule([("q", 0), ("q", 1)], offset=0, poll_max_s=0.05, clock=clock)
    i, _ = schedule.pick()
    schedule.record(i, 0)
    j, _ = schedule.pick()
    schedule.record(j, 0)
    index, wait = schedule.pick()
    assert index == -1
    assert wait == pytest.approx(FIRST_COOLDOWN_S)
    cooldowns = []
    for _ in range(5):  # doubling, capped at poll_max_s
        clock.now += 1
        k, _ = schedule.pick()
        schedule.record(k, 0)
        cooldowns.append(schedule.cooldown_s(k))
    assert max(cooldowns) == 0.05
    assert cooldowns == sorted(cooldowns)
    clock.now += 1
    for _ in range(2):
        k, _ = schedule.pick()
        schedule.record(k, 0)
    assert schedule.pick()[0] == -1  # both cooling down
    schedule.reset("q")
    index, wait = schedule.pick()
    assert index >= 0
    assert wait == 0.0


def test_a_rate_that_gave_nothing_cools_every_bucket_of_its_queue() -> None:
    # A queue's rate is one row: after a spend that got no token, a claim of the queue's
    # next bucket would spend from the same row and get none either.
    clock = FakeTime()
    schedule = Schedule([("q", b) for b in range(4)] + [("r", 0)], offset=0, poll_max_s=1.0,
                        clock=clock)
    index, _ = schedule.pick()
    assert schedule.targets[index] == ("q", 0)
    schedule.record(index, 0, 0.25)
    index, _ = schedule.pick()
    assert schedule.targets[index] == ("r", 0)  # another queue is not held back
    schedule.record(index, 1)
    for _ in range(4):  # until the rate gives again, r's polls only
        index, _ = schedule.pick()
        assert schedule.targets[index] == ("r", 0)
        schedule.record(index, 0)
        clock.now += 0.05
    assert schedule.pick()[0] == -1
    clock.now += 0.1
    assert schedule.targets[schedule.pick()[0]][0] == "q"


def test_lost_lease_cancels_the_handler_and_drops_its_result(dsn: str, client: shardq.Client,
                                                            connect: psycopg.Connection[Any]
                                                            ) -> None:
    app = shardq.App(dsn)
    seen: dict[str, Any] = {}
    started = threading.Event()

    @app.task(queue="lossy")
    def long_job() -> None:
        started.set()
        context = shardq.current()
        deadline = time.monotonic() + 20
        while not context.cancelled and time.monotonic() < deadline:
            time.sleep(0.02)
        seen["cancelled"] = context.cancelled

    task_id = long_job.enqueue()
    worker = worker_for(dsn, app, lease_s=0.6)
    worker.start()
    try:
        assert started.wait(10)
        # Another claim takes over: the token changes under the running handler.
        connect.execute("UPDATE shardq.tasks SET lease_token = gen_random_uuid()")
        wait_for(lambda: "cancelled" in seen, timeout=10, interval=0.05,
                 what="the handler to see its cancellation")
    finally:
        worker.stop(grace_s=5)
    assert seen == {"cancelled": True}
    info = client.get(task_id)
    assert info is not None
    assert info.state == "locked"  # not acked by the worker that lost it


def gated_app(dsn: str, gate: threading.Event) -> tuple[shardq.App, Any, Any]:
    """An app with a fast queue (its runs tell the worker its handlers are quick, so it
    prefetches) and a queue whose handlers wait for ``gate``."""
    app = shardq.App(dsn)

    @app.task(queue="quick")
    def quick(n: int) -> None:
        del n

    @app.task(queue="gated")
    def wait_for_gate(n: int) -> None:
        gate.wait(20)

    return app, quick, wait_for_gate


@pytest.fixture
def one_bucket(databases: Databases) -> Iterator[tuple[str, shardq.Client]]:
    """A database of one bucket (a claim takes a whole batch at once) and a Client on it."""
    url = databases.create(bucket_count=1)
    with shardq.Client(url) as c:
        yield url, c


@pytest.fixture
def one_bucket_on_tcp() -> Iterator[tuple[str, shardq.Client]]:
    """A database of one bucket and a Client on it, on a server a TCP proxy can reach."""
    with tcp_server() as admin:
        dbs = Databases(admin)
        try:
            url = dbs.create(bucket_count=1)
            with shardq.Client(url) as c:
                yield url, c
        finally:
            dbs.drop_all()


def prefetching(client: shardq.Client, worker: Worker, quick: Any, wait_for_gate: Any) -> None:
    """Start ``worker`` on quick tasks, then give it 40 gated ones: 2 run, 18 or more wait
    (one claim takes 20 while the handlers seem quick)."""
    quick.enqueue_many([(n,) for n in range(50)])
    worker.start()
    wait_for(lambda: client.stats("quick")["available"] + client.stats("quick")["locked"] == 0,
             timeout=20, interval=0.05, what="the quick tasks")
    wait_for_gate.enqueue_many([(n,) for n in range(40)])
    wait_for(lambda: client.stats("gated")["locked"] >= 20, timeout=10, interval=0.05,
             what="a prefetched batch")


def test_stop_gives_back_prefetched_tasks_without_penalty(
        one_bucket: tuple[str, shardq.Client]) -> None:
    dsn, client = one_bucket
    gate = threading.Event()
    app, quick, wait_for_gate = gated_app(dsn, gate)
    worker = worker_for(dsn, app, concurrency=2, batch=20, claimers=1, prefetch_max_s=60)
    prefetching(client, worker, quick, wait_for_gate)
    stopper = threading.Thread(target=worker.stop, kwargs={"grace_s": 10})
    stopper.start()
    # The stop gives back what was prefetched while the two handlers still run.
    wait_for(lambda: client.stats("gated")["locked"] == 2, timeout=10, interval=0.05,
             what="the prefetched tasks to be given back")
    gate.set()
    stopper.join(15)
    stats = client.stats("gated")
    assert stats["locked"] == 0
    done = 40 - stats["available"] - stats["scheduled"]
    assert done == 2  # the two running handlers finished; the rest went back
    assert query(dsn, "SELECT max(attempts) FROM shardq.tasks") == [(0,)]


def test_tasks_waiting_too_long_for_a_slot_are_given_back(
        one_bucket: tuple[str, shardq.Client]) -> None:
    """The quick tasks made the worker prefetch; the gated ones then hold both slots, and
    what waits in the buffer past prefetch_max_s goes back for other workers to run."""
    dsn, client = one_bucket
    gate = threading.Event()
    app, quick, wait_for_gate = gated_app(dsn, gate)
    worker = worker_for(dsn, app, concurrency=2, batch=20, claimers=1, prefetch_max_s=1.5)
    try:
        prefetching(client, worker, quick, wait_for_gate)
        # Given back, and not claimed again while both slots are busy.
        wait_for(lambda: client.stats("gated")["locked"] == 2, timeout=10, interval=0.05,
                 what="the waiting tasks to be given back")
        time.sleep(0.5)
        assert client.stats("gated")["locked"] == 2
        assert query(dsn, "SELECT count(*) FROM shardq.tasks "
                          "WHERE status = 'available' AND attempts = 0") == [(38,)]
    finally:
        gate.set()
        worker.stop(grace_s=10)


def test_a_stop_gives_up_on_a_database_that_does_not_answer(
        one_bucket_on_tcp: tuple[str, shardq.Client], caplog: pytest.LogCaptureFixture) -> None:
    """Behind a proxy that stops forwarding, a worker's stop does not wait out its grace:
    the handlers finish, giving back the prefetched tasks fails fast, and one line counts
    what stays locked for the leases and the janitor."""
    dsn, client = one_bucket_on_tcp
    address = urlsplit(dsn)
    with Proxy((address.hostname or "127.0.0.1", address.port or 5432)) as proxy:
        gate = threading.Event()
        app, quick, wait_for_gate = gated_app(dsn, gate)
        worker = Worker(app, ClientConfig(dsn=proxy.url(address.path.lstrip("/")),
                                          connect_timeout_s=1),
                        WorkerConfig(janitors=0, listen=False, concurrency=2, batch=20,
                                     claimers=1, prefetch_max_s=60))
        prefetching(client, worker, quick, wait_for_gate)
        proxy.blackhole(True)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="shardq.worker"):
            stopper = threading.Thread(target=worker.stop, kwargs={"grace_s": 30})
            stopper.start()
            # The running handlers end once the stop took the prefetched tasks back.
            wait_for(worker.buffer.empty, timeout=10, interval=0.01, what="the buffer taken")
            gate.set()
            stopper.join(30)
        assert time.monotonic() - started < 15
    assert client.stats("gated")["locked"] >= 18  # left for their leases to expire
    [line] = [r.getMessage() for r in caplog.records if "could not be given back" in r.message]
    assert re.match(r"\d+ task\(s\) could not be given back", line)


def test_claim_sizes_come_from_a_fixed_ladder() -> None:
    assert [claim_size(room, 100) for room in (0, 1, 2, 3, 7, 8, 99, 100, 250)] == [
        1, 1, 2, 2, 4, 8, 64, 100, 100]
    assert {claim_size(room, 100) for room in range(1, 1000)} == {1, 2, 4, 8, 16, 32, 64, 100}
    assert {claim_size(room, 64) for room in range(1, 100)} == {1, 2, 4, 8, 16, 32, 64}


def test_a_worker_prepares_claims_of_ladder_sizes_only(dsn: str, client: shardq.Client) -> None:
    """Handlers of varied durations make the free room vary from claim to claim; the
    claim statements the worker's connections prepared have ladder sizes only."""
    app = shardq.App(dsn)

    @app.task(queue="ladder")
    def jitter(n: int) -> None:
        time.sleep((n % 7) / 1000)

    jitter.enqueue_many([(n,) for n in range(3000)])
    worker = worker_for(dsn, app, concurrency=7, batch=100, claimers=2)
    worker.start()
    try:
        wait_for(lambda: client.stats("ladder")["available"] == 0, timeout=120, interval=0.05,
                 what="the backlog to be claimed")
        pool = worker.client.db.pool
        with ExitStack() as held:  # every connection of the pool at once: each is asked
            connections = [held.enter_context(pool.connection()) for _ in range(pool.max_size)]
            prepared = [[row[0] for row in conn.execute(
                "SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s",
                ("%SKIP LOCKED%",))] for conn in connections]
    finally:
        worker.stop(grace_s=10)
    # (a claim of several buckets?, its limit) of each prepared claim, per connection;
    # a claim of several buckets names its limit twice (each bucket's, the claim's).
    limits = [[("listed.bucket" in text, int(n)) for text in texts
               for n in set(re.findall(r"LIMIT (\d+)", text))] for texts in prepared]
    assert any(limits)  # claims ran often enough to be prepared
    assert {n for sizes in limits for _, n in sizes} <= {1, 2, 4, 8, 16, 32, 64, 100}
    assert all(len(sizes) == len(set(sizes)) for sizes in limits)


def all_cooling(schedule: Schedule) -> None:
    """Visit every target and find it empty."""
    for _ in range(len(schedule.targets)):
        i, _ = schedule.pick()
        schedule.record(i, 0)
    assert schedule.pick()[0] == -1


@pytest.mark.parametrize("listening", [False, True])
def test_schedule_goes_to_the_notified_bucket_first(listening: bool) -> None:
    schedule = Schedule([("q", b) for b in range(8)], offset=0, poll_max_s=1.0,
                        listening=listening, clock=FakeTime())
    all_cooling(schedule)
    schedule.hint("q", 5)
    schedule.hint("q", 2)
    schedule.hint("q", 5)  # a second note for the same bucket adds no visit
    assert [schedule.targets[schedule.pick()[0]] for _ in range(2)] == [("q", 5), ("q", 2)]
    assert schedule.pick()[0] == -1  # a hint makes no other bucket due
    five = schedule.index_of("q", 5)
    schedule.record(five, 3)  # found work: more may wait there (or a claim raced this one)
    assert schedule.pick() == (five, 0.0)
    schedule.record(five, 0)  # empty now
    if listening:  # new work there will be announced
        assert schedule.pick()[0] == -1
        assert schedule.cooldown_s(five) == 1.0
    else:  # nothing will say so: look again soon
        assert schedule.cooldown_s(five) == FIRST_COOLDOWN_S


@pytest.mark.parametrize("listening", [False, True])
def test_a_claim_short_of_its_limit_looks_again_only_when_nothing_announces_work(
        listening: bool) -> None:
    clock = FakeTime()
    schedule = Schedule([("q", b) for b in range(4)], offset=0, poll_max_s=1.0,
                        listening=listening, clock=clock)
    all_cooling(schedule)
    schedule.hint("q", 2)
    two = schedule.pick()[0]
    schedule.record(two, 1, drained=True)  # took all the range held: 1 task of a limit of 8
    if listening:  # the next task there is announced: no empty claim after each one
        assert schedule.pick()[0] == -1
        assert schedule.cooldown_s(two) == 1.0
        schedule.hint("q", 2)
        assert schedule.pick() == (two, 0.0)
    else:
        assert schedule.pick() == (two, 0.0)


def test_schedule_gathers_hints_for_coalesce_s_then_hands_out_a_queues_together() -> None:
    clock = FakeTime()
    schedule = Schedule([("q", b) for b in range(4)] + [("r", 0)], offset=0, poll_max_s=1.0,
                        listening=True, coalesce_s=0.002, clock=clock)
    all_cooling(schedule)
    schedule.hint("q", 0)  # after a quiet spell: claimed at once, nothing gathered
    assert schedule.targets[schedule.pick()[0]] == ("q", 0)
    clock.now += 0.005  # notes that follow one another: gathered
    schedule.hint("q", 1)
    clock.now += 0.001
    schedule.hint("r", 0)
    schedule.hint("q", 3)
    index, wait = schedule.pick()
    assert index == -1  # the first hint is younger than coalesce_s: more may come
    assert wait == pytest.approx(0.001)
    clock.now += 0.001
    first = schedule.pick()[0]
    assert schedule.targets[first] == ("q", 1)
    assert [schedule.targets[i] for i in schedule.take_with(first)] == [("q", 3)]
    assert schedule.hinted_targets == [("r", 0)]  # another queue's: a claim of its own
    schedule.hint("q", 2, at_once=True)  # work the worker knows of: a slot it freed
    assert schedule.targets[schedule.pick()[0]] == ("r", 0)  # no wait, the gathered first
    assert schedule.targets[schedule.pick()[0]] == ("q", 2)


def test_a_poll_takes_the_polls_nearly_due_with_it() -> None:
    clock = FakeTime()
    schedule = Schedule([("q", b) for b in range(4)] + [("r", 0)], offset=0, poll_max_s=1.0,
                        listening=True, clock=clock)
    for b in range(4):  # visited 0.2 s apart, all empty
        schedule.record(schedule.index_of("q", b), 0)
        clock.now += 0.2
    schedule.record(schedule.index_of("r", 0), 0)
    clock.now = 100.0 + 1.0  # bucket 0's poll is due, 1's in 0.2 s, 2's 0.4, 3's 0.6
    index = schedule.pick()[0]
    assert schedule.targets[index] == ("q", 0)
    # Those due within half a cool-down come along; the other queue's never.
    assert [schedule.targets[i] for i in schedule.take_with(index)] == [("q", 1), ("q", 2)]


def fills(worker: Worker) -> float:
    """How many claims of the worker took tasks (its batch-fill histogram's count)."""
    return next(sample.value for metric in worker.metrics.batch_fill.collect()
                for sample in metric.samples if sample.name.endswith("_count"))


def test_a_claimer_claims_the_buckets_it_gathered_in_one_statement(dsn: str) -> None:
    app = shardq.App(dsn)
    app.task(queue="gathered")(lambda: None)
    worker = Worker(app, ClientConfig(dsn=dsn), WorkerConfig(janitors=0, claimers=1,
                                                            coalesce_ms=0))
    claimer = worker.claimers[0]
    try:
        buckets: dict[int, int] = {}
        while len(buckets) < 3:  # one task in each of three buckets
            task_id = worker.client.enqueue("gathered", {})
            [(bucket,)] = query(dsn, "SELECT bucket FROM shardq.tasks WHERE id = %s",
                                (task_id,))
            if bucket in buckets:
                worker.client.cancel(task_id)
            else:
                buckets[bucket] = 1
        all_cooling(claimer.schedule)
        assert worker.listener is not None
        for bucket in buckets:
            worker.listener.on_notify("gathered", bucket)
        assert claimer.gathering
        claims_before = fills(worker)
        assert claimer.run_once().tasks == 3
        assert fills(worker) == claims_before + 1  # one claim took the three
        assert not claimer.gathering
        # It took all each range held: with notes heard, the buckets rest till the next note.
        assert claimer.schedule.pick()[0] == -1
    finally:
        worker.client.close()


def test_schedule_polls_owned_targets_at_poll_max_and_the_rest_rarely() -> None:
    clock = FakeTime()
    targets = [("q", b) for b in range(16)]
    schedule = Schedule(targets, offset=4, poll_max_s=1.0, share=8, clock=clock)
    visits: dict[int, int] = {}
    for _ in range(4000):  # 40 s of an idle worker, in 10 ms steps
        index, _ = schedule.pick()
        if index < 0:
            clock.now += 0.01
            continue
        visits[schedule.targets[index][1]] = visits.get(schedule.targets[index][1], 0) + 1
        schedule.record(index, 0)
    owned = {visits[4], visits[5]}
    others = [visits[b] for b in range(16) if b not in (4, 5)]
    assert min(owned) >= 40
    assert max(others) <= 15  # every 1 s vs every 8 s, after warm-up
    schedule.reset("q")
    assert schedule.pick()[0] >= 0  # new work everywhere: all due


def test_notes_for_single_buckets_gather_at_one_idle_claimer(dsn: str) -> None:
    app = shardq.App(dsn)
    app.task(queue="hinted")(lambda: None)
    worker = Worker(app, ClientConfig(dsn=dsn), WorkerConfig(janitors=0, claimers=4))
    assert worker.listener is not None  # notes reach the worker through its listener
    busy = worker.claimers[1]
    try:
        for claimer in worker.claimers:
            if claimer is not busy:
                all_cooling(claimer.schedule)
        with psycopg.connect(dsn) as blocker:
            # A table lock holds the busy claimer's claim statement in flight.
            blocker.execute("LOCK TABLE shardq.tasks IN ACCESS EXCLUSIVE MODE")
            claim = threading.Thread(target=busy.run_once)
            claim.start()
            wait_for(lambda: busy.claiming, timeout=10, interval=0.01,
                     what="the claim to be under way")
            assert not busy.idle  # busy: passed over while another is idle
            for bucket in range(3):
                worker.listener.on_notify("hinted", bucket)
            hinted = [c.schedule.hinted_targets for c in worker.claimers]
            blocker.rollback()
        claim.join(10)
        assert not claim.is_alive()
        # One claimer that was idle gathers them, for one claim of the three buckets.
        assert sorted(len(h) for h in hinted) == [0, 0, 0, 3]
        assert sorted(t for h in hinted for t in h) == [("hinted", b) for b in range(3)]
        assert hinted[1] == []
        worker.listener.on_notify("hinted", None)  # many buckets: every claimer looks everywhere
        assert all(c.schedule.pick()[0] >= 0 for c in worker.claimers)
    finally:
        worker.client.close()


def test_claimers_wait_for_a_slow_completer(dsn: str, client: shardq.Client) -> None:
    """With one ack per statement the completer is the bottleneck: claimers must not run
    ahead of it, or finished tasks sit locked, unextended, until their leases expire."""
    app = shardq.App(dsn)
    runs: list[int] = []

    @app.task(queue="slow-acks")
    def noop(n: int) -> None:
        runs.append(n)

    noop.enqueue_many([(n,) for n in range(3000)])
    worker = worker_for(dsn, app, concurrency=8, batch=100, claimers=8, ack_batch=1,
                        ack_flush_ms=1)
    worker.start()
    most_locked = 0

    def drained() -> bool:
        nonlocal most_locked
        stats = client.stats("slow-acks")
        most_locked = max(most_locked, stats["locked"])
        left: int = stats["available"] + stats["locked"]
        return left == 0

    try:
        wait_for(drained, timeout=120, interval=0.02, what="the backlog to be done")
    finally:
        worker.stop(grace_s=10)
    assert client.stats("slow-acks")["locked"] == 0
    assert sorted(runs) == list(range(3000))  # each ran once
    # The prefetch capacity plus one batch per claimer, never the whole backlog.
    assert most_locked <= 100 + 8 * 100


def test_each_worker_process_gets_its_own_settings() -> None:
    from shardq.worker.processes import child_config

    config = WorkerConfig(processes=3, janitors=2, metrics_port=9100, claimers=4)
    children = [child_config(config, i) for i in range(3)]
    assert [c.processes for c in children] == [1, 1, 1]
    assert [c.janitors for c in children] == [2, 0, 0]  # janitors in the first only
    assert [c.metrics_port for c in children] == [9100, 9101, 9102]
    assert {c.claimers for c in children} == {4}
    assert child_config(WorkerConfig(processes=2), 1).metrics_port == 0  # off stays off


def test_handler_durations_scrape_as_prometheus_histogram_does() -> None:
    # Each handler thread records into its own recorder; a scrape adds them up.  The
    # text must be what prometheus_client's own Histogram gives for the same runs,
    # boundary values (which count in their own bucket) included.
    runs = {"a": [0.0001, 0.005, 0.0051, 0.3, 1.0, 20.0], "b": [0.01, 7.5]}
    ours = Metrics()
    reference_registry = CollectorRegistry()
    reference = Histogram("shardq_handler_seconds", "Handler run time", ["queue"],
                          registry=reference_registry)

    def handler_thread() -> None:
        recorder = ours.durations.recorder()
        for queue, seconds in runs.items():
            for s in seconds:
                recorder.observe(queue, s)

    threads = [threading.Thread(target=handler_thread) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for queue, seconds in runs.items():
        for s in seconds * 3:
            reference.labels(queue).observe(s)

    def histogram_lines(registry: CollectorRegistry) -> list[str]:
        return sorted(line for line in generate_latest(registry).decode().splitlines()
                      if line.startswith("shardq_handler_seconds_")
                      and not line.startswith("shardq_handler_seconds_created"))

    lines = histogram_lines(ours.registry)
    assert lines == histogram_lines(reference_registry)
    assert 'shardq_handler_seconds_count{queue="a"} 18.0' in lines
