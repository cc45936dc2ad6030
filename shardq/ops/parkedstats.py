"""Parked durable tasks in the queue figures (:mod:`shardq.ops.queuestats`).

A parked task is ``available`` and not yet due, as a scheduled task is: the capped
count of ``sql/stats.sql`` counts both.  The parked ones are counted apart, by reason,
through the partial index ``tasks_parked`` (``sql/stats_parked.sql``): at most
:data:`PARKED_BUDGET` entries per reason, for every queue at once (the index does not
hold the queue).  A queue's scheduled tasks are then the not-yet-due ones less its
parked ones.  A reason whose read reached the cap is estimated from the table's sample
(:mod:`shardq.ops.samples`), and so are the scheduled tasks of a queue whose count of
either is not exact.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from shardq.core.plan import Steps
from shardq.core.statements import Statements
from shardq.ops.samples import Sample, estimate

REASONS = ("sleep", "event", "children")
PARKED_BUDGET = 4096  # entries of tasks_parked read per reason, each looked up in the table


@dataclass(frozen=True)
class Split:
    """One queue's tasks not yet due, split: ``scheduled``, ``parked`` (and ``by_reason``),
    and the error of those of the two that are estimated."""

    scheduled: int
    parked: int
    by_reason: dict[str, int]
    error: dict[str, int]


@dataclass(frozen=True)
class Parked:
    """Parked tasks not yet due, by queue and reason, as read; ``capped`` names the
    reasons whose read reached its cap (their counts are lower bounds)."""

    counts: dict[tuple[str, str], int]
    capped: frozenset[str]

    def split(self, queue: str, later: int, later_exact: bool,
              sample: Sample | None) -> Split:
        """``queue``'s ``later`` tasks not yet due (a sure lower bound, exact when
        ``later_exact``) split into scheduled and parked; ``sample`` is needed when a
        reason is capped or ``later`` is not exact."""
        by_reason, error = {}, {}
        parked_error = 0
        for reason in REASONS:
            n = self.counts.get((queue, reason), 0)
            if reason in self.capped:
                assert sample is not None
                sampled, spread = estimate(sample, queue, f"parked_{reason}")
                n, parked_error = max(n, sampled), parked_error + spread
                if later_exact:  # never more than the tasks not yet due
                    n = min(n, later)
            by_reason[reason] = n
        parked = sum(by_reason.values())
        if self.capped:
            error["parked"] = parked_error
        if later_exact and not self.capped:
            return Split(max(0, later - parked), parked, by_reason, error)
        assert sample is not None
        scheduled, error["scheduled"] = estimate(sample, queue, "scheduled")
        # The count less the exact parked tasks is a sure lower bound; the exact count of
        # tasks not yet due, an upper one.
        scheduled = max(scheduled, later - parked if not self.capped else 0)
        if later_exact:
            scheduled = min(scheduled, later)
        return Split(scheduled, parked, by_reason, error)


NONE = Parked({}, frozenset())


def read(st: Statements) -> Steps[Parked]:
    """Steps (for ``yield from``) of the read of every queue's parked tasks."""
    rows = yield st.fetch(st.query("stats_parked", PARKED_BUDGET))
    counts: dict[tuple[str, str], int] = {}
    entries: Counter[str] = Counter()
    for reason, queue, n, read_ in rows:
        counts[(queue, reason)] = n
        entries[reason] += read_
    return Parked(counts, frozenset(r for r in REASONS if entries[r] >= PARKED_BUDGET))
