"""Rates: at most a count of claims per period, spread evenly, kept in one timestamp.

Each rate is the generic cell rate algorithm over a theoretical arrival time: the
queue's in ``shardq.queues.rate_tat``, a group's in ``shardq.groups`` (see
``sql/rate_take.sql``).  A claim under a rate spends its tokens in a short statement of
its own before it claims, and gives back what it did not use after (so claimers of a
rated queue never wait for each other's claims); a reply lost in between leaves tokens
spent, so a rate may go under-used but is never exceeded.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.core.plan import Steps
from shardq.core.statements import Statements


@dataclass(frozen=True)
class Rate:
    """At most ``count`` claims per ``period_s`` seconds, spread evenly: one every
    ``period_s / count`` seconds, and at most ``burst`` ahead of that schedule (by
    default a twentieth of ``count``, at least 1), so no span of t seconds holds more than
    ``burst + count * t / period_s`` claims."""

    count: int
    period_s: float = 1.0
    burst: int | None = None

    def __post_init__(self) -> None:
        validate.positive_int("rate count", self.count)
        validate.positive_float("rate period_s", self.period_s)
        if self.burst is not None:
            validate.positive_int("rate burst", self.burst)

    @classmethod
    def parse(cls, text: str, name: str = "rate") -> Rate:
        """A rate written ``COUNT/PERIOD_S[/BURST]`` (``100/60`` is 100 claims a minute,
        ``50/1/5`` 50 a second with a burst of 5), as the CLI and the dashboard take it."""
        parts = text.strip().split("/")
        if len(parts) not in (2, 3):
            raise InvalidTask(f"{name} must be COUNT/PERIOD_S[/BURST] (e.g. 100/60 or 50/1/5) "
                              f"or none, got {text!r}")
        try:
            count, period_s = int(parts[0]), float(parts[1])
            burst = int(parts[2]) if len(parts) == 3 else None
        except ValueError:
            raise InvalidTask(f"{name} must be COUNT/PERIOD_S[/BURST] with whole COUNT and "
                              f"BURST (e.g. 100/60 or 50/1/5), got {text!r}") from None
        if not 0 < period_s < float("inf"):
            raise InvalidTask(f"{name}'s period must be a positive number of seconds, "
                              f"got {parts[1]!r}")
        if count < 1 or (burst is not None and burst < 1):
            raise InvalidTask(f"{name}'s count and burst must be at least 1, got {text!r}")
        return cls(count, period_s, burst)

    @property
    def burst_or_default(self) -> int:
        """The burst in effect."""
        return self.burst if self.burst is not None else max(1, self.count // 20)

    def __str__(self) -> str:
        return f"{self.count}/{self.period_s:g}s (burst {self.burst_or_default})"


@dataclass(frozen=True)
class Spent:
    """Rate tokens a claim spent: ``granted`` tasks may be claimed; ``queue``/``group``
    are how many tokens of each rate were spent (None: that rate was not asked)."""

    granted: int
    queue: int | None = None
    group: int | None = None
    wait_s: float = 0.0


def rate_of(name: str, value: Rate | str | None) -> Rate | None:
    """A rate given as a :class:`Rate` or as its text (see :meth:`Rate.parse`)."""
    return Rate.parse(value, name) if isinstance(value, str) else value


def spend(st: Statements, queue: str, group: str | None, rate: Rate | None,
          rate_per_group: Rate | None, want: int) -> Steps[Spent]:
    """Spend the tokens of the queue's ``rate`` and (for a claim of ``group``) of its
    ``rate_per_group`` that a claim of up to ``want`` tasks needs (none without rates)."""
    spent_queue: int | None = None
    if rate is not None:
        rows = yield st.fetch("rate_take", {"queue": queue, "want": want})
        if rows:  # no row: the rate was removed since the worker looked
            want, wait_s = rows[0]
            spent_queue = want
            if want == 0:
                return Spent(0, 0, None, wait_s)
    if group is None or rate_per_group is None:
        return Spent(want, spent_queue)
    values = {"queue": queue, "group": group, "want": want}
    rows = yield st.fetch("group_rate_take", values)
    if not rows:
        yield st.execute("group_row", values)
        rows = yield st.fetch("group_rate_take", values)
    if not rows:
        return Spent(want, spent_queue)
    granted = rows[0][0]
    if spent_queue is not None and granted < spent_queue:
        yield st.execute("rate_refund", {"queue": queue, "n": spent_queue - granted})
        spent_queue = granted
    # A group out of tokens ends its turn at once: the next group's may go.
    return Spent(granted, spent_queue, granted)


def refund(st: Statements, queue: str, group: str | None, spent: Spent,
            used: int) -> Steps[None]:
    """Give back the tokens of ``spent`` that the claim did not use."""
    if spent.queue is not None and spent.queue > used:
        yield st.execute("rate_refund", {"queue": queue, "n": spent.queue - used})
    if spent.group is not None and spent.group > used:
        yield st.execute("group_rate_refund", {"queue": queue, "group": group,
                                                "n": spent.group - used})


def guard(group: str | None, spent: Spent) -> str:
    """The fragment that keeps a claim from taking tasks under a rate it spent no
    tokens of (the worker that chose it had not yet seen the rate)."""
    queue_unspent = spent.queue is None
    if group is None:
        return "rate_unset" if queue_unspent else "rate_spent"
    group_unspent = spent.group is None
    if queue_unspent and group_unspent:
        return "rate_unset_both"
    if queue_unspent:
        return "rate_unset"
    return "rate_unset_per_group" if group_unspent else "rate_spent"
