"""``on_complete``: the tasks of one Spark write (or micro-batch) as one batch, and the
task that runs once every one of them ended.

The batch is an open batch of :mod:`shardq.ops.batches`, written in the transaction
that merges the staging table: that transaction opens it (its flow, and its callback,
which waits for :data:`~shardq.ops.batches.OPEN_WAITS`), inserts the rows as tasks
that name the flow and the callback, and seals it with the count of tasks the merge
inserted.  So the count is exact whatever Spark retried (it is the merge's own count,
in the transaction that inserted them), a write that fails leaves no callback behind,
and a merge whose rows the ledger held already (a re-run, a micro-batch run again)
rolls its batch back: no second callback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from shardq.core.db import Conn
from shardq.core.errors import InvalidTask
from shardq.core.plan import Plan
from shardq.core.statements import Statements
from shardq.flows.canvas import Signature
from shardq.flows.nodes import Node
from shardq.ops import batches, graphs
from shardq.ops.batches import OpenBatch

T = TypeVar("T")
# write_stream_tasks takes one signature for every micro-batch, or a function of the
# batch id that returns the batch's.
PerBatch = Signature | Callable[[int], Signature]

NOT_A_SIGNATURE = "on_complete takes a signature (fn.s(...) or fn.si(...))"
NO_KEY = ("a write with on_complete takes no key: a keyed row may merge into another task "
          "of its key, which is not the batch's")


def refuse(on_complete: Any, key: Any, *, per_batch: bool = False) -> None:
    """Raise InvalidTask, one line, unless ``on_complete`` is None or a signature (with
    ``per_batch``, also a function of the micro-batch id), given without ``key``."""
    if on_complete is None:
        return
    if not isinstance(on_complete, Signature) and not (per_batch and callable(on_complete)):
        also = " or a function of the micro-batch id that returns one" if per_batch else ""
        raise InvalidTask(f"{NOT_A_SIGNATURE}{also}, got {on_complete!r}")
    if key is not None:
        raise InvalidTask(NO_KEY)


def of_batch(on_complete: PerBatch, batch_id: int) -> Signature:
    """The callback of micro-batch ``batch_id``."""
    if isinstance(on_complete, Signature):
        return on_complete
    found = on_complete(batch_id)
    if not isinstance(found, Signature):
        raise InvalidTask(f"on_complete({batch_id}) must return a signature (fn.s(...) or "
                          f"fn.si(...)), got {found!r}")
    return found


def check(st: Statements, on_complete: Signature, name: str | None) -> None:
    """Check the callback's arguments and options, and the flow's name, as the batch's
    writing will (InvalidTask), before Spark runs anything."""
    graphs.flow_name(name)
    passes = None if on_complete.immutable else "counts"
    graphs.task_row(st, "on_complete", Node(on_complete, (0,), passes))


def open_batch(st: Statements, on_complete: Signature, name: str | None,
               conn: Conn) -> OpenBatch:
    """Write an open batch's flow and callback in ``conn``'s transaction."""
    return _perform(st, batches.open_batch(st, on_complete, name=name), conn)


def seal(st: Statements, batch: OpenBatch, total: int, conn: Conn) -> None:
    """Seal ``batch`` with ``total`` tasks in ``conn``'s transaction (opened in it)."""
    sealed = _perform(st, batches.seal(st, batch, total), conn)
    assert sealed, "an open batch of this transaction was sealed already"


def params(batch: OpenBatch | None) -> dict[str, Any]:
    """The merge's parameters that name the batch (none without one)."""
    if batch is None:
        return {}
    return {"flow_id": batch.flow_id, "callback_id": batch.callback_id}


def _perform(st: Statements, plan: Plan[T], conn: Conn) -> T:
    """Run ``plan`` once on ``conn``, inside its open transaction (and in the plan's
    tracing span, as a client would)."""
    bound = dataclasses.replace(plan, conn=conn)
    if bound.around is None:
        return st.perform(bound)
    with bound.around:
        return st.perform(bound)
