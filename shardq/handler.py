"""What a task handler can use: the current task's context, and outcomes it can ask for."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import DurableError
from shardq.core.task import Task
from shardq.durable import Flow, Runtime
from shardq.flows.canvas import Signature


class Retry(Exception):
    """Raise in a handler to retry the task after ``in_s`` seconds (default: the backoff).

    The attempt still counts toward ``max_attempts``.
    """

    def __init__(self, in_s: float | None = None, reason: str = "retry requested") -> None:
        super().__init__(reason)
        # Checked here, so a bad delay fails the handler (a normal, recorded failure)
        # instead of the batch its outcome is written in.
        self.in_s = validate.seconds("in_s", in_s)


class Fail(Exception):
    """Raise in a handler to send the task to the dead letters at once, with this reason."""


@dataclass(eq=False)
class Context:
    """The task a handler is running, whether its lease was lost meanwhile, and its
    durable calls (:meth:`step`, :meth:`sleep`, :meth:`sleep_until`,
    :meth:`wait_event`, :meth:`spawn`, :meth:`wait`).

    Each durable call takes a name, unique within the task, under which what it came
    to is checkpointed: when the task runs again (a retry, a crash, a wake-up), a call
    checkpointed before returns its stored value at once.  A call that waits parks the
    task: it gives back its slot, lease and connection, and runs again from the start
    when it is due, its calls so far replayed from their checkpoints.  In a coroutine
    handler each call returns an awaitable.
    """

    task: Task
    on_lose: Callable[[], object] | None = field(default=None, repr=False)
    """Called (from any thread) when the lease is lost: the worker sets it while a
    coroutine handler runs, to cancel it."""
    client: Any = field(default=None, repr=False)
    """The worker's client, which the durable calls use (set as the handler starts)."""
    is_async: bool = field(default=False, repr=False)
    """Whether the handler is a coroutine: durable calls then return awaitables."""
    _lost: bool = field(default=False, init=False, repr=False)
    _runtime: Runtime | None = field(default=None, init=False, repr=False)

    @property
    def cancelled(self) -> bool:
        """True once the lease is lost: another worker may run the task, and this
        run's result will be discarded.  Long handlers should check it and stop."""
        return self._lost

    def lose(self) -> None:
        """Mark the lease lost and cancel the handler if it is a coroutine."""
        self._lost = True
        hook = self.on_lose
        if hook is not None:
            hook()

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once and return its value (JSON), checkpointed as
        ``name`` before the handler goes on; a replay returns the stored value without
        running it.  A step that raised runs again on the next attempt.  In a coroutine
        handler ``fn`` may be a coroutine function."""
        return self._drive(lambda r: r.step(name, fn, args, kwargs))

    def sleep(self, name: str, seconds: float) -> Any:
        """Park the task for ``seconds`` (counted from the first time this call ran);
        once they passed, return None at once."""
        delay = validate.seconds("seconds", seconds)
        return self._drive(lambda r: r.sleep_until(name, None, delay))

    def sleep_until(self, name: str, when: datetime) -> Any:
        """Park the task until ``when`` (naive: UTC); after it, return None at once."""
        return self._drive(lambda r: r.sleep_until(name, when, None))

    def wait_event(self, name: str, event: str, timeout_s: float | None = None) -> Any:
        """The payload of ``event`` (:meth:`shardq.Client.emit_event`), emitted before or
        after this call; the task parks until then.  Raises
        :class:`shardq.EventTimeout` when ``timeout_s`` (counted from the first time
        this call ran) passes first; None waits without end."""
        return self._drive(lambda r: r.wait_event(name, event, timeout_s))

    def spawn(self, name: str, sig: Signature) -> Any:
        """Enqueue ``sig`` (``fn.s(...)``) as a child of this task, once however often
        the task is replayed, and return its id."""
        return self._drive(lambda r: r.spawn(name, sig))

    def wait(self, name: str, child_ids: Sequence[UUID | str],
             timeout_s: float | None = None) -> Any:
        """The results of children ``child_ids`` (from :meth:`spawn`), in order, once
        all have succeeded; the task parks until then.  A dead child raises
        :class:`shardq.ChildDied` with its error; :class:`shardq.WaitTimeout` when
        ``timeout_s`` passes first."""
        return self._drive(lambda r: r.wait(name, child_ids, timeout_s))

    def _drive(self, make: Callable[[Runtime], Flow]) -> Any:
        if self.client is None:
            raise DurableError("durable calls run in a shardq worker's handler, whose "
                               "context has the worker's client")
        runtime = self._runtime
        if runtime is None:
            runtime = self._runtime = Runtime(self.client, self.task)
        flow = make(runtime)
        return runtime.arun(flow) if self.is_async else runtime.run(flow)


_current: contextvars.ContextVar[Context] = contextvars.ContextVar("shardq_task")


def current() -> Context:
    """The context of the task this handler runs (raises LookupError outside a handler)."""
    return _current.get()


def bind(context: Context) -> contextvars.Token[Context]:
    """Make ``context`` current in this thread or coroutine."""
    return _current.set(context)


def unbind(token: contextvars.Token[Context]) -> None:
    """Undo :func:`bind`."""
    _current.reset(token)
