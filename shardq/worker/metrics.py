"""Prometheus metrics of one worker, in a registry of its own."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from shardq.queuestats import QueueStats

# Queue figures sampled by one worker of a group (see StatsSampler): gauge name, help,
# and the QueueStats field it shows.  A field that is None (no forecast) removes the
# queue's series, so that a stale value is never shown.
QUEUE_GAUGES = (
    ("shardq_queue_scheduled", "Tasks waiting for a later time", "scheduled"),
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
        self.lease_lost = Counter("shardq_lease_lost", "Tasks whose lease was lost while held",
                                  ["queue"], registry=r)
        self.duration = Histogram("shardq_handler_seconds", "Handler run time", ["queue"],
                                  registry=r)
        self.batch_fill = Histogram(
            "shardq_claim_batch_fill", "Claimed tasks / claim limit, for non-empty claims",
            buckets=(0.1, 0.25, 0.5, 0.75, 0.9, 1.0), registry=r)
        self.depth = Gauge("shardq_queue_available", "Eligible tasks waiting", ["queue"],
                           registry=r)
        self.oldest = Gauge("shardq_queue_oldest_eligible_seconds",
                            "Age of the oldest eligible task", ["queue"], registry=r)
        self.queue_gauges = {field: Gauge(name, text, ["queue"], registry=r)
                             for name, text, field in QUEUE_GAUGES}
        self.sampled_at = Gauge("shardq_queue_stats_timestamp_seconds",
                                "When the queue figures were last sampled (Unix time)",
                                ["queue"], registry=r)
        self.janitor_pass = Gauge("shardq_janitor_last_pass_timestamp_seconds",
                                  "When this process's janitor last finished a pass "
                                  "(Unix time)", registry=r)
        self.rescued = Counter("shardq_janitor_rescued", "Expired leases put back by the "
                               "janitor", registry=r)

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
        self.sampled_at.labels(queue).set(time.time())

    def forget(self, queue: str) -> None:
        """Remove one queue's figures (its sample failed: better absent than stale)."""
        for gauge in (self.depth, self.oldest, self.sampled_at, *self.queue_gauges.values()):
            if (queue,) in _series(gauge):
                gauge.remove(queue)

    def serve(self, port: int, host: str) -> None:
        """Serve ``/metrics`` over HTTP in a daemon thread."""
        start_http_server(port, addr=host, registry=self.registry)


def _series(gauge: Gauge) -> set[tuple[str, ...]]:
    """The label values a gauge has series for."""
    return {tuple(sample.labels.values()) for metric in gauge.collect()
            for sample in metric.samples}
