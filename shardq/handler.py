"""What a task handler can use: the current task's context, and outcomes it can ask for."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field

from shardq.core import validate
from shardq.core.task import Task


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
    """The task a handler is running, and whether its lease was lost meanwhile."""

    task: Task
    on_lose: Callable[[], object] | None = field(default=None, repr=False)
    """Called (from any thread) when the lease is lost: the worker sets it while a
    coroutine handler runs, to cancel it."""
    _lost: bool = field(default=False, init=False, repr=False)

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
