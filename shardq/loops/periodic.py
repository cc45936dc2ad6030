"""Periodic tasks: durable schedules whose slots are enqueued at most once, by any worker.

Each schedule is a row of ``shardq.periodic``: its expression (see
:mod:`shardq.maths.cadence`), the task it enqueues and how, ``since`` (when the current
expression took effect) and ``last_slot`` (the last slot fired).  Every worker of an
app registers the app's schedules when it starts (:func:`register`) and runs a
:class:`PeriodicLoop`, which reads the rows, works out each one's due slot and fires
it with :func:`fire`, and registers them again should the schema go away and come
back (dropped or migrated down, then migrated up) while it runs.

Why a slot cannot be enqueued twice, or lost: firing is one statement
(``sql/periodic_fire.sql``) that updates the row's ``last_slot`` to the slot only if
the row still holds the ``last_slot`` and ``since`` the worker read, and inserts the
task from the updated row in the same statement, so in the same transaction.  Two
workers firing the same slot both read the same ``last_slot``; the second update waits
for the first to commit, re-reads the row, finds ``last_slot`` changed and updates
nothing, so its insert has no row to insert (on CockroachDB, one transaction is
restarted by a serialization conflict and ends the same way).  A slot fired is always
later than ``last_slot``, so ``last_slot`` only moves forward and no slot is fired
twice, even after an expression change.  A crash before the commit leaves both the
row and the tasks table as they were; after it, both are written.  The task itself
is then at-least-once like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from shardq.core import validate
from shardq.core.errors import ConfigError, InvalidTask, SchemaNotReady
from shardq.core.loop import Loop
from shardq.core.statements import Statements
from shardq.core.task import TaskId
from shardq.maths import cadence
from shardq.maths.cadence import Cadence, Missed

log = logging.getLogger("shardq")

MAX_FIRED_PER_STEP = 100
"""Slots one :meth:`PeriodicLoop.run_once` fires at most (``missed="all"`` catching up)."""


@dataclass(frozen=True)
class Schedule:
    """A periodic schedule as the code defines it: enqueue ``task`` on ``queue`` each slot."""

    name: str
    """The schedule's name: the name of the task it enqueues."""
    cadence: Cadence
    queue: str
    priority: int = 0
    max_attempts: int | None = None
    """None: the client's ``max_attempts`` when the schedule is registered."""
    missed: Missed = "once"

    def __post_init__(self) -> None:
        # Refused here, as enqueue would refuse them (same checks, same words), rather
        # than by the database at every slot.
        try:
            validate.task_name(self.name)
            cadence.missed_policy(self.missed)
            validate.queue_name(self.queue)
            validate.priority(self.priority)
            validate.max_attempts(self.max_attempts, 1)
        except (ConfigError, InvalidTask) as exc:
            raise ConfigError(f"periodic schedule {self.name!r}: {exc}") from None


@dataclass(frozen=True)
class Fired:
    """A slot that was fired: the task enqueued for it."""

    name: str
    slot: datetime
    task_id: TaskId


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule's row, with the next slot it will fire (None once removed)."""

    name: str
    expression: str
    tz: str
    missed: str
    task: str
    queue: str
    priority: int
    max_attempts: int
    last_slot: datetime | None
    next_slot: datetime | None
    removed_at: datetime | None
    error: str | None = None
    """Why no slot of the schedule can be worked out (it fires nothing), else None."""


def register(st: Statements, schedules: Sequence[Schedule], queues: Sequence[str]) -> None:
    """Write ``schedules`` to the table, and mark removed the other schedules on ``queues``.

    A worker calls this when it starts, with its app's schedules and the queues it
    consumes: a schedule on one of those queues that the app no longer defines stops
    firing.
    """
    for schedule in schedules:
        st.all("periodic_register", {
            "name": schedule.name, "cron": schedule.cadence.cron,
            "every_s": schedule.cadence.every_s, "tz": schedule.cadence.tz,
            "missed": schedule.missed, "task": schedule.name, "queue": schedule.queue,
            "priority": schedule.priority,
            "max_attempts": schedule.max_attempts or st.config.max_attempts})
    removed = st.all("periodic_remove", {"queues": list(queues),
                                         "names": [s.name for s in schedules]})
    if removed:
        log.info("periodic schedules removed from the code: %s",
                 ", ".join(r[0] for r in removed))


def fire_due(st: Statements, names: Sequence[str]) -> tuple[list[Fired], dict[str, str]]:
    """Fire the due slot of each named schedule (one per schedule); returns those enqueued,
    and why, by name, the schedules whose slot could not be worked out were left alone.

    "Now" is the clock's, or the database's when the clock has none.  A slot another
    worker fired first is not in the result.  A schedule whose row no slot can be worked
    out from (a cron expression that never fires, written by another version of the
    app) fires nothing, and the others fire as usual.
    """
    fired: list[Fired] = []
    failed: dict[str, str] = {}
    rows = st.all("periodic_due", {"names": list(names)})
    for now, name, cron, every_s, tz, missed, since, last_slot in rows:
        if name is None:
            continue
        base = since if last_slot is None else max(since, last_slot)
        try:
            slot = cadence.due(Cadence(cron, every_s, tz), missed, base, now)
        except Exception as exc:  # this schedule's, whatever it is: the others go on
            failed[name] = _why(exc)
            continue
        if slot is not None:
            task_id = fire(st, name, slot[0], run=slot[1], since=since, last_slot=last_slot)
            if task_id is not None:
                fired.append(Fired(name, slot[0], task_id))
    return fired, failed


def _why(exc: Exception) -> str:
    """One line on why a schedule's slot could not be worked out."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(exc, ConfigError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def fire(st: Statements, name: str, slot: datetime, *, run: bool, since: datetime,
         last_slot: datetime | None) -> TaskId | None:
    """Move schedule ``name`` from ``last_slot`` to ``slot`` and, with ``run``, enqueue its
    task, in one statement; None when the row had moved on (another worker fired it) or
    nothing was enqueued."""
    rows = st.all("periodic_fire", {"name": name, "slot": slot, "run": run, "since": since,
                                    "last_slot": last_slot})
    if not rows:
        return None
    task_id, queue = rows[0]
    _notify(st, queue)
    return TaskId(task_id)


def run_now(st: Statements, name: str) -> TaskId | None:
    """Enqueue schedule ``name``'s task now, once, leaving its schedule alone; None when
    there is no such schedule."""
    rows = st.all("periodic_run", {"name": name})
    if not rows:
        return None
    task_id, queue = rows[0]
    _notify(st, queue)
    return TaskId(task_id)


def _notify(st: Statements, queue: str) -> None:
    # A hint for idle listening workers, like an enqueue's; without it they find the
    # task at their next poll.
    if st.config.notify and st.dialect.notify:
        st.all("notify", {"queue": queue})


def listing(st: Statements) -> list[ScheduleInfo]:
    """Every schedule, removed ones included, by name."""
    return [_info(*row) for row in st.all("periodic_list")]


def _info(name: str, cron: str | None, every_s: float | None, tz: str, missed: str,
          task: str, queue: str, priority: int, max_attempts: int, since: datetime,
          last_slot: datetime | None, removed_at: datetime | None) -> ScheduleInfo:
    next_slot: datetime | None = None
    error: str | None = None
    if removed_at is None:
        base = since if last_slot is None else max(since, last_slot)
        try:
            next_slot = Cadence(cron, every_s, tz).after(base)
        except Exception as exc:  # shown on its row: the other rows are listed as usual
            error = _why(exc)
    return ScheduleInfo(name, cadence.expression(cron, every_s), tz, missed, task, queue,
                        priority, max_attempts, last_slot, next_slot, removed_at, error)


class PeriodicLoop(Loop[list[Fired]]):
    """Fires the due slots of ``schedules`` every ``interval_s``.

    Any number of these may run, in any number of processes, on the same schedules:
    each slot is enqueued once (see the module's docstring).  The schedules are
    expected to be registered already (a worker does so when it starts, with the
    queues it consumes).  A step that finds the schema missing registers them again
    once the schema is back: their rows went with it, and nothing would fire.  A
    schedule whose slot cannot be worked out is logged once (and again if the reason
    changes), left alone while the others fire, and logged again when it no longer fails.
    """

    def __init__(self, st: Statements, schedules: Sequence[Schedule], queues: Sequence[str],
                 interval_s: float) -> None:
        super().__init__("shardq-periodic", interval_s)
        self.statements, self.schedules, self.queues = st, list(schedules), list(queues)
        self.names = [s.name for s in self.schedules]
        self._registered = True
        self.failing: dict[str, str] = {}
        """Why, by name, the schedules that could not fire at the last step could not."""

    def run_once(self) -> list[Fired]:
        """Fire every due slot (at most :data:`MAX_FIRED_PER_STEP`); returns those enqueued."""
        try:
            if not self._registered:
                register(self.statements, self.schedules, self.queues)
                self._registered = True
                log.info("periodic schedules registered again: %s", ", ".join(self.names))
            fired: list[Fired] = []
            while True:
                step, failed = fire_due(self.statements, self.names)
                fired += step
                if not step or len(fired) >= MAX_FIRED_PER_STEP:
                    break
        except SchemaNotReady:
            self._registered = False
            raise
        self._tell(failed)
        return fired

    def _tell(self, failed: dict[str, str]) -> None:
        """Log the schedules that started failing (or fail otherwise) and those that
        recovered; a schedule that goes on failing the same way is not logged again."""
        for name, why in failed.items():
            if self.failing.get(name) != why:
                log.error("periodic schedule %r cannot fire: %s; the other schedules fire "
                          "as usual (`shardq periodic list` shows it)", name, why)
        for name in self.failing.keys() - failed.keys():
            log.warning("periodic schedule %r no longer fails", name)
        self.failing = failed

    def delay_after(self, result: list[Fired]) -> float:
        """No wait while catching up (the step stopped at its limit)."""
        return 0.0 if len(result) >= MAX_FIRED_PER_STEP else self.interval_s
