"""What a worker tells Prometheus about the queues: their figures, its janitor's passes and
what its flows' resolver folded in.

One process of a group samples (see :func:`shardq.worker.processes.child_config`):
the figures are the same whoever reads them, and every extra sampler is only load.
"""

from __future__ import annotations

import time

from shardq.client import Client
from shardq.core.loop import Loop
from shardq.loops.janitor import Janitor, JanitorReport
from shardq.loops.resolver import FoldReport, Resolver
from shardq.ops.queuestats import many
from shardq.worker.metrics import Metrics

STATS_INTERVAL_S = 10.0


class StatsSampler(Loop[int]):
    """Samples each queue's figures (counts, rates, lag, forecasts) into the metrics."""

    def __init__(self, client: Client, queues: list[str], metrics: Metrics,
                 slo_s: float | None = None, interval_s: float = STATS_INTERVAL_S) -> None:
        super().__init__("shardq-stats", interval_s)
        self.client, self.queues, self.metrics, self.slo_s = client, queues, metrics, slo_s

    def run_once(self) -> int:
        """One sample of every queue; returns how many were sampled."""
        try:
            st = self.client.statements
            figures = st.perform(many(st, self.queues, self.slo_s))
        except Exception:
            for queue in self.queues:  # absent, not stale: the loop logs the failure
                self.metrics.forget(queue)
            raise
        for one in figures:
            self.metrics.record(one)
        return len(figures)


class MeteredJanitor(Janitor):
    """A janitor loop that records when it finished a pass and what it rescued."""

    def __init__(self, client: Client, metrics: Metrics) -> None:
        super().__init__(client)
        self.metrics = metrics

    def run_once(self) -> JanitorReport:
        """One pass, then the gauges."""
        report = super().run_once()
        self.metrics.janitor_pass.set(time.time())
        self.metrics.rescued.inc(report.rescued + report.dead)
        # A pass folds the events its purges wrote (and any the resolver left).
        self.metrics.folded(report.flow_events, report.flow_released, report.flow_cancelled,
                            report.flows_finished)
        return report


class MeteredResolver(Resolver):
    """A flows' resolver loop that counts the events it folds in, the tasks it releases
    and cancels, and the flows that end."""

    def __init__(self, client: Client, metrics: Metrics) -> None:
        super().__init__(client.statements)
        self.metrics = metrics

    def run_once(self) -> FoldReport:
        """Fold every event there is now, then the counters."""
        report = super().run_once()
        self.metrics.folded(report.events, report.released, report.cancelled, report.finished)
        return report
