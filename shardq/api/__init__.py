"""The client API, written once for :class:`shardq.Client` and :class:`shardq.AsyncClient`.

Each method of :class:`Operations` makes the :class:`~shardq.core.plan.Plan` of one
call (validating its arguments on the way) and is marked
:class:`~shardq.api.operation.operation`.  Read from a
:class:`~shardq.api.operation.SyncRunner` (the Client) it is a plain method that runs
the plan and returns its value; read from an :class:`~shardq.api.operation.AsyncRunner`
(the AsyncClient) it is a coroutine function.  So the two clients share every method's
signature, docstring, validation and statements, and differ only in the runner beneath
them.  The calls are grouped by what they act on: :mod:`shardq.api.tasks` (a task's
life), :mod:`shardq.api.queues` (queues' limits, figures, dead letters and control),
:mod:`shardq.api.flows` (task graphs) and :mod:`shardq.api.events` (durable tasks'
events), over :mod:`shardq.api.base`.
"""

from __future__ import annotations

from shardq.api.base import resolve
from shardq.api.events import EventCalls
from shardq.api.flows import FlowCalls
from shardq.api.queues import QueueCalls
from shardq.api.tasks import TaskCalls

__all__ = ["Operations", "resolve"]


# The API reference lists inherited calls from the last base on: a task's calls come
# first, then the queues', then the flows', then the events of durable tasks.
class Operations(EventCalls, FlowCalls, QueueCalls, TaskCalls):
    """The calls both clients offer, each made once (see the module's docstring)."""
