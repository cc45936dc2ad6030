"""Worker parts in-process: claim scheduling, lease loss, shutdown of prefetched tasks."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

import shardq
from shardq.config import ClientConfig
from shardq.worker.claimer import FIRST_COOLDOWN_S, Schedule
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker


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
    assert index == -1 and wait == pytest.approx(FIRST_COOLDOWN_S)
    cooldowns = []
    for _ in range(5):  # doubling, capped at poll_max_s
        clock.now += 1
        k, _ = schedule.pick()
        schedule.record(k, 0)
        cooldowns.append(schedule._cooldown[k])
    assert max(cooldowns) == 0.05 and cooldowns == sorted(cooldowns)
    clock.now += 1
    for _ in range(2):
        k, _ = schedule.pick()
        schedule.record(k, 0)
    assert schedule.pick()[0] == -1  # both cooling down
    schedule.reset("q")
    index, wait = schedule.pick()
    assert index >= 0 and wait == 0.0


def worker_for(dsn: str, app: shardq.App, **settings: Any) -> Worker:
    client_settings = {k: settings.pop(k) for k in list(settings) if k in ("lease_s",)}
    return Worker(app, ClientConfig(dsn=dsn, **client_settings),
                  WorkerConfig(janitors=0, listen=False, **settings))


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
        deadline = time.monotonic() + 10
        while "cancelled" not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop(grace_s=5)
    assert seen == {"cancelled": True}
    info = client.get(task_id)
    assert info is not None and info.state == "locked"  # not acked by the worker that lost it


def test_stop_gives_back_prefetched_tasks_without_penalty(dsn: str, client: shardq.Client,
                                                          connect: psycopg.Connection[Any]
                                                          ) -> None:
    app = shardq.App(dsn)
    gate = threading.Event()

    @app.task(queue="gated")
    def wait_for_gate(n: int) -> None:
        gate.wait(20)

    wait_for_gate.enqueue_many([(n,) for n in range(40)])
    worker = worker_for(dsn, app, concurrency=2, batch=20, claimers=1)
    worker.start()
    deadline = time.monotonic() + 10
    while client.stats("gated")["locked"] < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.stats("gated")["locked"] >= 20
    stopper = threading.Thread(target=worker.stop, kwargs={"grace_s": 10})
    stopper.start()
    time.sleep(0.3)
    gate.set()
    stopper.join(15)
    stats = client.stats("gated")
    assert stats["locked"] == 0
    done = 40 - stats["available"] - stats["scheduled"]
    assert done == 2  # the two running handlers finished; the rest went back
    assert connect.execute("SELECT max(attempts) FROM shardq.tasks").fetchone() == (0,)


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
    five = schedule._index[("q", 5)]
    schedule.record(five, 3)  # found work: more may wait there (or a claim raced this one)
    assert schedule.pick() == (five, 0.0)
    schedule.record(five, 0)  # empty now
    if listening:  # new work there will be announced
        assert schedule.pick()[0] == -1 and schedule._cooldown[five] == 1.0
    else:  # nothing will say so: look again soon
        assert schedule._cooldown[five] == FIRST_COOLDOWN_S


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
    assert min(owned) >= 40 and max(others) <= 15  # every 1 s vs every 8 s, after warm-up
    schedule.reset("q")
    assert schedule.pick()[0] >= 0  # new work everywhere: all due


def test_a_note_for_one_bucket_wakes_one_idle_claimer(dsn: str) -> None:
    app = shardq.App(dsn)
    app.task(queue="hinted")(lambda: None)
    worker = Worker(app, ClientConfig(dsn=dsn), WorkerConfig(janitors=0, claimers=4))
    try:
        for claimer in worker.claimers:
            all_cooling(claimer.schedule)
        worker.claimers[1]._claiming = True  # busy: passed over while another is idle
        for bucket in range(3):
            worker._heard("hinted", bucket)
        hinted = [[c.schedule.targets[i] for i in c.schedule._hints] for c in worker.claimers]
        assert sorted(t for h in hinted for t in h) == [("hinted", b) for b in range(3)]
        assert hinted[1] == [] and all(len(h) <= 1 for h in hinted)
        worker._heard("hinted", None)  # many buckets: every claimer looks everywhere
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
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            stats = client.stats("slow-acks")
            most_locked = max(most_locked, stats["locked"])
            if stats["available"] + stats["locked"] == 0:
                break
            time.sleep(0.02)
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
