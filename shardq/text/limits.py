"""Limits as people write and read them, shared by the CLI and the dashboard.

A rate is written ``COUNT/PERIOD_S[/BURST]`` (``100/60`` is 100 claims a minute,
``50/1/5`` 50 a second with a burst of 5); a running limit is a positive whole
number; ``none`` removes either.  :func:`summary` is one queue's limits in a short
line (``run 3/8 · group 1/2 · rate 100/60s``), as ``shardq stats`` and the dashboard
show them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.ops.flow import Control, Limits
from shardq.ops.rates import Rate

if TYPE_CHECKING:
    from shardq.ops.queuestats import QueueStats

T = TypeVar("T")
NONE = ("none", "off", "")


@dataclass(frozen=True)
class Unset:
    """A limit removed (written ``none``)."""


UNSET = Unset()


def running(text: str, name: str = "limit") -> int | Unset:
    """A running limit written as text: a whole number from 1, or ``none``."""
    raw = text.strip().lower()
    if raw in NONE:
        return UNSET
    try:
        value = int(raw)
    except ValueError:
        raise InvalidTask(f"{name} must be a whole number or none, got {text!r}") from None
    return validate.running_limit(name, value)


def rate(text: str, name: str = "rate") -> Rate | Unset:
    """A rate written ``COUNT/PERIOD_S[/BURST]`` (:meth:`Rate.parse`), or ``none``."""
    if text.strip().lower() in NONE:
        return UNSET
    return Rate.parse(text, name)


def merged(old: Limits, *, max_running: int | Unset | None = None,
           max_running_per_group: int | Unset | None = None,
           rate: Rate | Unset | None = None, rate_per_group: Rate | Unset | None = None
           ) -> Limits:
    """``old`` with the limits given replaced (:data:`UNSET` removes one; None keeps
    it)."""
    def pick(new: T | Unset | None, was: T | None) -> T | None:
        return None if isinstance(new, Unset) else was if new is None else new

    return Limits(pick(max_running, old.max_running),
                  pick(max_running_per_group, old.max_running_per_group),
                  pick(rate, old.rate), pick(rate_per_group, old.rate_per_group))


def rate_text(value: Rate | None) -> str:
    """``100/60s`` (and its burst when not the default: ``100/60s burst 5``); ``none``."""
    if value is None:
        return "none"
    default = Rate(value.count, value.period_s).burst_or_default
    burst = f" burst {value.burst}" if value.burst is not None and value.burst != default else ""
    return f"{value.count}/{value.period_s:g}s{burst}"


def rate_field(value: Rate | None) -> str:
    """A rate as it is written back (``COUNT/PERIOD_S/BURST``), or empty for none."""
    if value is None:
        return ""
    return f"{value.count}/{value.period_s:g}/{value.burst_or_default}"


def lines(found: Control) -> list[str]:
    """A queue's limits and their use, one line each (``shardq queue limit``)."""
    limits = found.limits
    run = (f"{limits.max_running}  ({found.running} in use)"
           if limits.max_running is not None else "none")
    group = (f"{limits.max_running_per_group}  (the busiest group holds "
             f"{found.running_most_group})" if limits.max_running_per_group is not None
             else "none")
    return [f"max_running            {run}",
            f"max_running_per_group  {group}",
            f"rate                   {_rate_long(limits.rate)}",
            f"rate_per_group         {_rate_long(limits.rate_per_group)}"]


def _rate_long(value: Rate | None) -> str:
    if value is None:
        return "none"
    return (f"{value.count} per {value.period_s:g}s, burst {value.burst_or_default}  (at most "
            f"{value.burst_or_default} + {value.count / value.period_s:.4g}/s x t claims in t s)")


def summary_of(limits: Limits) -> str:
    """Limits alone in a short line (``run 8 · rate 100/60s``); empty without limits."""
    return _summary(Limits(limits.max_running, limits.max_running_per_group, limits.rate,
                           limits.rate_per_group), None, None)


def summary(figures: QueueStats) -> str:
    """One queue's limits and their use in a short line (``run 3/8``); empty without
    limits."""
    return _summary(Limits(figures.max_running, figures.max_running_per_group, figures.rate,
                           figures.rate_per_group),
                    figures.running, figures.running_most_group)


def _summary(limits: Limits, running: int | None, most_in_a_group: int | None) -> str:
    def used(count: int | None) -> str:
        return "" if count is None else f"{count}/"

    parts = []
    if limits.max_running is not None:
        parts.append(f"run {used(running)}{limits.max_running}")
    if limits.max_running_per_group is not None:
        parts.append(f"group {used(most_in_a_group)}{limits.max_running_per_group}")
    if limits.rate is not None:
        parts.append(f"rate {rate_text(limits.rate)}")
    if limits.rate_per_group is not None:
        parts.append(f"group rate {rate_text(limits.rate_per_group)}")
    return " · ".join(parts)
