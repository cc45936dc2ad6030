"""The random sample of ``shardq.tasks`` that estimates a queue's counts past their caps
(:mod:`shardq.ops.queuestats`).  The sample is:

- on PostgreSQL, :data:`SAMPLE_PAGES` of the table's pages, evenly spaced from a
  random start and read by TID range scans (``sql/stats_pages.sql``).  Task ids are
  time-ordered there, so the smallest ids would be the oldest tasks; and tasks written
  together share pages, which the error allows for by taking pages, not rows, as the
  units sampled;
- on CockroachDB, the :data:`SAMPLE_ROWS` smallest task ids (``sql/stats_sample.sql``),
  ids being random there.

An estimate is reported with its error, three standard errors (about 99.7 % of
estimates fall within it).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from shardq.core.plan import Steps
from shardq.core.statements import Statements

SAMPLE_ROWS = 4096  # tasks the estimate samples (ids in order: random ids only)
SAMPLE_PAGES = 128  # pages of the table the estimate samples (time-ordered ids)
ERROR_SIGMAS = 3
ID_SPACE = 1 << 128
SAMPLED = ("available", "scheduled", "locked", "dead", "parked_sleep", "parked_event",
           "parked_children")
"""What the sample counts per queue (the columns of ``sql/sample_states.sql``): due,
not yet due (parked tasks apart), locked, dead, and parked on each reason."""


@dataclass
class Sample:
    """A sample of the table: ``sampled`` of its ``units`` (pages, or rows), taken at
    random; per queue and state, the sampled units' total count and the variance of
    the count between units.  All units sampled: the totals are exact."""

    units: float
    sampled: int
    totals: dict[str, dict[str, int]]
    variances: dict[str, dict[str, float]]


def sample(st: Statements) -> Steps[Sample]:
    """Steps (for ``yield from``) of the engine's sample."""
    return (yield from page_sample(st) if st.dialect.ordered_ids else id_sample(st))


def page_sample(st: Statements) -> Steps[Sample]:
    """Steps (for ``yield from``) of PostgreSQL's sample (``sql/stats_pages.sql``):
    evenly spaced pages of the table."""
    rows = yield st.fetch(st.query("stats_pages", SAMPLE_PAGES), {"queue": None})
    pages, n = float(rows[0][0]), int(rows[0][1])
    series: dict[str, dict[str, list[int]]] = {}  # queue -> state -> count per sampled page
    for _pages, _sampled, k, queue, *counts in rows:
        if queue is None:  # no task on the pages read
            continue
        by_state = series.setdefault(queue, {s: [0] * n for s in SAMPLED})
        for state, y in zip(SAMPLED, counts, strict=True):
            by_state[state][k] = y
    totals = {q: {s: sum(ys) for s, ys in by.items()} for q, by in series.items()}
    # The pages are evenly spaced over the table, so neighbouring pages of the sample
    # differ only where the table changes (tasks written together share pages): the
    # successive-difference estimate of the variance allows for that, where treating the
    # pages as independent would overstate the error of a table written in long runs.
    variances = {q: {s: sum((b - a) ** 2 for a, b in itertools.pairwise(ys)) / (2 * max(n - 1, 1))
                     for s, ys in by.items()} for q, by in series.items()}
    return Sample(pages, n, totals, variances)


def id_sample(st: Statements) -> Steps[Sample]:
    """Steps (for ``yield from``) of CockroachDB's sample (``sql/stats_sample.sql``): the
    smallest of its random ids."""
    rows = yield st.fetch(st.query("stats_sample", SAMPLE_ROWS), {"queue": None})
    n, last_id = rows[0][0], rows[0][1]
    # Fewer rows than asked for: the sample is the whole table.  Else the n-th smallest
    # of uniform ids reaches `reach`, and the first n - 1 are a uniform sample of
    # [0, reach) of the table's rows, which are therefore about (n - 1) / reach.
    units = float(n) if n < SAMPLE_ROWS else max(float(n), (n - 1) * ID_SPACE / (last_id.int + 1))
    totals = {r[2]: dict(zip(SAMPLED, r[3:], strict=True)) for r in rows if r[2] is not None}
    # A row counts 1 or 0: the variance of m ones among n, plus (m / n)^2 for the
    # spread of the reach itself, an order statistic (relative variance 1 / n).
    variances = {q: {s: m * (1 - m / n) / max(n - 1, 1) + (m / n) ** 2 for s, m in by.items()}
                 for q, by in totals.items()}
    return Sample(units, n, totals, variances)


def estimate(sample: Sample, queue: str, state: str) -> tuple[int, int]:
    """The sample's estimate of one count and its error (both in tasks): the mean count
    per sampled unit times the units, and three standard errors of that.  A state seen
    nowhere gets at least the error of one task in one unit, so it is never exact."""
    total = sample.totals.get(queue, {}).get(state, 0)
    n, units = sample.sampled, sample.units
    if n >= units:
        return total, 0
    variance = max(sample.variances.get(queue, {}).get(state, 0.0), 1 / n)
    spread = units * math.sqrt((1 - n / units) * variance / n)
    return round(units * total / n), math.ceil(ERROR_SIGMAS * spread)
