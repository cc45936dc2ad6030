"""Forecasts from a queue's counts and recent rates: drain time, SLO breach, consumers.

Pure arithmetic over the figures :mod:`shardq.ops.queuestats` reads; rates are tasks per
second over the last minute.  The model is a line served in order at the measured
completion rate ``mu`` while tasks arrive at the measured rate ``lam``: the task that
joins now waits ``waiting / mu``, the backlog grows by ``lam - mu`` a second, and the
tasks in line now are taken to have arrived evenly since the oldest of them.
"""

from __future__ import annotations

import math


def drain_eta_s(waiting: int, enqueued_per_s: float, completed_per_s: float) -> float | None:
    """Seconds until ``waiting`` tasks are done at the net completion rate; 0 when
    nothing waits, None when the queue is not draining (completions do not outpace
    arrivals)."""
    if waiting <= 0:
        return 0.0
    net = completed_per_s - enqueued_per_s
    return waiting / net if net > 0 else None


def slo_breach_in_s(lag_s: float | None, waiting: int, enqueued_per_s: float,
                    completed_per_s: float, slo_s: float) -> float | None:
    """Seconds until the oldest waiting task has waited ``slo_s``: 0 when it already
    has, None when the queue keeps every task within the budget at the current rates."""
    lag = lag_s or 0.0
    if waiting > 0 and lag >= slo_s:
        return 0.0
    if completed_per_s <= 0:
        # Nothing completes: the oldest task just keeps ageing, and so would a new one.
        if waiting > 0:
            return slo_s - lag
        return slo_s if enqueued_per_s > 0 else None
    tail_wait_s = waiting / completed_per_s  # what the task that joins now will have waited
    if waiting > 0 and tail_wait_s >= slo_s:
        # The line's age grows from the head's lag to the tail's wait while it is worked
        # through: the budget is crossed part way.
        return (slo_s - lag) * tail_wait_s / (tail_wait_s - lag)
    growth = enqueued_per_s - completed_per_s
    if growth <= 0:
        return None
    # The backlog grows until a task that joins then waits slo_s; it is the oldest
    # when it does.
    return (slo_s * completed_per_s - waiting) / growth + slo_s


def consumers_needed(waiting: int, locked: int, enqueued_per_s: float,
                     completed_per_s: float, slo_s: float) -> int | None:
    """Consumers (tasks in flight at once: busy handler slots) needed to keep up with
    arrivals and serve the task that joins now within ``slo_s``, at the measured
    per-consumer rate (completions / tasks in flight, Little's law).  None when no rate
    was measured (nothing completed, or nothing in flight)."""
    if completed_per_s <= 0 or locked <= 0:
        return None
    per_consumer = completed_per_s / locked
    needed_per_s = max(enqueued_per_s, waiting / slo_s)
    return max(1, math.ceil(needed_per_s / per_consumer - 1e-9))
