"""A canvas laid out as the nodes of a flow, and what a flow's reader gets back.

:func:`layout` turns a :class:`~shardq.flows.canvas.Canvas` into :class:`Node` s, each
with the nodes it waits for and what it takes from them (``pass``): the result of its
one parent (``one``), the list of its parents' results (``list``, after a group),
nothing (an immutable signature, or a node that waits for nothing), or a batch's
counts (``counts``, for a callback of :meth:`shardq.Client.enqueue_many`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from shardq.core.errors import InvalidTask
from shardq.flows.canvas import Canvas, Chain, Chord, Graph, Group, Signature

FLOW_STATES = ("running", "succeeded", "failed", "cancelled")


@dataclass(slots=True)
class Node:
    """One task of a flow: its signature, the nodes it waits for (indexes, in order) and
    what it takes from them."""

    signature: Signature
    deps: tuple[int, ...]
    passes: str | None


# A step's outputs: the nodes a following step waits for, and whether they are a
# group's (the step then takes a list, even of one result).
Outputs = tuple[tuple[int, ...], bool]


def layout(canvas: Canvas | Signature) -> tuple[list[Node], Outputs]:
    """The nodes of ``canvas`` in the order they are written, and its outputs."""
    nodes: list[Node] = []
    outputs = _place(canvas, ((), False), nodes)
    if not nodes:
        raise InvalidTask("the flow has no task to enqueue")
    return nodes, outputs


def _place(part: Canvas | Signature, inputs: Outputs, nodes: list[Node]) -> Outputs:
    deps = inputs[0]
    if isinstance(part, Signature):
        nodes.append(_node(part, inputs))
        return (len(nodes) - 1,), False
    if isinstance(part, Chain):
        for step in part.steps:
            inputs = _place(step, inputs, nodes)
        return inputs
    if isinstance(part, Group):
        outs: list[int] = []
        for member in part.members:
            if type(member) is Signature:  # the usual member, placed here: a chord has many
                nodes.append(_node(member, inputs))
                outs.append(len(nodes) - 1)
            else:
                outs += _place(member, inputs, nodes)[0]
        return tuple(outs), True
    if isinstance(part, Chord):
        return _place(part.callback, _place(part.header, inputs, nodes), nodes)
    if isinstance(part, Graph):
        if deps:
            raise InvalidTask("a graph cannot follow another step: give its first nodes "
                              "their parents with add(after=...)")
        return _place_graph(part, nodes)
    raise InvalidTask(f"not a signature nor a canvas: {part!r}")


def _node(signature: Signature, inputs: Outputs) -> Node:
    """The node of a signature placed after ``inputs``.  After an empty group (a chord of
    no member), an ``.s`` signature takes the list of the group's results, which is
    empty: it has it at once, and waits for nothing."""
    deps, from_group = inputs
    if from_group and not deps and not signature.immutable:
        signature = dataclasses.replace(signature, args=([], *signature.args), immutable=True)
    return Node(signature, deps, _passes(signature, inputs))


def _passes(signature: Signature, inputs: Outputs) -> str | None:
    """What a signature placed after ``inputs`` takes from them."""
    deps, from_group = inputs
    if not deps or signature.immutable:
        return None
    return "list" if from_group or len(deps) > 1 else "one"


def _place_graph(graph: Graph, nodes: list[Node]) -> Outputs:
    """A graph's nodes; its outputs are the nodes no other waits for."""
    first = len(nodes)
    waited: set[int] = set()
    for signature, after in graph.nodes:
        waited.update(after)
        _place(signature, (tuple(first + a for a in after), False), nodes)
    ends = tuple(first + i for i in range(len(graph.nodes)) if i not in waited)
    return ends, len(ends) > 1


@dataclass(frozen=True)
class FlowNode:
    """One task of a flow as :meth:`shardq.Client.flow` lists it."""

    id: UUID
    queue: str
    task: str | None
    """The task function's name (None for a task that succeeded: only its result is left)."""
    state: str
    """``waiting`` (for other tasks), ``pending``, ``running``, ``dead`` or ``succeeded``."""
    attempts: int
    error: str | None
    enqueued_at: datetime
    finished_at: datetime | None
    waits: int | None
    """How many tasks it still waits for (a waiting task)."""


@dataclass(frozen=True)
class Flow:
    """A flow's state (:meth:`shardq.Client.flow`).

    ``state`` is ``running``; ``succeeded`` once every task succeeded; ``failed`` when a
    task died or was cancelled, so that the tasks waiting for it do not run (retrying
    the dead task from the dead letters resumes the flow); ``cancelled`` after
    :meth:`shardq.Client.cancel_flow`.  ``counts`` has every state's count of tasks:
    ``waiting``, ``pending``, ``running``, ``dead``, ``succeeded`` and ``cancelled``.
    """

    id: UUID
    kind: str
    name: str | None
    state: str
    counts: dict[str, int]
    tasks: int
    result_id: UUID | None
    created_at: datetime
    finished_at: datetime | None
    cancelled_at: datetime | None
    nodes: list[FlowNode]
    """Its tasks (up to ``limit`` of them), in the order they were enqueued: those not
    finished, and those that succeeded (the ones cancelled are only counted)."""

    def as_dict(self) -> dict[str, Any]:
        """The flow as JSON-ready values (the dashboard's API, ``shardq flow show``)."""
        return {"id": str(self.id), "kind": self.kind, "name": self.name, "state": self.state,
                "counts": self.counts, "tasks": self.tasks,
                "result_id": None if self.result_id is None else str(self.result_id),
                "created_at": self.created_at.isoformat(),
                "finished_at": _iso(self.finished_at), "cancelled_at": _iso(self.cancelled_at),
                "nodes": [{"id": str(n.id), "queue": n.queue, "task": n.task, "state": n.state,
                           "attempts": n.attempts, "error": n.error,
                           "enqueued_at": n.enqueued_at.isoformat(),
                           "finished_at": _iso(n.finished_at), "waits": n.waits}
                          for n in self.nodes]}


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
