"""``ShardqBackend``: Django's Tasks API over a shardq queue.

A Django task is enqueued on the shardq queue of its ``queue_name``, as the payload
``{"django_task": module path, "args": [...], "kwargs": {...}, ...}``;
``manage.py shardq_worker`` runs it (:mod:`shardq.contrib.django.worker`) and keeps its
return value for ``KEEP_RESULT_S``, which ``get_result`` reads back by the task's id.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast
from uuid import UUID

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils import timezone

from shardq.aclient import AsyncClient
from shardq.api import Operations
from shardq.client import Client
from shardq.contrib.django import options, results
from shardq.contrib.django.compat import (
    TASK_MIN_PRIORITY,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_enqueued,
)
from shardq.core.arguments import Arguments
from shardq.core.errors import InvalidTask as InvalidArguments
from shardq.core.plan import Plan
from shardq.core.task import TaskId
from shardq.core.validate import QUEUE_NAME


def head_start(priority: int, step_s: int) -> int:
    """Django's priority (-100 to 100, larger first) as shardq's head start in seconds.

    shardq orders a task by its enqueue time less its head start, and a negative head
    start would hold a task back past its enqueue time, so the whole range is shifted to
    start at 0: priority ``p`` is ``(p + 100) * step_s`` seconds.  With the default step
    of 36 s, priority 100 runs ahead of priority-0 tasks enqueued up to an hour before
    it, and -100 an hour behind them; no priority ever delays a task.
    """
    return (priority - TASK_MIN_PRIORITY) * step_s


@functools.lru_cache(maxsize=1024)
def arguments(fn: Callable[..., Any], takes_context: bool) -> Arguments:
    """What a task's function accepts (its ``context`` parameter left out)."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    return Arguments(name, functools.partial(fn, None) if takes_context else fn)


def run_after(task: Task[..., Any]) -> datetime | None:
    """The task's not-before time, aware (a naive one, allowed with ``USE_TZ = False``,
    is in Django's current time zone)."""
    when = task.run_after
    return timezone.make_aware(when) if when is not None and timezone.is_naive(when) else when


class ShardqBackend(BaseTaskBackend):
    """The task backend of ``TASKS = {"default": {"BACKEND":
    "shardq.contrib.django.ShardqBackend", "QUEUES": [...], "OPTIONS": {...}}}``
    (see :mod:`shardq.contrib.django.options` for the OPTIONS)."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self._client: Client | None = None
        self._lock = threading.Lock()
        # An asyncio pool belongs to one event loop: one client per loop, gone with it.
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = (
            weakref.WeakKeyDictionary())

    @functools.cached_property
    def settings(self) -> options.Options:
        """The backend's ``OPTIONS``, and its ``QUEUES``, checked on first use: a backend
        is made for ``manage.py check`` too, which reports what is wrong with them (see
        :mod:`shardq.contrib.django.checks`) instead of failing with a traceback.
        Raises ImproperlyConfigured."""
        options.check_queues(self.alias, self.queues)
        return options.read(self.alias, self.options)

    # -- clients --------------------------------------------------------------

    @property
    def client(self) -> Client:
        """The backend's blocking client, opened on first use."""
        with self._lock:
            if self._client is None:
                self._client = Client(config=self.settings.client_config())
            return self._client

    async def async_client(self) -> AsyncClient:
        """The backend's asyncio client for the running event loop, opened on first use."""
        loop = asyncio.get_running_loop()
        client = self._async.get(loop)
        if client is None:
            opened = await AsyncClient(config=self.settings.client_config()).open()
            client = self._async.setdefault(loop, opened)
            if client is not opened:  # another coroutine opened one meanwhile
                await opened.close()
        return client

    # -- the Tasks API --------------------------------------------------------

    def validate_task(self, task: Task[..., Any]) -> None:
        """Django's checks, and a queue name shardq takes (when ``QUEUES`` is empty,
        any name Django allows)."""
        super().validate_task(task)
        if not QUEUE_NAME.fullmatch(task.queue_name):
            raise InvalidTask(f"queue_name {task.queue_name!r} is not a shardq queue name: use "
                              "1-128 letters, digits, '_', '.', ':' or '-'")

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        """Enqueue a call of ``task``; inside ``transaction.atomic()`` on the queue's
        database alias, the task is written in that transaction and rolls back with it."""
        payload = self._payload(task, args, kwargs)
        client = self.client
        task_id = client.perform(self._plan(client, task, payload, self._transaction()))
        return self._enqueued(task, task_id, payload)

    async def aenqueue(self, task: Task[Any, Any], args: Any,
                       kwargs: Any) -> TaskResult[Any, Any]:
        """:meth:`enqueue` through the asyncio client (Django's transactions are
        synchronous, so the task is committed at once)."""
        payload = self._payload(task, args, kwargs)
        client = await self.async_client()
        task_id = await client.perform(self._plan(client, task, payload, None))
        return self._enqueued(task, task_id, payload)

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        """The task's state, and its return value or error once it finished (raises
        ``TaskResultDoesNotExist`` for an id of no task, or once its result expired)."""
        task_id = _task_id(result_id)
        client = self.client
        found = client.perform(results.lookup(client, task_id))
        return results.django_result(self.alias, task_id, found)

    async def aget_result(self, result_id: str) -> TaskResult[Any, Any]:
        """:meth:`get_result` through the asyncio client."""
        task_id = _task_id(result_id)
        client = await self.async_client()
        found = await client.perform(results.lookup(client, task_id))
        return results.django_result(self.alias, task_id, found)

    # -- helpers ---------------------------------------------------------------

    def _payload(self, task: Task[Any, Any], args: Sequence[Any],
                 kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The payload of a call, once the task and its arguments are checked: JSON only
        (as Django's results hold them), and a call the function can take."""
        self.validate_task(task)
        call_args = cast(list[Any], normalize_json(list(args)))
        call_kwargs = cast(dict[str, Any], normalize_json(dict(kwargs)))
        try:
            arguments(task.func, task.takes_context).check(call_args, call_kwargs)
        except InvalidArguments as exc:  # as calling the function would
            raise TypeError(str(exc)) from None
        when = run_after(task)
        return {"django_task": task.module_path, "args": call_args, "kwargs": call_kwargs,
                "queue_name": task.queue_name, "priority": task.priority,
                "run_after": None if when is None else when.isoformat()}

    def _plan(self, client: Operations, task: Task[Any, Any], payload: dict[str, Any],
              conn: Any) -> Plan[TaskId]:
        return Operations.enqueue.make(
            client, task.queue_name, payload, run_at=run_after(task),
            priority=head_start(task.priority, self.settings.priority_step_s), conn=conn)

    def _transaction(self) -> psycopg.Connection[Any] | None:
        """Django's connection to the queue's database while ``atomic()`` is open on it."""
        alias = self.settings.database
        if alias is None:  # a DSN of its own: another database, another transaction
            return None
        connection = connections[alias]
        raw = connection.connection
        if connection.in_atomic_block and isinstance(raw, psycopg.Connection):
            return raw
        return None

    def _enqueued(self, task: Task[Any, Any], task_id: TaskId,
                  payload: dict[str, Any]) -> TaskResult[Any, Any]:
        result: TaskResult[Any, Any] = TaskResult(
            task=task, id=str(task_id), status=TaskResultStatus.READY,
            enqueued_at=timezone.now(), started_at=None, finished_at=None,
            last_attempted_at=None, args=payload["args"], kwargs=payload["kwargs"],
            backend=self.alias, errors=[], worker_ids=[])
        task_enqueued.send(type(self), task_result=result)
        return result


def backend_named(alias: str) -> ShardqBackend:
    """The task backend ``alias`` of ``TASKS``, which must be a :class:`ShardqBackend`."""
    backend = task_backends[alias]
    if not isinstance(backend, ShardqBackend):
        raise ImproperlyConfigured(f"TASKS[{alias!r}] is a {type(backend).__name__}, not "
                                   "shardq.contrib.django.ShardqBackend")
    return backend


def _task_id(result_id: str) -> UUID:
    """A result id as a task id; anything else names no task."""
    try:
        return UUID(str(result_id))
    except ValueError:
        raise TaskResultDoesNotExist(result_id) from None
