"""Queue figures: exact and estimated counts, lag without head start, rates, forecasts,
every queue at once, and the worker's gauges."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core.plan import plan
from shardq.maths import forecast
from shardq.ops import samples
from shardq.worker.metrics import Metrics
from shardq.worker.observe import StatsSampler
from tests.conftest import Databases
from tests.helpers import claim_all, query, shardq_cli, within_stated_error

pytestmark = [pytest.mark.server, pytest.mark.behaviour]


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_small_queues_are_counted_exactly(client: shardq.Client) -> None:
    queue = fresh("exact")
    client.enqueue_many(queue, [{"n": n} for n in range(30)])
    client.enqueue_many(queue, [{"n": n} for n in range(5)], delay_s=600)
    client.enqueue_many(fresh("other"), [{"n": n} for n in range(9)])
    held = claim_all(client, queue, most=6)
    client.nack_many(held[:2], dead=[True, True])
    stats = client.stats(queue)
    assert {k: stats[k] for k in ("available", "scheduled", "parked", "locked", "dead")} == \
        {"available": 24, "scheduled": 5, "parked": 0, "locked": 4, "dead": 2}
    assert stats["parked_by"] == {"sleep": 0, "event": 0, "children": 0}
    assert stats["error"] == {}
    assert set(stats["exact"]) == {"available", "scheduled", "parked", "locked", "dead",
                                   "oldest_eligible_age_s", "lag_s"}
    assert stats["paused"] is False
    assert "slo_breach_in_s" not in stats  # only with slo_s


def test_an_empty_queue(client: shardq.Client) -> None:
    stats = client.stats(fresh("empty"), slo_s=30)
    assert (stats["available"], stats["locked"], stats["lag_s"], stats["drain_eta_s"]) == \
        (0, 0, None, 0.0)
    assert (stats["slo_breach_in_s"], stats["consumers_needed"]) == (None, None)


def test_bad_arguments(client: shardq.Client) -> None:
    with pytest.raises(shardq.InvalidTask):
        client.stats("_bad")
    for slo in (0, -1, float("nan")):
        with pytest.raises(shardq.InvalidTask):
            client.stats("q", slo_s=slo)


def test_lag_leaves_out_the_priority_head_start(timed: shardq.Client,
                                                clock: shardq.ManualClock) -> None:
    timed.enqueue("lag", {"plain": True})
    clock.advance(100)
    timed.enqueue("lag", {"urgent": True}, priority=300)
    stats = timed.stats("lag")
    # The urgent task is first in line (300 s of head start) but waited no time at all;
    # the plain one has waited 100 s.
    assert stats["oldest_eligible_age_s"] == pytest.approx(300, abs=0.01)
    assert stats["lag_s"] == pytest.approx(100, abs=0.01)
    assert "lag_s" in stats["exact"]
    # A task put back in line waits from its new place: no head start to leave out.
    plain, urgent = sorted(claim_all(timed, "lag"), key=lambda t: "urgent" in t.payload)
    timed.ack(plain)
    timed.release(urgent)
    clock.advance(500)
    assert timed.stats("lag")["lag_s"] == pytest.approx(500, abs=0.01)


def test_rates_count_enqueues_and_acks(timed: shardq.Client,
                                       clock: shardq.ManualClock) -> None:
    queue = fresh("rates")
    clock.advance(0.5)  # half way through a second, as work starts on average
    for n in range(10):
        timed.enqueue(queue, {"n": n})
    timed.enqueue_many(queue, [{"n": n} for n in range(40)])
    timed.enqueue_many(queue, [{"n": n} for n in range(5)], keys=[f"k{n}" for n in range(5)])
    clock.advance(10)
    timed.ack_many(claim_all(timed, queue, most=20))
    stats = timed.stats(queue)
    # Counted from the first second with a count: 10 s.
    assert stats["enqueued_per_s"] == pytest.approx(55 / 10)
    assert stats["completed_per_s"] == pytest.approx(20 / 10)
    assert stats["drain_eta_s"] is None  # arrivals outpace completions
    clock.advance(61)
    later = timed.stats(queue)
    assert (later["enqueued_per_s"], later["completed_per_s"]) == (0, 0)


def test_drain_eta_from_the_net_rate(timed: shardq.Client, clock: shardq.ManualClock) -> None:
    queue = fresh("drain")
    timed.enqueue_many(queue, [{"n": n} for n in range(1500)])
    clock.advance(60.5)  # the enqueues fall out of the rate window
    for _ in range(10):  # 100 a second for 10 s
        timed.ack_many(claim_all(timed, queue, most=100))
        clock.advance(1)
    stats = timed.stats(queue, slo_s=60)
    assert stats["completed_per_s"] == pytest.approx(100, rel=0.01)
    assert stats["enqueued_per_s"] == 0
    assert stats["available"] == 500
    assert stats["drain_eta_s"] == pytest.approx(5, rel=0.01)
    # The tasks left have waited 70 s: a 60 s budget is already broken ...
    assert stats["slo_breach_in_s"] == 0
    assert stats["consumers_needed"] is None  # nothing in flight: no per-consumer rate
    # ... and a 100 s budget is kept: they are done in 5 s.
    assert timed.stats(queue, slo_s=100)["slo_breach_in_s"] is None


def test_forecasts() -> None:
    assert forecast.drain_eta_s(0, 5, 1) == 0.0
    assert forecast.drain_eta_s(100, 5, 15) == 10.0
    assert forecast.drain_eta_s(100, 15, 15) is None
    # Nothing completes: the oldest task keeps ageing.
    assert forecast.slo_breach_in_s(20, 10, 0, 0, 60) == 40
    assert forecast.slo_breach_in_s(70, 10, 1, 1, 60) == 0.0
    # Keeping up with a short line: no breach.
    assert forecast.slo_breach_in_s(1, 10, 10, 10, 60) is None
    # Arrivals outpace completions: the line grows until a new task waits 60 s.
    # 100 waiting at 10/s done, 12/s arriving: 600 waiting in (600-100)/2 = 250 s, and
    # that task is the oldest 60 s later.
    assert forecast.slo_breach_in_s(1, 100, 12, 10, 60) == pytest.approx(310)
    # 20 tasks in flight complete 10/s (0.5/s each); 12/s arrive: 24 consumers.
    assert forecast.consumers_needed(100, 20, 12, 10, 60) == 24
    # 1200 waiting must be served within 60 s: 20/s, 40 consumers.
    assert forecast.consumers_needed(1200, 20, 12, 10, 60) == 40
    assert forecast.consumers_needed(1200, 0, 12, 10, 60) is None


def test_queues_lists_every_queue(client: shardq.Client) -> None:
    busy, paused, emptied = fresh("busy"), fresh("paused"), fresh("emptied")
    client.enqueue_many(busy, [{"n": n} for n in range(3)])
    client.pause(paused, create=True)
    client.enqueue(emptied, {})
    client.ack_many(claim_all(client, emptied))
    everything = client.queues()
    assert everything[busy]["available"] == 3
    assert everything[paused]["paused"] is True
    assert everything[emptied]["available"] == 0  # still listed: it was active
    assert everything[emptied]["completed_per_s"] > 0
    client.resume(paused)


def test_large_counts_are_estimated_within_the_stated_error(databases: Databases) -> None:
    # One bucket: a count's cap is then 4,096 tasks, passed here by the due ones only.
    url = databases.create(bucket_count=1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO shardq.tasks (queue, payload, exec_time) "
                     "SELECT 'big', '{}', now() - g * interval '1 ms' "
                     "FROM generate_series(1, 30000) AS g")
        conn.execute("INSERT INTO shardq.tasks (queue, payload, exec_time) "
                     "SELECT 'big', '{}', now() + interval '1 hour' "
                     "FROM generate_series(1, 700) AS g")
    with shardq.Client(url) as client:
        stats, second = client.stats("big"), client.stats("big")
    assert "available" not in stats["exact"]
    assert within_stated_error(30000, "available", stats, second)
    assert stats["error"]["available"] < 0.1 * 30000
    assert stats["available"] >= 4096  # never below what was counted
    assert stats["scheduled"] == 700
    assert "scheduled" in stats["exact"]


def test_the_smallest_id_sample_holds_for_random_ids(databases: Databases) -> None:
    """CockroachDB's sample (random ids there): the smallest ids of a table written
    with random ids, run here on PostgreSQL, estimates within its stated error.  The ids
    are a hash of the row's number: uniform as random ones, and the same on every run
    (with ids drawn afresh, a three-standard-error bound fails one run in a few hundred)."""
    url = databases.create(bucket_count=1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO shardq.tasks (id, queue, payload, exec_time) SELECT "
                     "md5(g::text)::uuid, "
                     "CASE WHEN g % 4 = 0 THEN 'few' ELSE 'many' END, '{}', now() "
                     "FROM generate_series(1, 40000) AS g")
    with shardq.Client(url) as client:
        st = client.statements
        sample = st.perform(plan(lambda: samples.id_sample(st)))
    assert sample.sampled == samples.SAMPLE_ROWS
    for queue, real in (("many", 30_000), ("few", 10_000)):
        estimate, error = samples.estimate(sample, queue, "available")
        assert abs(estimate - real) <= error, (queue, estimate, error)
        assert 0 < error < 0.15 * real


def test_estimates_hold_for_time_ordered_ids(databases: Databases) -> None:
    """Tasks enqueued by the client carry time-ordered ids, so the smallest ids are the
    oldest tasks: the sample must be of the table, not of its oldest tasks.  Here the
    oldest 25,000 tasks belong to another queue, and the newest 30,000 to 'big'."""
    url = databases.create(bucket_count=1)
    with shardq.Client(url) as client:
        for start in range(0, 25_000, 1000):
            client.enqueue_many("old", [{"n": n} for n in range(start, start + 1000)])
        for start in range(0, 30_000, 1000):
            client.enqueue_many("big", [{"n": n} for n in range(start, start + 1000)])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE shardq.tasks")
        figures, again = client.queues(), client.queues()
    for queue, real in (("old", 25_000), ("big", 30_000)):
        stats = figures[queue]
        assert "available" not in stats["exact"]
        assert within_stated_error(real, "available", stats, again[queue]), \
            (queue, stats, again[queue])
        assert stats["error"]["available"] < 0.25 * real


def test_sampler_gauges_follow_the_queue(client: shardq.Client) -> None:
    queue = fresh("gauges")
    metrics = Metrics()
    sampler = StatsSampler(client, [queue], metrics, slo_s=60)

    def gauge(name: str) -> Any:
        return metrics.registry.get_sample_value(name, {"queue": queue})

    client.enqueue_many(queue, [{"n": n} for n in range(12)])
    assert sampler.run_once() == 1
    assert gauge("shardq_queue_available") == 12
    assert gauge("shardq_queue_paused") == 0
    assert gauge("shardq_queue_slo_seconds") == 60
    assert gauge("shardq_queue_drain_eta_seconds") is None  # not draining: absent
    client.ack_many(claim_all(client, queue))
    client.pause(queue)
    sampler.run_once()
    # The depth follows the queue down to zero, and the drained queue's ETA is 0.
    assert gauge("shardq_queue_available") == 0
    assert gauge("shardq_queue_oldest_eligible_seconds") == 0
    assert gauge("shardq_queue_drain_eta_seconds") == 0
    assert gauge("shardq_queue_completed_per_second") > 0
    assert gauge("shardq_queue_paused") == 1
    client.resume(queue)


def test_a_failed_sample_removes_the_gauges(databases: Databases) -> None:
    url = databases.create()
    metrics = Metrics()
    with shardq.Client(url) as client:
        client.enqueue("q", {})
        sampler = StatsSampler(client, ["q"], metrics)
        sampler.run_once()
        assert metrics.registry.get_sample_value("shardq_queue_available", {"queue": "q"}) == 1
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE shardq.throughput RENAME TO throughput_gone")
        try:
            with pytest.raises(shardq.ShardqError):
                sampler.run_once()
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ALTER TABLE shardq.throughput_gone RENAME TO throughput")
    assert metrics.registry.get_sample_value("shardq_queue_available", {"queue": "q"}) is None


def test_cli_stats_json_and_table(dsn: str, client: shardq.Client) -> None:
    queue = fresh("cli")
    client.enqueue_many(queue, [{"n": n} for n in range(4)])
    one = shardq_cli("stats", queue, "--json", "--slo-s", "60", "--dsn", dsn)
    figures = json.loads(one.stdout)
    assert (figures["queue"], figures["available"], figures["slo_s"]) == (queue, 4, 60)
    every = json.loads(shardq_cli("stats", "--json", "--dsn", dsn).stdout)
    assert every[queue]["available"] == 4
    table = shardq_cli("stats", "--dsn", dsn).stdout
    assert queue in table
    assert "avail" in table
    assert query(dsn, "SELECT count(*) FROM shardq.tasks WHERE queue = %s", (queue,)) == [(4,)]


def test_a_task_that_dies_on_its_first_attempt_was_never_requeued(
        client: shardq.Client) -> None:
    queue = fresh("dies")
    once = client.enqueue(queue, {}, max_attempts=1)
    twice = client.enqueue(queue, {}, max_attempts=2)
    client.nack_many(claim_all(client, queue), ["boom", "boom"], retry_in_s=[0, 0])
    client.nack_many(claim_all(client, queue), ["boom again"], retry_in_s=[0])
    first, second = client.get(once), client.get(twice)
    assert first is not None
    assert second is not None
    assert (first.status, first.times_requeued, first.last_requeued_at) == ("dead", 0, None)
    assert (second.status, second.times_requeued) == ("dead", 1)  # one retry, then death
