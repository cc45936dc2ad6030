"""Handler slots: what runs claimed tasks' handlers, ``concurrency`` of them at once.

Two kinds, chosen by the app's handlers (:class:`shardq.worker.daemon.Worker`).  An
app whose handlers are all plain functions runs them in threads, one per slot, each
taking its next task from the buffer itself (:class:`ThreadSlots`).  An app with
coroutine handlers runs its slots as coroutines on one event loop
(:class:`shardq.worker.coslots.LoopSlots`).
A suspect task runs alone in a process of its own while its slot waits for it
(:mod:`shardq.worker.isolation`).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from shardq.app import App, NoHandler
from shardq.core import tracing
from shardq.handler import Context, bind, unbind
from shardq.worker import isolation
from shardq.worker.buffer import Buffer
from shardq.worker.completer import Outcome
from shardq.worker.metrics import Metrics
from shardq.worker.outcomes import Outcomes

# Weight of the newest handler duration in the moving average (about the last 20 runs).
DURATION_WEIGHT = 0.05
MIN_DURATION_S = 1e-6


class Slots(ABC):
    """What both kinds share: which task each slot runs, handler durations, and the
    rate they make.  Outcomes go to ``report``; ``taken`` is called for each task a
    slot takes from the buffer."""

    def __init__(self, app: App, buffer: Buffer, *, concurrency: int,
                 report: Callable[[Context, Outcome], None], taken: Callable[[], None],
                 metrics: Metrics) -> None:
        self.app, self.buffer, self.report, self.taken = app, buffer, report, taken
        self.concurrency = concurrency
        self.outcomes = Outcomes(app)
        self._mean_s: float | None = None  # handler durations, a moving average
        # What each slot runs now, and since when (None: idle).  Each slot writes only
        # its own entry, with one assignment, and readers copy the list: no lock on
        # the path every task takes.
        self._now: list[tuple[Context, float] | None] = [None] * concurrency
        self._recorders = [metrics.durations.recorder() for _ in range(concurrency)]

    @abstractmethod
    def start(self) -> None:
        """Start taking tasks from the buffer."""

    @abstractmethod
    def close(self) -> None:
        """Take no new tasks from the buffer."""

    @abstractmethod
    def join(self, grace_s: float) -> list[Context]:
        """Wait up to ``grace_s`` for running handlers; return the contexts still running."""

    def running(self) -> list[Context]:
        """Contexts of the tasks whose handlers are running now."""
        return [entry[0] for entry in list(self._now) if entry is not None]

    @property
    def free(self) -> int:
        """How many slots run no handler now."""
        return list(self._now).count(None)

    def rate(self) -> float | None:
        """Tasks per second the slots get through at the recent handler durations, or at
        the age of the oldest running handler when that is longer (handlers that became
        slow, or hang); None before a handler finished."""
        mean = self._mean_s
        if mean is None:
            return None
        oldest = min((entry[1] for entry in list(self._now) if entry is not None), default=None)
        if oldest is not None:
            mean = max(mean, time.perf_counter() - oldest)
        return self.concurrency / max(mean, MIN_DURATION_S)

    def _observe(self, me: int, queue: str, took: float) -> None:
        """Record one handler's duration."""
        self._recorders[me].observe(queue, took)
        # A race between slots loses one sample at worst: no lock on the hot path.
        mean = self._mean_s
        self._mean_s = took if mean is None else mean + DURATION_WEIGHT * (took - mean)


class ThreadSlots(Slots):
    """``concurrency`` threads, each running one plain function handler at a time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # as Slots'
        super().__init__(*args, **kwargs)
        self._threads = [threading.Thread(target=self._serve, args=(i,), name=f"shardq-slot-{i}",
                                          daemon=True) for i in range(self.concurrency)]

    def start(self) -> None:
        """Start the slot threads."""
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Take no new tasks from the buffer."""
        self.buffer.close()

    def join(self, grace_s: float) -> list[Context]:
        """Wait up to ``grace_s`` for running handlers; return the contexts still running."""
        self.close()
        deadline = time.monotonic() + grace_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return self.running()

    def _serve(self, me: int) -> None:
        # One task at a time: a task a slot took waits for nothing but its handler, so a
        # slow handler never holds tasks back from idle slots elsewhere.
        while (context := self.buffer.get()) is not None:  # None: the buffer closed
            self.taken()
            self._now[me] = (context, time.perf_counter())
            try:
                with tracing.process(context.task):  # current while the handler runs
                    outcome = self._run(me, context)
            finally:
                self._now[me] = None
            self.report(context, outcome)

    def _run(self, me: int, context: Context) -> Outcome:
        task = context.task
        start = time.perf_counter()
        try:
            handler = self.app.resolve(task)
        except NoHandler as exc:
            return self.outcomes.no_handler(task, exc)
        token = bind(context)
        context.client = self.app.client  # for its durable calls
        try:
            ref = self.outcomes.isolatable(handler) if task.suspect else None
            if ref is not None:
                return self.outcomes.succeeded(task, handler, isolation.run_alone(ref, context))
            return self.outcomes.returned(task, handler, handler.call(task.payload))
        except BaseException as exc:  # a handler's failure is the task's
            return self.outcomes.failed(task, handler, exc)
        finally:
            unbind(token)
            self._observe(me, task.queue, time.perf_counter() - start)
