"""Flow control: per-queue limits kept in the database, and the claims that keep them.

A queue's limits live in its ``shardq.queues`` row, so a change holds for every worker
at its next claim, with no restart:

- ``max_running``: tasks of the queue running at once, across every worker;
- ``max_running_per_group``: the same for each group (tasks enqueued with ``group=``);
- ``rate`` and ``rate_per_group``: claims per period, spread evenly (:class:`Rate`).

The running limits are *slots*: a claim under a limit gives each task a free slot
number, and a unique partial index on the running tasks' slots makes it impossible
for two running tasks to hold one, whatever a claimer believed (see migration 0018).
A slot frees itself when its task stops running (done, failed, released, cancelled,
or put back by the janitor when its lease expired), so a killed worker cannot leak
capacity, and no statement besides the claim touches the limits.  Rates are the
generic cell rate algorithm over one timestamp per queue (and per group), spent by a
short statement before the claim and refunded when the claim took fewer.

A queue with limits, or with waiting grouped tasks, is *controlled*: its claims take
turns between its ungrouped tasks (bucket by bucket) and each group with waiting
tasks (in name order), so a group with a million tasks delays one with ten by one
turn per claimer, not by a million tasks.  A plain claim (``claim.sql``) takes nothing
from a controlled queue, so a worker that has not yet seen a new limit cannot claim
past it; workers learn a queue's state from :func:`controls`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from uuid import UUID, uuid4

from shardq.core import sqlfiles, validate
from shardq.core.errors import InvalidTask, UnknownQueue
from shardq.core.plan import Fetch, Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.core.task import Task
from shardq.ops import claims, rates
from shardq.ops import control as queue_control
from shardq.ops.claims import attempt_claim, task_rows
from shardq.ops.rates import Rate

DRAWN_SPARE = 8
"""Slot numbers a claim draws beyond those it expects free (two draws may be equal)."""
MIN_FREE_SHARE = 0.1
"""The least free share of a limit a claim's draws assume (at most ten per task)."""

MAX_GROUP_TURNS = 16
"""Group turns one :func:`claim_any` call takes at most before the buckets' turns."""

LISTED_SLOTS = 1024
"""The highest running limit whose free slots a claim lists (``sql/free_slots.sql``,
which takes it as a literal); above it they are drawn at random, the limit seldom
binding."""


def _free_slots(capacity: str, slot: str, holders: str) -> sqlfiles.Part:
    """``sql/free_slots.sql`` for the limit in column ``capacity`` of shardq.queues, whose
    running tasks (``holders``) hold the tasks column ``slot``."""
    return sqlfiles.Part("free_slots", parts=(("holders", holders),),
                         names=(("capacity", (capacity,)), ("slot", (slot,))),
                         literals=(("listed_slots", LISTED_SLOTS),))


QUEUE_FREE = _free_slots("max_running", "slot", "holders_queue")
"""The free slots under the queue's ``max_running``."""
GROUP_FREE = _free_slots("max_running_per_group", "group_slot", "holders_group")
"""The free slots under ``max_running_per_group`` for the claim's group."""


@dataclass(frozen=True)
class Limits:
    """A queue's limits; None means no limit of that kind."""

    max_running: int | None = None
    max_running_per_group: int | None = None
    rate: Rate | None = None
    rate_per_group: Rate | None = None

    def __post_init__(self) -> None:
        for name in ("max_running", "max_running_per_group"):
            value = getattr(self, name)
            if value is not None:
                validate.running_limit(name, value)
        for name in ("rate", "rate_per_group"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Rate):
                raise InvalidTask(f"{name} must be a shardq.Rate(count, period_s=...) or "
                                  f"'COUNT/PERIOD_S[/BURST]' text, got {value!r:.80}")

    @property
    def any(self) -> bool:
        """Whether any limit is set."""
        return any(v is not None for v in (self.max_running, self.max_running_per_group,
                                           self.rate, self.rate_per_group))


@dataclass(frozen=True)
class Control:
    """What the database says of one queue's flow control: its :class:`Limits`, whether
    grouped tasks wait, the running tasks that hold a queue slot, and the most that any
    one group holds."""

    limits: Limits = field(default_factory=Limits)
    grouped: bool = False
    running: int = 0
    running_most_group: int = 0

    @property
    def controlled(self) -> bool:
        """Whether claims of the queue go through :func:`claim_turn`."""
        return self.grouped or self.limits.any

    @property
    def running_limits(self) -> list[tuple[int, int]]:
        """Each running limit set (``max_running``, ``max_running_per_group``) with the
        running tasks it counted when this was read (the queue's; the busiest group's)."""
        pairs = ((self.limits.max_running, self.running),
                 (self.limits.max_running_per_group, self.running_most_group))
        return [(limit, running) for limit, running in pairs if limit is not None]

    @cached_property  # asked for every outcome a worker writes: computed once per read
    def awaited(self) -> bool:
        """Whether claims may be waiting for the slots its running tasks hold: a running
        limit (``max_running``, or per group) of at most :data:`LISTED_SLOTS`, or one
        that was at least half used when this was read (a higher limit seldom binds)."""
        return any(limit <= LISTED_SLOTS or 2 * running >= limit
                   for limit, running in self.running_limits)


@dataclass(frozen=True)
class Turn:
    """One controlled claim: the tasks it took, the cursor for the claimer's next turn
    (``after``: None for the ungrouped tasks' turn, else the last group served), and,
    when a rate gave nothing, how long until it gives again."""

    tasks: list[Task]
    after: str | None
    wait_s: float = 0.0
    raced: bool = False
    """A concurrent claim took the capacity slot this one chose: worth trying again at
    once (more slots may be free)."""


def set_limits(st: Statements, queue: str, limits: Limits, *,
               create: bool = False) -> Plan[Limits]:
    """Set ``queue``'s limits (replacing every earlier one; :class:`Limits` () clears
    them).  Running workers apply them at their next claim.  A queue with no limits
    that shardq does not know (see :func:`shardq.ops.control.known`) is refused with
    :class:`UnknownQueue` unless ``create``: a typo would otherwise become a limited
    queue of its own, and the real one would stay unlimited."""
    name = validate.queue_name(queue)
    values = {"queue": name, "max_running": limits.max_running,
              "max_running_per_group": limits.max_running_per_group,
              **_rate_params("rate", limits.rate),
              **_rate_params("rate_per_group", limits.rate_per_group)}

    def steps() -> Steps[Limits]:
        if not create:
            found = yield from _controls(st, [name])
            if not found[name].limits.any and not (yield from queue_control.known(st, name)):
                raise UnknownQueue(name, (yield from queue_control.names(st)),
                                   "to limit it before its first task, pass create=True")
        yield st.execute("limits_set", values)
        yield st.execute("limits_tidy", {"queue": name})
        return limits

    return plan(steps)


def _rate_params(prefix: str, rate: Rate | None) -> dict[str, Any]:
    return {f"{prefix}_count": rate.count if rate else None,
            f"{prefix}_period_s": rate.period_s if rate else None,
            f"{prefix}_burst": rate.burst_or_default if rate else None}


def controls(st: Statements, queues: Sequence[str]) -> Plan[dict[str, Control]]:
    """The :class:`Control` of each of ``queues`` (one statement)."""
    names = [validate.queue_name(q) for q in queues]
    return plan(lambda: _controls(st, names))


def _controls(st: Statements, names: list[str]) -> Steps[dict[str, Control]]:
    rows = yield st.fetch("limits_get", {"queues": names})
    return {row[0]: _control(row) for row in rows}


def _control(row: Sequence[Any]) -> Control:
    (_, max_running, per_group, rate_n, rate_p, rate_b, group_n, group_p, group_b,
     grouped, running, most) = row
    return Control(Limits(max_running, per_group,
                          Rate(rate_n, rate_p, rate_b) if rate_n is not None else None,
                          Rate(group_n, group_p, group_b) if group_n is not None else None),
                   bool(grouped), int(running), int(most or 0))


def claim_turn(st: Statements, queue: str, bucket: int, *, after: str | None,
               control: Control, limit: int, lease_s: float | None,
               worker_id: UUID | None = None) -> Plan[Turn]:
    """One controlled claim of up to ``limit`` tasks of ``queue``: the ungrouped tasks
    of ``bucket`` when ``after`` is None (or no group follows it), else the next group
    after ``after`` that has waiting tasks.  ``control`` (a worker's cached view) only
    chooses the statements: every limit is read and kept by the database.  ``worker_id``
    as for :func:`shardq.ops.claims.claim`."""
    validate.queue_name(queue)
    validate.claim(bucket, st.bucket_count, limit, lease_s)
    return plan(turn_steps(st, queue, bucket, after, control, limit, lease_s, worker_id))


def turn_steps(st: Statements, queue: str, bucket: int, after: str | None, control: Control,
               limit: int, lease_s: float | None, worker_id: UUID | None,
               token: UUID | None = None, *, guarded: bool = False
               ) -> Callable[[], Steps[Turn]]:
    """The steps of :func:`claim_turn`, run afresh on each attempt (``token``: the
    lease token of the claims, by default one of its own; ``guarded``: inside a
    transaction, as :func:`shardq.ops.claims.attempt_claim`'s)."""
    lease = lease_s if lease_s is not None else st.config.lease_s
    # One per call: a retried attempt recovers what the first one took.
    token = token if token is not None else uuid4()
    attempts: dict[tuple[str | None, int], Callable[[], Steps[list[Task]]]] = {}
    tries = 0
    races: list[object] = []  # one entry per claim that lost a slot to a concurrent one

    def steps() -> Steps[Turn]:
        nonlocal tries
        tries += 1
        if tries > 1:
            # Before anything else: a retry may choose another group (the lost claim took
            # its group's last tasks) or size (the rate was spent), whose claim would not
            # look for what the lost one took.
            taken: list[Task] = yield _recover(st, queue, token)
            if taken:
                return Turn(taken, after)
        group: str | None = None
        if control.grouped and after is not None:
            rows = yield st.fetch("group_next", {"queue": queue, "after": after})
            group = rows[0][0] if rows else None
        cursor = group if group is not None else ("" if control.grouped else None)
        spent = yield from rates.spend(st, queue, group, control.limits.rate,
                                       control.limits.rate_per_group, limit)
        if spent.granted == 0:
            return Turn([], after if group is None else cursor, spent.wait_s)
        size = limit if spent.granted >= limit else 1 << (spent.granted.bit_length() - 1)
        key = (group, size)
        if key not in attempts:
            attempts[key] = _limited(st, queue, bucket, group, control, spent, size,
                                     lease, token, worker_id, lambda: races.append(key),
                                     guarded=guarded)
        lost = len(races)
        tasks = yield from attempts[key]()
        yield from rates.refund(st, queue, group, spent, len(tasks))
        return Turn(tasks, cursor, raced=len(races) > lost)

    return steps


def claim_any(st: Statements, queue: str, start: int, *, limit: int, lease_s: float | None,
              cursors: dict[str, str | None], worker_id: UUID | None = None
              ) -> Plan[list[Task]]:
    """:func:`shardq.ops.claims.claim` for any queue: a queue under flow control is
    claimed a turn at a time (its groups in name order, then its ungrouped tasks
    bucket by bucket from ``start``) until a turn takes tasks (under a queue rate, until
    ``limit`` tasks or the rate's tokens are taken).  ``cursors`` keeps,
    per queue, where the caller's next turn starts (see :class:`Turn`)."""
    plain = claims.claim(st, queue, start, limit=limit, lease_s=lease_s, worker_id=worker_id)
    n = st.bucket_count
    token = uuid4()  # one for every turn of every attempt: a retry recovers by it
    tries = 0

    def steps() -> Steps[list[Task]]:
        nonlocal tries
        tries += 1
        tasks: list[Task] = yield from plain.steps()
        if tasks:
            return tasks
        if tries > 1:
            taken: list[Task] = yield _recover(st, queue, token)
            if taken:
                return taken
        found = yield from _controls(st, [queue])
        control = found.get(queue, Control())
        if not control.controlled:
            return []
        after = cursors.get(queue, "") if control.grouped else None
        # Under a queue rate a turn's tokens may outnumber its bucket's tasks: the next
        # turns spend the rest, so a claim takes what the rate allows (a fresh rate's
        # whole burst), not one bucket's share of it.
        rated = control.limits.rate is not None
        got: list[Task] = []
        for step in range(n + (MAX_GROUP_TURNS if control.grouped else 0)):
            bucket = (start + step) % n
            turn = yield from turn_steps(st, queue, bucket, after, control,
                                         limit - len(got), lease_s, worker_id, token)()
            after = cursors[queue] = turn.after
            got += turn.tasks
            if got and (not rated or len(got) >= limit or turn.wait_s > 0):
                return got
        return got

    return plan(steps)


def control(st: Statements, queue: str) -> Plan[Control]:
    """The :class:`Control` of ``queue``."""
    name = validate.queue_name(queue)

    def steps() -> Steps[Control]:
        return (yield from _controls(st, [name]))[name]

    return plan(steps)


def _recover(st: Statements, queue: str, token: UUID) -> Fetch:
    """The tasks of ``queue`` that claims under lease ``token`` took (whichever group
    or bucket): what a retry finds of an attempt whose reply was lost."""
    params = st.params(queue=queue, token=token, buckets=list(range(st.bucket_count)))
    return Fetch(st.query("claim_recover_any"), params, task_rows(queue, token))


def _limited(st: Statements, queue: str, bucket: int, group: str | None, control: Control,
             spent: rates.Spent, size: int, lease_s: float, token: Any,
             worker_id: UUID | None, raced: Callable[[], object], *, guarded: bool = False
             ) -> Callable[[], Steps[list[Task]]]:
    """The steps of one limited claim (``claim_limited``) of ``group`` (None: the
    ungrouped tasks of ``bucket``), recovered by ``token`` when retried."""
    fragments = limited_fragments(group, control.grouped, rates.guard(group, spent))
    params = st.params(queue=queue, bucket=bucket, group=group, lease_s=lease_s,
                       token=token, buckets=list(range(st.bucket_count)), worker_id=worker_id,
                       draws=draws(control, size))
    rows = task_rows(queue, token)
    take = Fetch(st.query("claim_limited", size, fragments=fragments), params, rows)
    recover = Fetch(st.query("claim_recover_any"), params, rows)
    return attempt_claim(take, recover, raced, guarded=guarded)


def draws(control: Control, size: int) -> int:
    """How many slot numbers a claim of up to ``size`` tasks draws at random under a
    limit above :data:`LISTED_SLOTS` (``sql/free_slots.sql``): enough for ``size`` free
    ones at the share of the limit ``control`` says is in use, and a few more.  Each
    number drawn costs a probe of the slots' index: drawing twice the claim's size
    whatever the share, a never-binding ``max_running`` claimed and acked at 0.79x of no
    limit, and at 0.86x so.  A claim that draws too few (the share grew since
    ``control`` was read) takes fewer tasks."""
    used = max((running / limit for limit, running in control.running_limits), default=0.0)
    free = max(MIN_FREE_SHARE, round(1.0 - used, 6))  # rounded: 1 - 0.8 is 0.1999…
    return math.ceil(size / free) + DRAWN_SPARE


def limited_fragments(group: str | None, grouped: bool, guard: str
                      ) -> dict[str, str | sqlfiles.Part]:
    """The fragments of a limited claim (``claim_limited``) of ``group``, or with None of
    the ungrouped tasks of one bucket of a queue with (``grouped``) or without waiting
    grouped tasks, under the rate guard ``guard`` (:func:`shardq.ops.rates.guard`)."""
    if group is not None:
        claim_range = "claim_range_group"
    else:
        claim_range = "claim_range_mixed" if grouped else "claim_range_ungrouped"
    return {"claim_range": claim_range, "rate_guard": guard, "claim_slots": "claim_slots_taken",
            "queue_free": QUEUE_FREE,
            "group_free": GROUP_FREE if group is not None else "group_free_none"}
