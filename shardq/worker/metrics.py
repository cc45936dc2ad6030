"""Prometheus metrics of one worker, in a registry of its own."""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from shardq.ops.parkedstats import REASONS
from shardq.ops.queuestats import QueueStats

# Queue figures sampled by one worker of a group (see StatsSampler): gauge name, help,
# and the QueueStats field it shows.  A field that is None (no forecast) removes the
# queue's series, so that a stale value is never shown.
QUEUE_GAUGES = (
    ("shardq_queue_scheduled", "Tasks waiting for a later time (parked ones apart)",
     "scheduled"),
    ("shardq_queue_locked", "Tasks held by workers", "locked"),
    ("shardq_queue_dead", "Dead letters", "dead"),
    ("shardq_queue_lag_seconds", "How long the longest-waiting due task has waited since "
     "its place in line, without priority head start", "lag_s"),
    ("shardq_queue_enqueued_per_second", "Tasks enqueued per second, last minute",
     "enqueued_per_s"),
    ("shardq_queue_completed_per_second", "Tasks completed per second, last minute",
     "completed_per_s"),
    ("shardq_queue_drain_eta_seconds", "Seconds until the due and running tasks are done at "
     "the net completion rate (absent: not draining)", "drain_eta_s"),
    ("shardq_queue_paused", "1 while the queue is paused", "paused"),
    ("shardq_queue_slo_seconds", "The process-by budget the forecasts are made for", "slo_s"),
    ("shardq_queue_slo_breach_in_seconds", "Seconds until the oldest task has waited the "
     "budget (0: it has; absent: not at the current rates)", "slo_breach_in_s"),
    ("shardq_queue_consumers_needed", "Tasks in flight at once needed to stay within the "
     "budget at the measured per-consumer rate", "consumers_needed"),
    # Flow control (see shardq.ops.flow): each limit (absent: none set) and its use.
    ("shardq_queue_max_running", "The queue's limit on tasks running at once across every "
     "worker (absent: none)", "max_running"),
    ("shardq_queue_limit_running", "Tasks holding a slot of the queue's max_running "
     "(absent: no such limit)", "running"),
    ("shardq_queue_max_running_per_group", "The limit on tasks of one group running at once "
     "(absent: none)", "max_running_per_group"),
    ("shardq_queue_running_most_group", "The most tasks any one group runs now (absent: no "
     "per-group limit)", "running_most_group"),
    ("shardq_queue_rate_per_second", "The queue's claim rate limit, per second (absent: "
     "none)", "rate_per_s"),
    ("shardq_queue_rate_per_group_per_second", "Each group's claim rate limit, per second "
     "(absent: none)", "rate_per_group_per_s"),
    ("shardq_queue_limit_saturated", "1 while max_running is full and due tasks wait",
     "saturated"),
)


class Metrics:
    """Counters, histograms and gauges the worker updates as it runs."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.claimed = Counter("shardq_tasks_claimed", "Tasks claimed", ["queue"], registry=r)
        self.acked = Counter("shardq_tasks_acked", "Tasks finished and deleted", ["queue"],
                             registry=r)
        self.failed = Counter("shardq_tasks_failed", "Handler failures put back for retry",
                              ["queue"], registry=r)
        self.dead = Counter("shardq_tasks_dead", "Tasks sent to the dead letters", ["queue"],
                            registry=r)
        self.parked = Counter("shardq_tasks_parks", "Durable tasks parked (a sleep, an event "
                              "or children to wait for): not an attempt", ["queue", "reason"],
                              registry=r)
        self.lease_lost = Counter("shardq_lease_lost", "Tasks whose lease was lost while held",
                                  ["queue"], registry=r)
        self.durations = Durations("shardq_handler_seconds", "Handler run time", registry=r)
        self.batch_fill = Histogram(
            "shardq_claim_batch_fill", "Claimed tasks / claim limit, for non-empty claims",
            buckets=(0.1, 0.25, 0.5, 0.75, 0.9, 1.0), registry=r)
        self.limit_wait = Histogram(
            "shardq_limit_wait_seconds",
            "From enqueue to claim, for tasks of queues with limits or groups", ["queue"],
            buckets=(0.01, 0.1, 0.5, 1, 5, 30, 60, 300, 1800), registry=r)
        self.depth = Gauge("shardq_queue_available", "Eligible tasks waiting", ["queue"],
                           registry=r)
        self.oldest = Gauge("shardq_queue_oldest_eligible_seconds",
                            "Age of the oldest eligible task", ["queue"], registry=r)
        self.queue_gauges = {field: Gauge(name, text, ["queue"], registry=r)
                             for name, text, field in QUEUE_GAUGES}
        self.queue_parked = Gauge("shardq_queue_parked", "Durable tasks parked, by what they "
                                  "wait for (reason: sleep, event, children)",
                                  ["queue", "reason"], registry=r)
        self.sampled_at = Gauge("shardq_queue_stats_timestamp_seconds",
                                "When the queue figures were last sampled (Unix time)",
                                ["queue"], registry=r)
        self.janitor_pass = Gauge("shardq_janitor_last_pass_timestamp_seconds",
                                  "When this process's janitor last finished a pass "
                                  "(Unix time)", registry=r)
        self.rescued = Counter("shardq_janitor_rescued", "Expired leases put back by the "
                               "janitor", registry=r)
        # What this process's resolver (and janitor) folded in of flows' events.
        self.flow_events = Counter("shardq_flow_events_folded", "Events of flows' tasks "
                                   "(succeeded, dead, retried, dropped, cancelled) folded in",
                                   registry=r)
        self.flow_released = Counter("shardq_flow_tasks_released", "Tasks of flows released: "
                                     "every task they waited for succeeded", registry=r)
        self.flow_cancelled = Counter("shardq_flow_tasks_cancelled", "Tasks of flows cancelled "
                                      "because a task they waited for will never succeed",
                                      registry=r)
        self.flows_finished = Counter("shardq_flows_finished", "Flows that ended: no task "
                                      "left", registry=r)

    def folded(self, events: int, released: int, cancelled: int, finished: int) -> None:
        """Count what folds of flows' events did."""
        for counter, n in ((self.flow_events, events), (self.flow_released, released),
                           (self.flow_cancelled, cancelled), (self.flows_finished, finished)):
            if n:
                counter.inc(n)

    def record(self, figures: QueueStats) -> None:
        """Show one queue's figures."""
        queue = figures.queue
        self.depth.labels(queue).set(figures.available)
        self.oldest.labels(queue).set(figures.oldest_eligible_age_s or 0)
        for field, gauge in self.queue_gauges.items():
            value = getattr(figures, field)
            if value is None:
                if (queue,) in _series(gauge):
                    gauge.remove(queue)
            else:
                gauge.labels(queue).set(float(value))
        for reason in REASONS:
            self.queue_parked.labels(queue, reason).set(figures.parked_by.get(reason, 0))
        self.sampled_at.labels(queue).set(time.time())

    def forget(self, queue: str) -> None:
        """Remove one queue's figures (its sample failed: better absent than stale)."""
        for gauge in (self.depth, self.oldest, self.sampled_at, *self.queue_gauges.values()):
            if (queue,) in _series(gauge):
                gauge.remove(queue)
        for reason in REASONS:
            if (queue, reason) in _series(self.queue_parked):
                self.queue_parked.remove(queue, reason)

    def serve(self, port: int, host: str) -> None:
        """Serve ``/metrics`` over HTTP in a daemon thread."""
        start_http_server(port, addr=host, registry=self.registry)


class Durations(Collector):
    """A histogram of handler run times per queue, recorded without a lock.

    Every task's run is timed, and prometheus_client's Histogram takes two locks and
    walks its buckets in Python for each observation: about a fifth of the hand-off of
    a no-op task.  Here each handler thread records into a :class:`DurationRecorder` of
    its own (one writer per recorder, so no increment is lost), and a scrape adds the
    recorders up.  A scrape taken while a thread records may show that run in the sum
    but not yet in its bucket and count.
    """

    BOUNDS = Histogram.DEFAULT_BUCKETS  # ends with +Inf: every duration has a bucket
    LE = tuple("+Inf" if b == float("inf") else repr(float(b)) for b in BOUNDS)  # as Histogram's

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry) -> None:
        self.name, self.documentation = name, documentation
        self._recorders: list[DurationRecorder] = []
        self._lock = threading.Lock()
        registry.register(self)

    def recorder(self) -> DurationRecorder:
        """A new recorder, for one thread to write to."""
        made = DurationRecorder(self.BOUNDS)
        with self._lock:
            self._recorders.append(made)
        return made

    def collect(self) -> Iterator[HistogramMetricFamily]:
        """The histogram, summed over the recorders (called by a scrape)."""
        with self._lock:
            recorders = list(self._recorders)
        totals: dict[str, list[float]] = {}
        for recorder in recorders:
            for queue, counts in list(recorder.queues.items()):
                total = totals.setdefault(queue, [0.0] * len(counts))
                for i, value in enumerate(list(counts)):  # a copy: the writer goes on
                    total[i] += value
        family = HistogramMetricFamily(self.name, self.documentation, labels=["queue"])
        for queue, total in sorted(totals.items()):
            cumulative, buckets = 0.0, []
            for le, count in zip(self.LE, total[1:], strict=True):
                cumulative += count
                buckets.append((le, cumulative))
            family.add_metric([queue], buckets, sum_value=total[0])
        yield family


class DurationRecorder:
    """One thread's handler run times: per queue, the sum then a count per bucket."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.queues: dict[str, list[float]] = {}

    def observe(self, queue: str, seconds: float) -> None:
        """Record one run of ``seconds`` on ``queue`` (from the owning thread only)."""
        counts = self.queues.get(queue)
        if counts is None:
            counts = self.queues[queue] = [0.0] * (len(self.bounds) + 1)
        counts[0] += seconds
        counts[1 + bisect_left(self.bounds, seconds)] += 1  # buckets count values <= bound


def _series(gauge: Gauge) -> set[tuple[str, ...]]:
    """The label values a gauge has series for."""
    return {tuple(sample.labels.values()) for metric in gauge.collect()
            for sample in metric.samples}
