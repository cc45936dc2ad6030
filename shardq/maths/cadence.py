"""When a periodic schedule's slots fall, and which one is due: pure functions of time.

A slot is an instant.  A :class:`Cadence` is either a cron expression read on the
wall clock of a time zone (parsed and stepped by ``croniter``), or a fixed interval
``every_s``, whose slots are the multiples of the interval since the Unix epoch, so
every process agrees on them whenever it started.

Daylight-saving time.  A cron expression matches wall-clock times; each matching wall
time is one slot, turned into an instant with the zone's earlier offset (``fold=0``):

- a wall time that occurs twice (the clock is set back) fires once, at its first
  occurrence;
- a wall time that does not exist (the clock jumps forward) fires at the instant the
  earlier offset gives it, which is as far past the jump as the time was inside the
  gap: a daily 02:30 in Europe/Berlin fires at 03:30 on the day the clock jumps from
  02:00 to 03:00.

Either way a daily schedule fires exactly once a day.  Two wall times that become the
same instant (02:30 and 03:30 on the jump day, for an hourly schedule) are one slot.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from shardq.core.errors import ConfigError

Missed = Literal["skip", "once", "all"]
MISSED: tuple[Missed, ...] = ("skip", "once", "all")
ON_TIME_S = 60.0
"""With ``missed="skip"``, a slot seen later than this after its time is not run."""
MIN_EVERY_S = 1.0
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
CRON_FIELDS = 5
"""minute, hour, day of month, month, day of week: croniter's seconds and year fields
(a 6th and a 7th) are refused, as ``every_s`` does seconds."""


def missed_policy(value: object) -> Missed:
    """``value`` as a missed-slot policy, or ConfigError."""
    if value not in MISSED:
        raise ConfigError(f"missed must be one of {', '.join(MISSED)}, got {value!r}")
    return value


@dataclass(frozen=True)
class Cadence:
    """A cron expression in a time zone, or an interval in seconds (exactly one of them)."""

    cron: str | None = None
    every_s: float | None = None
    tz: str = "UTC"

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every_s is None):
            raise ConfigError("give a periodic schedule either cron= or every_s=")
        if self.cron is not None:
            problem = (_cron_problem(self.cron) if isinstance(self.cron, str)
                       else "is not a valid cron expression")
            if problem is not None:
                raise ConfigError(f"cron {self.cron!r} {problem}")
        if self.every_s is not None:
            every = self.every_s
            if (isinstance(every, bool) or not isinstance(every, int | float)
                    or not math.isfinite(every) or every < MIN_EVERY_S):
                raise ConfigError(f"every_s must be a finite number of seconds of at least "
                                  f"{MIN_EVERY_S:g}, got {every!r}")
            if self.tz != "UTC":
                raise ConfigError("tz applies to cron schedules only, not to every_s")
        self._zone()

    def _zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise ConfigError(f"unknown time zone {self.tz!r}") from None

    @property
    def expression(self) -> str:
        """The cron expression, or ``every Ns``."""
        return expression(self.cron, self.every_s)

    def after(self, t: datetime) -> datetime:
        """The first slot strictly after ``t``."""
        if self.cron is None:
            period = self._period_us()
            return _from_us((_us(t) // period + 1) * period)
        steps = croniter(self.cron, self._wall(t))
        slot = self._instant(steps.get_next(datetime))
        while slot <= t:  # a wall time of the repeated hour, or a gap's duplicate
            slot = self._instant(steps.get_next(datetime))
        return slot

    def latest(self, now: datetime) -> datetime:
        """The last slot at or before ``now``."""
        if self.cron is None:
            period = self._period_us()
            return _from_us(_us(now) // period * period)
        steps = croniter(self.cron, self._wall(now) + MICROSECOND)
        slot = self._instant(steps.get_prev(datetime))
        while slot > now:  # a wall time inside a gap maps past now
            slot = self._instant(steps.get_prev(datetime))
        # Stepping back over a repeated hour can pass slots that lie later in time.
        while (following := self.after(slot)) <= now:
            slot = following
        return slot

    def _period_us(self) -> int:
        assert self.every_s is not None
        return round(self.every_s * 1_000_000)

    def _wall(self, t: datetime) -> datetime:
        return t.astimezone(self._zone()).replace(tzinfo=None)

    def _instant(self, wall: datetime) -> datetime:
        return wall.replace(tzinfo=self._zone(), fold=0).astimezone(UTC)


def expression(cron: str | None, every_s: float | None) -> str:
    """A schedule's cron expression, or ``every Ns`` for an interval."""
    return cron if cron is not None else f"every {every_s:g}s"


@functools.lru_cache(maxsize=1024)
def _cron_problem(cron: str) -> str | None:
    """Why ``cron`` cannot be a schedule's (the end of a sentence), or None when it can.

    Cached: a worker builds each schedule's cadence at every step, and the check steps
    croniter once.
    """
    if not croniter.is_valid(cron):
        return "is not a valid cron expression"
    fields = cron.split()
    if not cron.lstrip().startswith("@") and len(fields) != CRON_FIELDS:
        return (f"has {len(fields)} fields, not {CRON_FIELDS} (minute hour day-of-month "
                "month day-of-week); for slots seconds apart use every_s")
    try:
        # Without a year field the longest gap between two matches is 8 years (29
        # February around 2100), well within croniter's search: an expression it finds
        # no date for matches none (31 February, 31 April).
        croniter(cron, EPOCH.replace(tzinfo=None)).get_next(datetime)
    except CroniterBadDateError:
        return "never fires: it matches no date"
    except CroniterError as exc:
        return f"is not a valid cron expression ({exc})"
    return None


def _us(t: datetime) -> int:
    return (t - EPOCH) // MICROSECOND


def _from_us(us: int) -> datetime:
    return EPOCH + us * MICROSECOND


def due(cadence: Cadence, missed: Missed, base: datetime,
        now: datetime) -> tuple[datetime, bool] | None:
    """The slot a schedule advances to at ``now``, and whether that slot runs.

    ``base`` is the schedule's last fired slot (or when it was registered); None means
    no slot after it is due yet.  With several slots due, ``all`` takes the earliest
    (the rest follow one by one), ``once`` the latest, and ``skip`` the latest too but
    runs it only when it is no more than :data:`ON_TIME_S` late.
    """
    first = cadence.after(base)
    if first > now:
        return None
    if missed == "all":
        return first, True
    latest = max(first, cadence.latest(now))
    if missed == "once":
        return latest, True
    return latest, (now - latest).total_seconds() <= ON_TIME_S
