"""A queue's figures in bounded time: counts by state, recent rates, lag and forecasts.

Counts are read per bucket with a cap (``sql/stats.sql``): at most :data:`COUNT_BUDGET`
index entries per state over all buckets, so the cost does not grow with the queue.
A figure whose every bucket stayed under the cap is exact.  Beyond the cap it is
estimated from a random sample of the table (:mod:`shardq.ops.samples`) and reported
with its error, three standard errors (about 99.7 % of estimates fall within it).  The
estimate is never below the capped count, which is a sure lower bound.  Parked durable
tasks are counted apart, and taken out of the scheduled ones (see
:mod:`shardq.ops.parkedstats`).

Rates come from ``shardq.throughput``, which the enqueue and ack statements add to
(``sql/throughput_add.sql``): tasks enqueued and completed (acked) in the last minute.

A queue's limits (:mod:`shardq.ops.flow`) come with its figures, read for every
queue at once: each limit, how much of it is in use, and whether it is *saturated*
(``max_running`` full while due tasks wait).

Each read is a :class:`~shardq.core.plan.Plan` (its arguments checked when it is made):
:func:`stats` and :func:`queues` give :class:`QueueStats`, :func:`stats_dict` and
:func:`queues_dict` the same figures as JSON-ready dicts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.maths import forecast
from shardq.ops import control, parkedstats
from shardq.ops.flow import Control, controls
from shardq.ops.rates import Rate
from shardq.ops.samples import Sample, estimate, sample

COUNT_BUDGET = 16384  # index entries one state's count reads at most, over all buckets
MIN_BUCKET_CAP = 16
HEAD_ROWS = 32  # tasks in line read per bucket for the lag (the literal of sql/stats.sql)
STATES = ("available", "scheduled", "parked", "locked", "dead")
COUNTED = ("available", "later", "locked", "dead")  # the counts of sql/stats.sql, in order


@dataclass(frozen=True)
class QueueStats:
    """One queue's figures.  ``exact`` names the exact figures; ``error`` gives the
    others' error (± tasks, three standard errors)."""

    queue: str
    available: int
    """Tasks due and waiting."""
    scheduled: int
    """Tasks waiting for a later time (parked ones apart)."""
    parked: int
    """Durable tasks parked: waiting for a sleep, an event or their children (a woken
    task is available)."""
    locked: int
    """Tasks held by workers (running, or prefetched)."""
    dead: int
    """Dead letters."""
    oldest_eligible_age_s: float | None
    """Seconds since the exec_time of the first task in line (None: none is due)."""
    lag_s: float | None
    """Seconds the longest-waiting due task has waited since its place in line, without
    the priority head start it got at enqueue (None: none is due)."""
    enqueued_per_s: float
    """Tasks enqueued per second over the last minute."""
    completed_per_s: float
    """Tasks completed (acked) per second over the last minute."""
    drain_eta_s: float | None
    """Seconds until the due and running tasks are done at the net completion rate
    (None: the queue is not draining)."""
    paused: bool
    """Whether the queue is paused (a pause whose ``paused_until`` passed has ended)."""
    exact: tuple[str, ...] = ()
    error: dict[str, int] = field(default_factory=dict)
    slo_s: float | None = None
    """The process-by budget the forecasts below were made for."""
    slo_breach_in_s: float | None = None
    """Seconds until the oldest task has waited ``slo_s`` (0: it has; None: not at
    the current rates)."""
    consumers_needed: int | None = None
    """Consumers (tasks in flight) needed to stay within ``slo_s`` at the measured
    per-consumer rate (None: no rate measured)."""
    max_running: int | None = None
    """The queue's limit on tasks running at once across every worker (None: none)."""
    running: int | None = None
    """Tasks holding a slot of ``max_running`` now (None: no such limit)."""
    max_running_per_group: int | None = None
    """The limit on tasks of one group running at once (None: none)."""
    running_most_group: int | None = None
    """The most tasks any one group runs now (None: no per-group limit)."""
    rate: Rate | None = None
    """The queue's claim rate (None: none)."""
    rate_per_group: Rate | None = None
    """Each group's claim rate (None: none)."""
    saturated: bool = False
    """Whether ``max_running`` is full while due tasks wait: the limit, not the
    workers, holds them back."""
    parked_by: dict[str, int] = field(default_factory=dict)
    """``parked`` by reason: ``sleep``, ``event`` and ``children``."""
    paused_until: datetime | None = None
    """When a paused queue's pause ends by itself (None: not paused, or paused until
    resumed)."""

    @property
    def limited(self) -> bool:
        """Whether any limit is set."""
        return any(v is not None for v in (self.max_running, self.max_running_per_group,
                                           self.rate, self.rate_per_group))

    @property
    def rate_per_s(self) -> float | None:
        """``rate`` in claims per second (None: no rate)."""
        return self.rate.count / self.rate.period_s if self.rate else None

    @property
    def rate_per_group_per_s(self) -> float | None:
        """``rate_per_group`` in claims per second (None: no such rate)."""
        return self.rate_per_group.count / self.rate_per_group.period_s \
            if self.rate_per_group else None

    def as_dict(self) -> dict[str, Any]:
        """The figures as a JSON-ready dict (``exact`` a list; no SLO keys without one;
        a rate as ``{"count", "period_s", "burst"}``; ``paused_until`` as ISO 8601 text)."""
        out = asdict(self)
        out["exact"] = list(self.exact)
        out["paused_until"] = self.paused_until.isoformat() if self.paused_until else None
        if self.slo_s is None:
            for name in ("slo_s", "slo_breach_in_s", "consumers_needed"):
                del out[name]
        return out


def stats(st: Statements, queue: str, slo_s: float | None = None) -> Plan[QueueStats]:
    """One queue's figures (see the module's docstring)."""
    figures = many(st, [queue], slo_s)

    def steps() -> Steps[QueueStats]:
        return (yield from figures.steps())[0]

    return plan(steps)


def queues(st: Statements, slo_s: float | None = None) -> Plan[list[QueueStats]]:
    """The figures of every queue with tasks, paused, or active in the last hour."""
    slo = _slo(slo_s)

    def steps() -> Steps[list[QueueStats]]:
        names = yield from control.names(st)  # the statement control's checks use too
        return (yield from _many(st, names, slo))

    return plan(steps)


def many(st: Statements, names: Iterable[str], slo_s: float | None = None
         ) -> Plan[list[QueueStats]]:
    """The figures of each queue of ``names``; the table is sampled at most once."""
    slo = _slo(slo_s)
    checked = [validate.queue_name(n) for n in names]
    return plan(lambda: _many(st, checked, slo))


def stats_dict(st: Statements, queue: str, slo_s: float | None = None
               ) -> Plan[dict[str, Any]]:
    """:func:`stats` as a JSON-ready dict (see :meth:`QueueStats.as_dict`)."""
    figures = stats(st, queue, slo_s)

    def steps() -> Steps[dict[str, Any]]:
        return (yield from figures.steps()).as_dict()

    return plan(steps)


def queues_dict(st: Statements, slo_s: float | None = None
                ) -> Plan[dict[str, dict[str, Any]]]:
    """:func:`queues` as JSON-ready dicts by queue name."""
    figures = queues(st, slo_s)

    def steps() -> Steps[dict[str, dict[str, Any]]]:
        return {q.queue: q.as_dict() for q in (yield from figures.steps())}

    return plan(steps)


def _many(st: Statements, names: list[str], slo: float | None) -> Steps[list[QueueStats]]:
    cap = max(MIN_BUCKET_CAP, COUNT_BUDGET // st.bucket_count)
    query = st.query("stats", cap)
    paused = yield from control.pauses(st).steps()
    found = (yield from controls(st, names).steps()) if names else {}
    rates = {row[0]: row[1:] for row in (yield st.fetch("stats_rates", {"queue": None}))}
    parked = (yield from parkedstats.read(st)) if names else parkedstats.NONE
    table: Sample | None = None
    out = []
    for name in names:
        rows = yield st.fetch(query, {"queue": name, "bucket_count": st.bucket_count})
        capped = {s for i, s in enumerate(COUNTED) if any(r[1 + i] >= cap for r in rows)}
        if (capped or parked.capped) and table is None:
            table = yield from sample(st)
        lag_read_whole = {r[0] for r in rows if r[8] < HEAD_ROWS}
        figures = _figures(name, rows, capped, table, parked, rates.get(name),
                           name in paused, slo, lag_read_whole)
        if name in paused:
            figures = replace(figures, paused_until=paused[name].until)
        out.append(_limited(figures, found.get(name)))
    return out


def _limited(figures: QueueStats, found: Control | None) -> QueueStats:
    """``figures`` with the queue's limits and how much of each is in use."""
    if found is None or not found.limits.any:
        return figures
    limits = found.limits
    full = limits.max_running is not None and found.running >= limits.max_running
    return replace(
        figures, max_running=limits.max_running,
        running=found.running if limits.max_running is not None else None,
        max_running_per_group=limits.max_running_per_group,
        running_most_group=(found.running_most_group
                            if limits.max_running_per_group is not None else None),
        rate=limits.rate, rate_per_group=limits.rate_per_group,
        saturated=full and figures.available > 0)


def _slo(slo_s: float | None) -> float | None:
    if slo_s is None:
        return None
    value = validate.seconds("slo_s", slo_s)
    if not value:
        raise InvalidTask("slo_s must be positive")
    return value


def _figures(queue: str, rows: list[tuple[Any, ...]], capped: set[str], table: Sample | None,
             parked: parkedstats.Parked, rate: tuple[Any, ...] | None, paused: bool,
             slo_s: float | None, read_whole: set[int]) -> QueueStats:
    counted = {s: sum(r[1 + i] for r in rows) for i, s in enumerate(COUNTED)}
    counts = {s: counted[s] for s in ("available", "locked", "dead")}
    error: dict[str, int] = {}
    if table is not None:  # sampled because a count reached its cap
        for state in sorted(capped & set(counts)):
            sampled, error[state] = estimate(table, queue, state)
            counts[state] = max(counts[state], sampled)  # the capped count is a minimum
    split = parked.split(queue, counted["later"], "later" not in capped, table)
    counts.update(scheduled=split.scheduled, parked=split.parked)
    error.update(split.error)
    ages = [r[5] for r in rows if r[5] is not None]
    lags = [r[6] for r in rows if r[6] is not None]
    lag = max(0.0, max(lags)) if lags else None
    # The due tasks of a bucket after the first HEAD_ROWS waited no longer than the
    # last of those, and a task's lag is never more than its wait: the lag is exact
    # unless that last wait is longer than the lag found.
    lag_exact = all(r[0] in read_whole or lag is None or r[7] <= lag for r in rows)
    enqueued, completed, window_s = rate if rate else (0, 0, 1.0)
    enq_s, comp_s = enqueued / window_s, completed / window_s
    waiting = counts["available"] + counts["locked"]
    exact = tuple(s for s in STATES if s not in error) + ("oldest_eligible_age_s",) \
        + (("lag_s",) if lag_exact else ())
    figures = QueueStats(
        queue=queue, **counts, oldest_eligible_age_s=max(ages) if ages else None, lag_s=lag,
        enqueued_per_s=enq_s, completed_per_s=comp_s,
        drain_eta_s=forecast.drain_eta_s(waiting, enq_s, comp_s), paused=paused,
        exact=exact, error=error, parked_by=split.by_reason)
    if slo_s is None:
        return figures
    return replace(
        figures, slo_s=slo_s,
        slo_breach_in_s=forecast.slo_breach_in_s(lag, counts["available"], enq_s, comp_s,
                                                 slo_s),
        consumers_needed=forecast.consumers_needed(counts["available"], counts["locked"],
                                                   enq_s, comp_s, slo_s))
