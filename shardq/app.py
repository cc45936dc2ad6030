"""The task API: an :class:`App` registers functions as tasks and raw queue handlers."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar, overload

from shardq.aclient import AsyncClient
from shardq.api import resolve
from shardq.client import Client
from shardq.core import embedded, validate
from shardq.core.config import ClientConfig, check_setting
from shardq.core.errors import ConfigError, InvalidTask
from shardq.core.masking import Rule, checked, for_function
from shardq.core.redaction import redact
from shardq.core.task import Task
from shardq.loops.periodic import Schedule
from shardq.maths.cadence import Cadence, missed_policy
from shardq.ops.results import keep_result_s as checked_keep
from shardq.taskfunction import TaskFunction

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_QUEUE = "default"


def _options(label: str, queue: str, priority: int = 0, max_attempts: int | None = None
             ) -> str:
    """The queue of a task's (or handler's) options once every option is checked as
    enqueue checks it, in the same words; ConfigError, naming ``label``, otherwise.

    Checked when the function is decorated: a bad option would otherwise be refused at
    every enqueue, or at every slot of a schedule, instead of once at import.
    """
    try:
        validate.priority(priority)
        validate.max_attempts(max_attempts, 1)
        return validate.queue_name(queue)
    except InvalidTask as exc:
        raise ConfigError(f"{label}: {exc}") from None


class NoHandler(LookupError):
    """A claimed task has no handler in the app: its name is unknown, or it is a raw
    payload on a queue the app has only task functions for.  Workers dead-letter it."""


@dataclass(frozen=True)
class Handler:
    """How a worker runs the tasks of one name (or one raw queue)."""

    fn: Callable[..., Any]
    queue: str
    lease_s: float | None
    raw: bool
    keep_result_s: float | None = None
    """How long the result of a task that succeeded is kept (None: not kept)."""
    redact: Rule | None = None
    """What is masked in its tasks' payloads, and in their errors where they quote them
    (see :mod:`shardq.core.masking`); None: nothing."""
    is_async: bool = field(init=False)
    """Whether the function is a coroutine function (runs on the worker's event loop)."""

    def __post_init__(self) -> None:
        # Asked for every task a worker runs: inspecting the function each time costs
        # more than a no-op handler does.
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))

    def call(self, payload: Any) -> Any:
        """Call the function for a payload: as is for raw handlers, else its args/kwargs."""
        if self.raw:
            return self.fn(payload)
        return self.fn(*payload.get("args", ()), **payload.get("kwargs", {}))


class App:
    """A set of task functions and queue handlers, with a lazily opened :class:`Client`.

    ``App(dsn=None, **settings)`` takes the same settings as :class:`Client`; no
    connection is made until the first enqueue or until a worker starts.  ``App(client=c)``
    binds it to a Client you made: its tasks are enqueued through ``c``, and its
    AsyncClient takes ``c``'s settings.  An App with neither reads ``SHARDQ_DSN`` when it
    first connects, and with nothing named uses the embedded PostgreSQL, unless a client
    of this process was opened on a named database: then it raises
    :class:`shardq.ConfigError` rather than send its tasks to another database than the
    one that client reads.
    """

    def __init__(self, dsn: str | None = None, *, client: Client | None = None,
                 **settings: Any) -> None:
        if client is not None and (dsn is not None or settings):
            raise ConfigError("App(client=...) takes the client's settings: give no dsn "
                              "or settings beside it")
        self._client_args = (dsn, settings)
        self._client: Client | None = client
        self._async: tuple[asyncio.AbstractEventLoop, AsyncClient] | None = None
        self._lock = threading.Lock()
        self.tasks: dict[str, Handler] = {}
        self.raw: dict[str, Handler] = {}
        self.schedules: dict[str, Schedule] = {}

    @property
    def client(self) -> Client:
        """The app's Client, opened on first use."""
        with self._lock:
            if self._client is None:
                self._client = Client(config=self._settings())
            return self._client

    async def async_client(self) -> AsyncClient:
        """The app's :class:`shardq.AsyncClient` for the running event loop, opened on first
        use (a pool belongs to one loop: another loop gets a client of its own)."""
        loop = asyncio.get_running_loop()
        held = self._async
        if held is None or held[0] is not loop:
            bound = self._client
            config = bound.config if bound is not None else self._settings()
            client = await AsyncClient(config=config).open()
            self._async, held = (loop, client), (loop, client)
        return held[1]

    def _settings(self) -> ClientConfig:
        """The settings of the app's own client, ``SHARDQ_*`` read now; refused when they
        name no database while a client of this process named one (see the class)."""
        dsn, settings = self._client_args
        config = resolve(dsn, None, settings)
        other = None if config.dsn else embedded.named()
        if other is not None:
            raise ConfigError(
                f"this App names no database (no dsn, no SHARDQ_DSN) but a client of this "
                f"process uses {redact(other)}: bind it with App(client=...) or "
                f"App(dsn=...), or its tasks would go to the embedded database")
        return config

    async def aclose(self) -> None:
        """Close the app's AsyncClient, if one is open (the next use opens another)."""
        held, self._async = self._async, None
        if held is not None:
            await held[1].close()

    def use_client(self, client: Client) -> None:
        """Use an existing Client (the worker shares its own)."""
        with self._lock:
            self._client = client

    @overload
    def task(self, fn: Callable[P, R], *, queue: str = ..., name: str | None = ...,
             max_attempts: int | None = ..., lease_s: float | None = ...,
             priority: int = ..., keep_result_s: float | None = ...,
             redact: Rule | None = ...) -> TaskFunction[P, R]: ...

    @overload
    def task(self, fn: None = None, *, queue: str = ..., name: str | None = ...,
             max_attempts: int | None = ..., lease_s: float | None = ...,
             priority: int = ..., keep_result_s: float | None = ...,
             redact: Rule | None = ...
             ) -> Callable[[Callable[P, R]], TaskFunction[P, R]]: ...

    def task(self, fn: Callable[P, R] | None = None, *, queue: str = DEFAULT_QUEUE,
             name: str | None = None, max_attempts: int | None = None,
             lease_s: float | None = None, priority: int = 0,
             keep_result_s: float | None = None, redact: Rule | None = None
             ) -> TaskFunction[P, R] | Callable[[Callable[P, R]], TaskFunction[P, R]]:
        """Register a function (sync or async) as a task; usable bare (``@app.task``) or
        with options (``@app.task(queue=...)``).  With ``keep_result_s``, what the
        function returns is kept that long after the task succeeded, for
        :meth:`Client.result` (a value that is not JSON is not kept: the result says
        why instead).  ``redact`` masks parts of its payloads: field names (a list or
        tuple, matched at any depth, and the function's arguments of those names), or a
        callable from a payload to its masked copy.  Workers mask those values in the
        errors they store, and the dashboard serving the app shows the payloads masked."""
        def register(f: Callable[P, R]) -> TaskFunction[P, R]:
            task_name = name or f"{f.__module__}.{f.__qualname__}"
            try:
                validate.task_name(task_name)
            except InvalidTask as exc:
                raise ConfigError(str(exc)) from None
            task_queue = _options(f"task {task_name!r}", queue, priority, max_attempts)
            if lease_s is not None:
                check_setting(ClientConfig, "lease_s", lease_s, f"lease_s of task {task_name!r}")
            keep = checked_keep(keep_result_s, f"keep_result_s of task {task_name!r}")
            rule = checked(redact, f"redact of task {task_name!r}")
            if task_name in self.tasks:
                raise ConfigError(f"a task named {task_name!r} is already registered")
            self.tasks[task_name] = Handler(f, task_queue, lease_s, raw=False,
                                            keep_result_s=keep, redact=for_function(rule, f))
            return TaskFunction(self, f, name=task_name, queue=task_queue,
                                max_attempts=max_attempts, priority=priority, redact=rule)

        return register(fn) if fn is not None else register

    def periodic(self, *, cron: str | None = None, every_s: float | None = None,
                 tz: str = "UTC", missed: str = "once", queue: str = DEFAULT_QUEUE,
                 name: str | None = None, priority: int = 0, max_attempts: int | None = None,
                 lease_s: float | None = None, keep_result_s: float | None = None,
                 redact: Rule | None = None
                 ) -> Callable[[Callable[[], R]], TaskFunction[[], R]]:
        """Register a function without arguments as a task enqueued on a schedule.

        Give ``cron`` (a cron expression, read on the wall clock of ``tz``) or
        ``every_s``.  ``missed`` says what a worker does with slots that passed while no
        worker ran: ``"once"`` runs one catch-up, ``"all"`` runs each, ``"skip"`` runs
        none.  The other options are :meth:`task`'s; the schedule's name is the task's.
        Workers of the app fire each slot once between them (see :mod:`shardq.periodic`).
        A schedule that could never fire (a cron expression that matches no date), or a
        bad option, raises :class:`ConfigError` naming the schedule.
        """
        def register(f: Callable[[], R]) -> TaskFunction[[], R]:
            try:
                inspect.signature(f).bind()
            except TypeError:
                raise ConfigError(f"a periodic task takes no arguments: {f.__qualname__}"
                                  ) from None
            schedule_name = name or f"{f.__module__}.{f.__qualname__}"
            try:
                when = Cadence(cron, every_s, tz)
                policy = missed_policy(missed)
            except ConfigError as exc:
                raise ConfigError(f"periodic schedule {schedule_name!r}: {exc}") from None
            schedule = Schedule(schedule_name, when, queue, priority, max_attempts, policy)
            task: TaskFunction[[], R] = self.task(f, queue=queue, name=schedule.name,
                                                  max_attempts=max_attempts, lease_s=lease_s,
                                                  priority=priority, keep_result_s=keep_result_s,
                                                  redact=redact)
            self.schedules[schedule.name] = schedule
            return task

        return register

    def handler(self, queue: str, *, lease_s: float | None = None,
                keep_result_s: float | None = None, redact: Rule | None = None
                ) -> Callable[[Callable[[Any], R]], Callable[[Any], R]]:
        """Register a raw handler: it gets the payload of every task of ``queue``
        (``keep_result_s``, ``redact``: as for :meth:`task`)."""
        def register(f: Callable[[Any], R]) -> Callable[[Any], R]:
            if lease_s is not None:
                check_setting(ClientConfig, "lease_s", lease_s, f"lease_s of queue {queue!r}")
            keep = checked_keep(keep_result_s, f"keep_result_s of queue {queue!r}")
            rule = checked(redact, f"redact of queue {queue!r}")
            if queue in self.raw:
                raise ConfigError(f"queue {queue!r} already has a handler")
            self.raw[_options(f"handler of queue {queue!r}", queue)] = Handler(
                f, queue, lease_s, raw=True, keep_result_s=keep, redact=rule)
            return f

        return register

    @property
    def queues(self) -> list[str]:
        """Every queue the app has tasks or handlers for, sorted."""
        return sorted({h.queue for h in self.tasks.values()} | set(self.raw))

    def handlers(self) -> list[Handler]:
        """Every handler of the app: its task functions' and its raw queues'."""
        return [*self.tasks.values(), *self.raw.values()]

    def lease_s(self, queue: str, default: float) -> float:
        """The lease for claims on ``queue``: the longest any of its tasks asked for, else
        ``default``."""
        asked = [h.lease_s for h in self.handlers() if h.queue == queue and h.lease_s is not None]
        return max(asked) if asked else default

    def resolve(self, task: Task) -> Handler:
        """The handler for a claimed task (raises :class:`NoHandler` for an unknown one)."""
        if task.queue in self.raw:
            return self.raw[task.queue]
        payload = task.payload
        name = payload.get("task") if isinstance(payload, dict) else None
        if name is None:
            raise NoHandler(f"no handler for a task without a name (a raw payload) on queue "
                            f"{task.queue!r} in this app")
        if name not in self.tasks:
            raise NoHandler(f"no handler for task {name!r} on queue {task.queue!r} in this app")
        return self.tasks[name]
