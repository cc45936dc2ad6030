"""Handing capacity on: finish tasks and claim their successors in one transaction.

Under a binding running limit (``max_running``), each task's outcome frees a slot that
claims wait for.  Written alone, the slot stays empty from the ack's commit until a
claim notices it: a worker's claimer is woken, sends its claim, and the slot fills
again a statement later, so every slot cycle paid two statement latencies.  Here the
ack and the next claim of the same queue are one transaction: the ack deletes the
finished tasks (their slots are free inside the transaction, and held for any other
claim until it commits), and the claim takes successors into those slots before the
commit.  No other claim can see the slots free in between, so none races for them.

Faults: the transaction commits both or neither.  A retry after a lost reply finds
the acked tasks gone (settled, as :func:`shardq.ops.settle.ack`'s retry does) and
collects what the claim took by its lease token (as every claim's retry does), so
neither the outcome nor the claimed tasks are lost.  A lease lost before the ack is
reported, not raised: the claim still runs and its tasks are returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import InvalidTask, LeaseLost
from shardq.core.plan import Atomic, Plan, Steps
from shardq.core.statements import Statements
from shardq.core.task import Task
from shardq.ops import settle
from shardq.ops.flow import Control, Turn, turn_steps
from shardq.ops.results import Kept


@dataclass(frozen=True)
class Handed:
    """What :func:`ack_and_claim` did: the ``turn`` its claim took (those tasks are the
    caller's, under their lease), and the ``lost`` ids of tasks whose lease had ended
    before the ack (their outcome was not written)."""

    turn: Turn
    lost: list[UUID]


def ack_and_claim(st: Statements, tasks: Sequence[Task], kept: Sequence[Kept | None] | None,
                  queue: str, bucket: int, *, control: Control, limit: int,
                  lease_s: float | None, worker_id: UUID | None = None) -> Plan[Handed]:
    """Ack ``tasks`` (keeping ``kept`` results, as :func:`shardq.ops.settle.ack`) and take
    a turn of up to ``limit`` tasks of ``queue``'s ungrouped tasks in ``bucket`` (as
    :func:`shardq.ops.flow.claim_turn` with ``after`` None) in one transaction.
    ``bucket`` is taken modulo the bucket count: a worker chooses it before the call,
    perhaps for the layout before a reshard, and the ack must not fail for it."""
    acking = settle.ack(st, tasks, kept)
    validate.queue_name(queue)
    validate.claim(None, st.bucket_count, limit, lease_s)
    if isinstance(bucket, bool) or not isinstance(bucket, int) or bucket < 0:
        raise InvalidTask(f"bucket must be a non-negative integer, got {bucket!r}")
    bucket %= st.bucket_count
    # Made once: a retry recovers the first attempt's claim by its lease token.  The
    # claims run in savepoints: one that loses a slot to a concurrent claim fails on the
    # unique index, which must not undo the ack.
    turn = turn_steps(st, queue, bucket, None, control, limit, lease_s, worker_id,
                      guarded=True)

    def both() -> Steps[Handed]:
        lost: list[UUID] = []
        try:
            yield from acking.steps()
        except LeaseLost as exc:  # the others were deleted: their slots are still free
            lost = exc.task_ids
        return Handed((yield from turn()), lost)

    def steps() -> Steps[Handed]:
        handed: Handed = yield Atomic(both)
        return handed

    return Plan(steps)
