"""Batches with a completion callback: tasks written together, and one more task that runs
once, when every one of them ended (succeeded, died or was cancelled), with the
batch's counts.

A batch is a flow of kind ``batch`` (:mod:`shardq.ops.graphs`): its members name the
callback as the task that waits for them, and the callback waits for as many as
there are.  :func:`enqueue` writes a whole batch at once (``enqueue_many`` with
``on_complete``).  A batch written piece by piece by others (a Spark job's
executors) is *open*: :func:`open_batch` writes the flow and its callback, which
waits for :data:`~shardq.ops.batches.OPEN_WAITS`, the pieces' tasks carry the
flow's id and the callback's (:class:`OpenBatch`), and :func:`seal` gives the count
written once every piece is in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.core.task import TaskId
from shardq.flows.canvas import Signature
from shardq.flows.nodes import Node
from shardq.ops import graphs

OPEN_WAITS = 1 << 30
"""What an open batch's callback waits for until the batch is sealed with its size."""

class BatchIds(list[TaskId]):
    """The ids of a batch's tasks, in order (a list), with its ``flow_id`` and its
    ``callback_id`` (the task ``on_complete`` runs as, whose result is the batch's)."""

    def __init__(self, ids: Iterable[TaskId], flow_id: UUID, callback_id: TaskId) -> None:
        super().__init__(ids)
        self.flow_id, self.callback_id = flow_id, callback_id


@dataclass(frozen=True)
class OpenBatch:
    """An open batch: its flow, and its callback's id (each of its tasks names both:
    ``flow_id`` and ``flow_next``)."""

    flow_id: TaskId
    callback_id: TaskId


def enqueue(st: Statements, queue: str, payloads: Iterable[Any], *, delay_s: float | None,
            run_at: datetime | None, priority: int, max_attempts: int | None,
            group: str | None, on_complete: Signature, conn: Any,
            keep_result_s: float | None = None) -> Plan[list[TaskId]]:
    """Add ``payloads`` to ``queue`` as one batch whose callback is ``on_complete`` (see
    :meth:`shardq.Client.enqueue_many`)."""
    texts = [validate.payload_json(p, st.config.max_payload_bytes)
             for p in validate.as_list(payloads, "payloads")]
    delay_s, run_at = validate.schedule(delay_s, run_at)
    shared = {"queue": validate.queue_name(queue), "priority": validate.priority(priority),
              "delay_s": delay_s, "run_at": run_at,
              "max_attempts": validate.max_attempts(max_attempts, st.config.max_attempts),
              "group": validate.group(group), "deps": None, "waits": 0}
    flow_id = st.dialect.new_ids(1)[0]
    callback = _callback(st, on_complete, flow_id, members=len(texts))
    ids = st.dialect.new_ids(len(texts) + 1)
    callback["waits"] = len(texts)
    rows = [{**shared, "payload": text, "next": [ids[-1]]} for text in texts] + [callback]
    flow = {"flow_id": flow_id, "kind": "batch", "name": None, "nodes": len(rows),
            "result_id": ids[-1], "keep_result_s": graphs.keep_for(keep_result_s)}
    value = BatchIds(ids[:-1], flow_id, ids[-1])
    return graphs.written(st, conn, flow, ids, rows, value)


def open_batch(st: Statements, on_complete: Signature, *, name: str | None = None,
               keep_result_s: float | None = None) -> Plan[OpenBatch]:
    """Write an open batch's flow and callback (see the module's docstring)."""
    flow_id = st.dialect.new_ids(1)[0]
    callback = _callback(st, on_complete, flow_id, members=None)
    callback["waits"] = OPEN_WAITS
    (callback_id,) = st.dialect.new_ids(1)
    flow = {"flow_id": flow_id, "kind": "batch", "name": graphs.flow_name(name), "nodes": 0,
            "result_id": callback_id, "keep_result_s": graphs.keep_for(keep_result_s)}
    return graphs.written(st, None, flow, [callback_id], [callback],
                           OpenBatch(flow_id, callback_id))


def seal(st: Statements, batch: OpenBatch, total: int) -> Plan[bool]:
    """Seal an open batch with the count of its tasks written; False if it was sealed
    already (or is not an open batch)."""
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise InvalidTask(f"total must be a count of tasks, got {total!r}")

    def steps() -> Steps[bool]:
        rows = yield st.fetch("flow_seal", {"flow_id": batch.flow_id, "total": total,
                                            "callback_id": batch.callback_id})
        return bool(rows)

    return plan(steps)


def _callback(st: Statements, on_complete: Signature, flow_id: UUID,
              members: int | None) -> dict[str, Any]:
    """The callback's row; it takes the batch's counts unless immutable (a batch of no
    tasks has them at once, all zero: nothing would release it)."""
    if not isinstance(on_complete, Signature):
        raise InvalidTask(f"on_complete takes a signature (fn.s(...) or fn.si(...)), got "
                          f"{on_complete!r}")
    node = Node(on_complete, (0,), None if on_complete.immutable else "counts")
    if members == 0:
        counts = {"flow": str(flow_id), "succeeded": 0, "dead": 0, "cancelled": 0}
        took = () if on_complete.immutable else (counts,)
        node = Node(dataclasses.replace(on_complete, args=(*took, *on_complete.args),
                                        immutable=True), (), None)
    row = graphs.task_row(st, "on_complete", node)
    row["next"], row["deps"] = None, None
    return row
