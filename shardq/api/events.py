"""The calls of durable tasks' events (:class:`EventCalls`): emit one, or many at once.
A durable task waits for an event with ``shardq.current().wait_event(...)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardq.api.base import Base
from shardq.api.operation import operation
from shardq.core.plan import Plan, Steps, plan
from shardq.ops import durable


class EventCalls(Base):
    """Emitting events that durable tasks wait for."""

    @operation
    def emit_event(self, event: str, payload: Any = None, *, conn: Any = None) -> Plan[bool]:
        """Emit ``event`` with ``payload`` (JSON): the tasks waiting for it
        (``ctx.wait_event``) resume with the payload, and a task that waits for it later
        gets it at once (for ``event_keep_s``).  The first emit of a name wins; emitting
        it again changes nothing, so an emit may be retried freely.  Returns whether
        this call was the first.  With ``conn`` it is written in the caller's
        transaction, and the tasks resume once that commits."""
        emitted = durable.emit(self.statements, {event: payload}, conn)

        def steps() -> Steps[bool]:
            return bool((yield from emitted.steps()))

        return plan(steps, conn)

    @operation
    def emit_events(self, events: Mapping[str, Any], *, conn: Any = None) -> Plan[list[str]]:
        """Emit many events (name to payload, up to 10,000) in one transaction, as
        :meth:`emit_event` does each; returns the names this call emitted first."""
        return durable.emit(self.statements, events, conn)
