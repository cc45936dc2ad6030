"""The flows' resolver: folds the events of flows' tasks in, in batches, and releases the
tasks that wait for nothing more.

The statement that ends a task of a flow writes one event row (``flow_events``): its
ack (succeeded), its death (dead), a retry from the dead letters (retried), its
deletion from them (dropped) or a cancel (cancelled).  A fold, in one transaction:

1. locks up to :data:`FLOWS_PER_FOLD` flows that have events (``flow_pick``; a flow
   another resolver holds is skipped, so one resolver at a time folds a flow's
   events, in the order they happened);
2. deletes up to :data:`EVENTS_PER_FOLD` of their events (``flow_take``);
3. adds them to the flows' counts (``flow_count``), cancels the tasks that waited for
   a task that will never succeed (``flow_cancel_children``, which writes their own
   events, folded next), counts down the others and releases those that wait for
   nothing more, their parents' results prepended to their arguments
   (``flow_release``), and marks the flows that have no task left as ended
   (``flow_finish``).

The events are deleted in the transaction that applies them, so each counts once,
whichever resolvers run, whatever replies are lost, whichever process dies: a fold
that did not commit left them all in place.  Acks only insert: a chord's members never
wait for one another's locks, however many finish at once.

The children a durable task spawns (``ctx.spawn``) are a flow of kind ``spawn`` whose
id is the task's: a fold of their events wakes the task if it is parked on them
(``parents_wake``), to look at them again.

A batch's callback (:meth:`shardq.Client.enqueue_many` with ``on_complete``) waits for
every member to end, whatever its outcome: there a member that died counts down too,
one retried from the dead letters before the callback ran counts up again, and one
deleted from them changes nothing more (the callback runs, with it counted dead).  An
*open* batch (written piece by piece, as a Spark job does) starts its callback at
:data:`OPEN_WAITS` and is sealed with its size (a ``sealed`` event) once written.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import astuple, dataclass
from uuid import UUID

from shardq.core import validate
from shardq.core.config import DAY_S
from shardq.core.errors import InvalidTask
from shardq.core.loop import Loop
from shardq.core.plan import Atomic, Plan, Steps
from shardq.core.statements import Statements
from shardq.ops.batches import OPEN_WAITS

FLOWS_PER_FOLD = 64
EVENTS_PER_FOLD = 5000
# Within one instant, a retry is applied before what followed it.
_ORDER = {"retried": 0, "sealed": 1}


@dataclass(frozen=True)
class FoldReport:
    """What one fold (or a run of them) did."""

    events: int = 0
    """Events folded in."""
    released: int = 0
    """Tasks released: they wait for nothing more."""
    cancelled: int = 0
    """Tasks cancelled because a task they waited for will never succeed."""
    finished: int = 0
    """Flows that ended: no task left."""
    flows: int = 0
    """Flows whose events were folded in."""
    woken: int = 0
    """Durable tasks parked on their children, woken to look at them again."""

    def __add__(self, other: FoldReport) -> FoldReport:
        return FoldReport(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


def fold(st: Statements) -> Plan[FoldReport]:
    """The plan of one fold (see the module's docstring); retried whole after a lost
    connection: the events it took are in place until it commits."""
    def steps() -> Steps[FoldReport]:
        report: FoldReport = yield Atomic(lambda: _fold(st))
        return report

    return Plan(steps)


def _fold(st: Statements) -> Steps[FoldReport]:
    locked = yield st.fetch(st.query("flow_pick", FLOWS_PER_FOLD))
    if not locked:
        return FoldReport()
    batch = {row[0] for row in locked if row[1] == "batch"}
    spawned = {row[0] for row in locked if row[1] == "spawn"}
    events = yield st.fetch(st.query("flow_take", EVENTS_PER_FOLD),
                            {"flows": [row[0] for row in locked]})
    events.sort(key=lambda e: (e[0], e[1], _ORDER.get(e[3], 2)))
    counts: dict[UUID, Counter[str]] = defaultdict(Counter)
    down: Counter[UUID] = Counter()
    doomed: list[UUID] = []
    for flow_id, _at, _task, outcome, after, n in events:
        after = after or []
        is_batch = flow_id in batch
        counts[flow_id][outcome] += 1
        if outcome == "succeeded" or (is_batch and outcome in ("dead", "cancelled")):
            down.update(after)
        elif outcome == "retried" and is_batch:
            down.subtract(after)
        elif outcome == "sealed":
            for child in after:
                down[child] += OPEN_WAITS - n
        # A batch's task dropped from the dead letters counted its callback down as it died.
        elif outcome in ("dropped", "cancelled") and not is_batch:
            doomed += after
    report = FoldReport(events=len(events), flows=len(locked))
    flows = list(counts)
    yield st.execute("flow_count", {
        "flows": flows, "succeeded": [counts[f]["succeeded"] for f in flows],
        "dead": [counts[f]["dead"] - counts[f]["retried"] for f in flows],
        "cancelled": [counts[f]["cancelled"] for f in flows],
        "folded": [counts[f].total() for f in flows]})
    if doomed:
        cancelled = (yield st.fetch("flow_cancel_children", {"ids": doomed}))[0][0]
        report += FoldReport(cancelled=cancelled)
    moved = [(child, n) for child, n in down.items() if n]
    if moved:
        released = yield st.fetch("flow_release", {"ids": [c for c, _ in moved],
                                                   "counts": [n for _, n in moved],
                                                   "notify": st.config.notify})
        report += FoldReport(released=sum(row[1] for row in released))
    report += yield from _wake_parents(st, [f for f in flows if f in spawned])
    finished = yield st.fetch("flow_finish", {"flows": flows})
    return report + FoldReport(finished=len(finished))


def _wake_parents(st: Statements, parents: list[UUID]) -> Steps[FoldReport]:
    """Wake the durable tasks whose children's events were folded in, to look at them
    again (a spawn flow's id is its parent's).  The fold holds these flows' locks, which
    a parent that parks takes (sql/park_many.sql), so none parks unseen meanwhile."""
    if not parents:
        return FoldReport()
    woken = yield st.fetch("parents_wake", {"ids": parents, "notify": st.config.notify})
    return FoldReport(woken=sum(row[1] for row in woken))


def resolve(st: Statements) -> FoldReport:
    """Fold until no events are left that another resolver does not hold (blocking).

    A fold that took as many flows or events as it may, or that cancelled nodes (each
    cancellation is an event of its own, for the nodes after it), may have left events:
    another fold follows, so a dropped node's dependents are all cancelled by one call,
    however long the chain after it."""
    report = FoldReport()
    while True:
        step = st.perform(fold(st))
        report += step
        if (step.events < EVENTS_PER_FOLD and step.flows < FLOWS_PER_FOLD
                and not step.cancelled):
            return report


def purge(st: Statements, limit: int) -> int:
    """Delete flows that ended longer ago than their ``keep_result_s`` (bounded batches);
    returns how many."""
    query, purged = st.query("flow_purge", limit), 0
    while True:
        n = len(st.all(query))
        purged += n
        if n < limit:
            return purged


class Resolver(Loop[FoldReport]):
    """Runs :func:`resolve` every ``interval_s`` (the client's ``flow_interval_s``
    setting by default) in a background thread; a worker runs one beside its janitor."""

    def __init__(self, st: Statements, interval_s: float | None = None) -> None:
        if interval_s is not None and not validate.seconds("interval_s", interval_s,
                                                           limit=DAY_S):
            raise InvalidTask("interval_s must be positive")
        super().__init__("shardq-resolver",
                         st.config.flow_interval_s if interval_s is None else interval_s)
        self.statements = st

    def run_once(self) -> FoldReport:
        """Fold every event there is now."""
        return resolve(self.statements)

