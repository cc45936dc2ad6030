"""The calls of flows: read one back, cancel it (:class:`FlowCalls`).  A flow is written by
its canvas (:meth:`shardq.flows.canvas.Canvas.enqueue`) or by
:meth:`~shardq.api.tasks.TaskCalls.enqueue_many` with ``on_complete``."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from shardq.api.base import Base
from shardq.api.operation import operation
from shardq.core.plan import Plan
from shardq.flows.canvas import Canvas, FlowHandle, Signature
from shardq.flows.nodes import Flow
from shardq.ops import graphs


class FlowCalls(Base):
    """Reading and cancelling flows."""

    @operation
    def enqueue_flow(self, canvas: Canvas | Signature, *, conn: Any = None,
                     keep_result_s: float | None = None,
                     name: str | None = None) -> Plan[FlowHandle]:
        """Write a flow (a :func:`shardq.chain`, :func:`shardq.group`, :func:`shardq.chord`,
        :class:`shardq.Graph` or one signature) in one transaction and return its handle:
        its ``id``, and ``result_id``, the task whose result is the flow's.  With ``conn``
        it is written in the caller's transaction.  ``keep_result_s`` is how long its
        tasks' results are kept once it ends (a day by default); ``name`` labels it."""
        return graphs.enqueue(self.statements, canvas, conn, keep_result_s=keep_result_s,
                              name=name)

    @operation
    def flow(self, flow_id: UUID | str, *, limit: int = 1000) -> Plan[Flow | None]:
        """A flow's state (``running``, ``succeeded``, ``failed``, ``cancelled``), its
        tasks' counts by state and its first ``limit`` tasks, or None for an unknown id
        (or one whose flow ended longer ago than its ``keep_result_s``)."""
        return graphs.get(self.statements, flow_id, limit)

    @operation
    def cancel_flow(self, flow_id: UUID | str) -> Plan[int]:
        """Cancel every task of a flow that has not finished: waiting, due, running (its
        handler sees ``shardq.current().cancelled`` at its worker's next heartbeat) or
        dead; returns how many.  A flow that ended is left alone (0)."""
        return graphs.cancel(self.statements, flow_id)
