"""Prometheus metrics of one worker, in a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


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

    def serve(self, port: int, host: str) -> None:
        """Serve ``/metrics`` over HTTP in a daemon thread."""
        start_http_server(port, addr=host, registry=self.registry)
