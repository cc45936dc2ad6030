"""Task functions: a function registered with ``@app.task``, called as it is or enqueued
with its arguments checked against its signature (:class:`TaskFunction`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from shardq.aclient import AsyncClient
from shardq.api import Operations
from shardq.client import Client
from shardq.core.arguments import Arguments
from shardq.core.errors import InvalidTask
from shardq.core.masking import Rule
from shardq.core.plan import Plan
from shardq.core.task import TaskId
from shardq.flows.canvas import Signature

P = ParamSpec("P")
R = TypeVar("R")


class Clients(Protocol):
    """What a task function enqueues through: its :class:`shardq.App`'s clients."""

    @property
    def client(self) -> Client:
        """The blocking client."""
        ...

    async def async_client(self) -> AsyncClient:
        """The asyncio client, opened."""
        ...


class TaskFunction(Generic[P, R]):
    """A function registered with ``@app.task``: call it, or ``.enqueue(...)`` it."""

    def __init__(self, app: Clients, fn: Callable[P, R], *, name: str, queue: str,
                 max_attempts: int | None, priority: int, redact: Rule | None = None
                 ) -> None:
        functools.update_wrapper(self, fn)
        self.app, self.fn, self.name, self.queue = app, fn, name, queue
        self.max_attempts, self.priority = max_attempts, priority
        self.redact = redact
        """What is masked in its payloads (``@app.task(redact=...)``), or None."""
        self.arguments = Arguments(name, fn)
        """What the function accepts: each enqueue is checked against it (:class:`InvalidTask`,
        nothing written) instead of failing in the worker attempt after attempt."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature of this call for a flow: it takes the result of the task it follows
        as its first argument, before ``args`` (see :mod:`shardq.flows.canvas`)."""
        return Signature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """An immutable signature: it takes nothing from the tasks it follows."""
        return Signature(self, args, kwargs, immutable=True)

    def _payload(self, args: Iterable[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return {"task": self.name, "args": list(args), "kwargs": dict(kwargs)}

    def _checked(self, n: int, call: tuple[Any, ...] | Mapping[str, Any]) -> dict[str, Any]:
        """The payload of call ``n`` of a batch, once its arguments are checked."""
        if isinstance(call, Mapping):
            args, kwargs = (), call
        elif isinstance(call, tuple):
            args, kwargs = call, {}
        else:
            raise InvalidTask(f"each call must be a tuple or a dict, got {call!r}")
        try:
            self.arguments.check(args, kwargs)
        except InvalidTask as exc:
            raise InvalidTask(f"call {n} of the batch: {exc}") from None
        return self._payload(args, kwargs)

    def enqueue(self, *args: Any, delay_s: float | None = None, run_at: datetime | None = None,
                priority: int | None = None, key: str | None = None, group: str | None = None,
                conn: Any = None, **kwargs: Any) -> TaskId:
        """Enqueue one call; ``delay_s``, ``run_at``, ``priority``, ``key``, ``group`` and
        ``conn`` are options (see :meth:`Client.enqueue`), every other argument goes to the
        function.
        Arguments the function cannot take are refused (:class:`InvalidTask`)."""
        client = self.app.client
        return client.perform(self._one(client, args, kwargs, delay_s, run_at, priority, key,
                                        group, conn))

    async def aenqueue(self, *args: Any, delay_s: float | None = None,
                       run_at: datetime | None = None, priority: int | None = None,
                       key: str | None = None, group: str | None = None, conn: Any = None,
                       **kwargs: Any) -> TaskId:
        """:meth:`enqueue` on the app's :class:`shardq.AsyncClient` (``conn``: an
        ``AsyncConnection``)."""
        client = await self.app.async_client()
        return await client.perform(self._one(client, args, kwargs, delay_s, run_at,
                                              priority, key, group, conn))

    def enqueue_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]], *,
                     delay_s: float | None = None, run_at: datetime | None = None,
                     priority: int | None = None, keys: Sequence[str | None] | None = None,
                     group: str | None = None, conn: Any = None,
                     on_complete: Signature | None = None) -> list[TaskId]:
        """Enqueue many calls at once: each a tuple of positional or a dict of keyword args
        (``keys``: one per call, ``group``: every call's, ``on_complete``: a callback
        once every call ended, as in :meth:`Client.enqueue_many`).  If any call's
        arguments do not fit the function, none is enqueued (:class:`InvalidTask`)."""
        client = self.app.client
        return client.perform(self._many(client, calls, delay_s, run_at, priority, keys, group,
                                         conn, on_complete))

    async def aenqueue_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]], *,
                            delay_s: float | None = None, run_at: datetime | None = None,
                            priority: int | None = None,
                            keys: Sequence[str | None] | None = None,
                            group: str | None = None, conn: Any = None,
                            on_complete: Signature | None = None) -> list[TaskId]:
        """:meth:`enqueue_many` on the app's :class:`shardq.AsyncClient`."""
        client = await self.app.async_client()
        return await client.perform(self._many(client, calls, delay_s, run_at, priority, keys,
                                               group, conn, on_complete))

    def _one(self, client: Operations, args: tuple[Any, ...], kwargs: dict[str, Any],
             delay_s: float | None, run_at: datetime | None, priority: int | None,
             key: str | None, group: str | None, conn: Any) -> Plan[TaskId]:
        """The plan of one call on ``client``, its arguments checked."""
        self.arguments.check(args, kwargs)
        return Operations.enqueue.make(
            client, self.queue, self._payload(args, kwargs), delay_s=delay_s, run_at=run_at,
            priority=self.priority if priority is None else priority,
            max_attempts=self.max_attempts, key=key, group=group, conn=conn)

    def _many(self, client: Operations, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]],
              delay_s: float | None, run_at: datetime | None, priority: int | None,
              keys: Sequence[str | None] | None, group: str | None,
              conn: Any, on_complete: Signature | None = None) -> Plan[list[TaskId]]:
        """The plan of a batch of calls on ``client``, every call's arguments checked."""
        payloads = [self._checked(n, call) for n, call in enumerate(calls)]
        return Operations.enqueue_many.make(
            client, self.queue, payloads, delay_s=delay_s, run_at=run_at,
            priority=self.priority if priority is None else priority,
            max_attempts=self.max_attempts, keys=keys, group=group, conn=conn,
            on_complete=on_complete)
