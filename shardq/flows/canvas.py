"""Signatures and their composition: chains, groups, chords and graphs of tasks.

The names are Celery's, because Python users know them:

- ``fn.s(*args, **kwargs)`` is a :class:`Signature` that takes its parent's result as
  its first argument; ``fn.si(...)`` an immutable one that takes nothing;
- :func:`chain` runs steps one after another, :func:`group` side by side, and
  :func:`chord` a group and then a callback that takes the list of the group's
  results, in the group's order;
- :class:`Graph` builds any acyclic graph: a node may wait for several others, and
  takes their results as a list (one parent: its result).

A canvas is only a description: :meth:`Canvas.enqueue` (or ``aenqueue``) writes the
whole graph in one transaction (:mod:`shardq.ops.graphs`), and the flows' resolver
(:mod:`shardq.loops.resolver`) releases each node when the nodes it waits for have
succeeded.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from shardq.core.arguments import Arguments
from shardq.core.errors import InvalidTask
from shardq.core.task import TaskId

OPTIONS = ("queue", "priority", "delay_s", "group", "max_attempts")


class Registered(Protocol):
    """What a signature calls: a task function (:class:`shardq.TaskFunction`)."""

    name: str
    queue: str
    priority: int
    max_attempts: int | None
    arguments: Arguments
    app: Any


@dataclass(frozen=True)
class FlowHandle:
    """What enqueueing a flow returns: the flow's ``id`` and ``result_id``, the task whose
    result is the flow's (a chain's last step, a chord's callback; None for a group or
    a graph with several ends).  ``ids`` are every task's, in the canvas's order."""

    id: UUID
    result_id: TaskId | None
    ids: tuple[TaskId, ...]


@dataclass(frozen=True)
class Signature:
    """One call of a task function, with its options, not yet enqueued.

    ``immutable`` signatures (``fn.si``) take no result from the nodes they wait for;
    the others (``fn.s``) take it as their first argument.
    """

    task: Registered
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    immutable: bool = False
    options: dict[str, Any] = field(default_factory=dict)

    def set(self, **options: Any) -> Signature:
        """A copy with options set: ``queue``, ``priority``, ``delay_s``, ``group`` and
        ``max_attempts`` (as :meth:`shardq.Client.enqueue` takes them).  ``key`` is
        refused: a keyed task may merge with another of its key, and a node of a flow
        must stay itself."""
        if "key" in options:
            raise InvalidTask("a task of a flow takes no key: a keyed task may merge with "
                              "another task of its key, and a flow's task must stay itself")
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise InvalidTask(f"unknown option(s) {', '.join(unknown)}: a signature takes "
                              f"{', '.join(OPTIONS)}")
        return dataclasses.replace(self, options={**self.options, **options})

    def enqueue(self, conn: Any = None, *, keep_result_s: float | None = None,
                name: str | None = None) -> FlowHandle:
        """Enqueue this call alone, as a flow of one task (see :meth:`Canvas.enqueue`)."""
        return chain(self).enqueue(conn, keep_result_s=keep_result_s, name=name)

    async def aenqueue(self, conn: Any = None, *, keep_result_s: float | None = None,
                       name: str | None = None) -> FlowHandle:
        """:meth:`enqueue` on the app's AsyncClient."""
        return await chain(self).aenqueue(conn, keep_result_s=keep_result_s, name=name)

    def __repr__(self) -> str:
        call = ", ".join([*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        return f"{self.task.name}.{'si' if self.immutable else 's'}({call})"


class Canvas(ABC):
    """A composition of signatures: a :func:`chain`, :func:`group`, :func:`chord` or
    :class:`Graph`.  ``enqueue`` writes it whole, in one transaction."""

    kind = "graph"

    def enqueue(self, conn: Any = None, *, keep_result_s: float | None = None,
                name: str | None = None) -> FlowHandle:
        """Write the flow in one transaction (a ``conn``: the caller's, as
        :meth:`shardq.Client.enqueue` joins it) and return its :class:`FlowHandle`.

        ``keep_result_s`` is how long the results of its tasks are kept once the flow
        ends (a day by default); until then they are kept whatever their functions say,
        for the tasks that take them.  ``name`` labels the flow on the dashboard.
        """
        handle: FlowHandle = _app_of(self).client.enqueue_flow(
            self, conn=conn, keep_result_s=keep_result_s, name=name)
        return handle

    async def aenqueue(self, conn: Any = None, *, keep_result_s: float | None = None,
                       name: str | None = None) -> FlowHandle:
        """:meth:`enqueue` on the app's AsyncClient (``conn``: an ``AsyncConnection``)."""
        client = await _app_of(self).async_client()
        handle: FlowHandle = await client.enqueue_flow(self, conn=conn,
                                                      keep_result_s=keep_result_s, name=name)
        return handle

    @abstractmethod
    def signatures(self) -> Iterable[Signature]:
        """Every signature of the canvas, depth first."""


@dataclass(frozen=True, eq=False)
class Chain(Canvas):
    """Steps run one after another; each ``.s`` step takes the one before's result (a
    list of results after a group)."""

    steps: tuple[Signature | Canvas, ...]
    kind = "chain"

    def signatures(self) -> Iterable[Signature]:
        return _all(self.steps)


@dataclass(frozen=True, eq=False)
class Group(Canvas):
    """Tasks run side by side; a step after them takes their results as a list, in
    this order."""

    members: tuple[Signature | Canvas, ...]
    kind = "group"

    def signatures(self) -> Iterable[Signature]:
        return _all(self.members)


@dataclass(frozen=True, eq=False)
class Chord(Canvas):
    """A group, then ``callback`` once every member succeeded, with their results as a
    list in the group's order."""

    header: Group
    callback: Signature | Canvas
    kind = "chord"

    def signatures(self) -> Iterable[Signature]:
        return _all((self.header, self.callback))


class Graph(Canvas):
    """A graph of tasks: ``add`` each signature with the nodes it waits for.

    A node that waits for one node takes its result (an ``.s`` signature); one that
    waits for several takes their results as a list, in the order given.
    """

    kind = "graph"

    def __init__(self) -> None:
        self.nodes: list[tuple[Signature, tuple[int, ...]]] = []

    def add(self, signature: Signature, after: Sequence[int] = ()) -> int:
        """Add a node that runs ``signature`` once the nodes ``after`` (numbers ``add``
        returned) succeeded; returns its number."""
        if not isinstance(signature, Signature):
            raise InvalidTask(f"a graph's node is a signature (fn.s(...)), got {signature!r}")
        deps = tuple(after)
        for d in deps:
            if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < len(self.nodes):
                raise InvalidTask(f"after names node {d!r}, which is not an earlier node of "
                                  f"this graph (0 to {len(self.nodes) - 1})")
        if len(set(deps)) != len(deps):
            raise InvalidTask("after names the same node twice")
        self.nodes.append((signature, deps))
        return len(self.nodes) - 1

    def signatures(self) -> Iterable[Signature]:
        return (s for s, _ in self.nodes)


def chain(*steps: Signature | Canvas) -> Chain:
    """Steps that run one after another (see :class:`Chain`)."""
    return Chain(_parts(steps, "chain"))


def group(*members: Signature | Canvas | Iterable[Signature | Canvas]) -> Group:
    """Tasks that run side by side: ``group(a, b)`` or ``group([a, b])``."""
    if len(members) == 1 and not isinstance(members[0], Signature | Canvas):
        members = tuple(members[0])
    return Group(_parts(members, "group"))


def chord(header: Group | Iterable[Signature | Canvas], callback: Signature | Canvas) -> Chord:
    """A group, then ``callback`` with the list of its results (see :class:`Chord`)."""
    members = header if isinstance(header, Group) else group(list(header))
    (body,) = _parts((callback,), "chord's callback")
    return Chord(members, body)


def _parts(parts: Iterable[Any], what: str) -> tuple[Signature | Canvas, ...]:
    found = tuple(parts)
    for p in found:
        if not isinstance(p, Signature | Canvas):
            raise InvalidTask(f"a {what} takes signatures (fn.s(...), fn.si(...)) and "
                              f"canvases, got {p!r}")
    if not found and what != "group":
        raise InvalidTask(f"a {what} needs at least one step")
    return found


def _all(parts: Iterable[Signature | Canvas]) -> Iterable[Signature]:
    for p in parts:
        if isinstance(p, Signature):
            yield p
        else:
            yield from p.signatures()


def _app_of(canvas: Canvas) -> Any:
    """The app whose clients write ``canvas``: its first task function's."""
    for signature in canvas.signatures():
        return signature.task.app
    raise InvalidTask("the flow has no task to enqueue")
