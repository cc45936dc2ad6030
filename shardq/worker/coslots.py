"""Handler slots as coroutines on one event loop: for apps with coroutine handlers.

Each slot is one long-lived coroutine that takes its next task from the buffer
itself, awaits the handler in place and reports the outcome, all on the loop's
thread: a task costs no hand-off between threads, no thread wake-up and no new
asyncio task.  The loop's thread is woken once per claimed batch (the buffer's
``on_put``), and wakes as many waiting slots as the batch has tasks.  Slots block the
loop only while they run code; plain function handlers of the same app run in a pool
of ``concurrency`` threads, and a suspect's wait for its process runs there too.

A lost lease cancels the coroutine handler running the task, as it did when each
ran in a task of its own: the slot's coroutine is cancelled, and the slot takes the
cancellation for its handler's (``Task.uncancel``) and goes on to the next task.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from shardq.app import Handler, NoHandler
from shardq.core import tracing
from shardq.handler import Context, bind, unbind
from shardq.worker import isolation
from shardq.worker.completer import Outcome
from shardq.worker.eventloop import new_loop
from shardq.worker.slots import Slots

UNWIND_S = 1.0  # how long handlers cancelled at a stop may take to end


class LoopSlots(Slots):
    """``concurrency`` slot coroutines on an event loop in a thread of their own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # as Slots'
        super().__init__(*args, **kwargs)
        self.loop = new_loop()  # timers on time to the microsecond (see eventloop)
        self._thread = threading.Thread(target=self.loop.run_forever, name="shardq-asyncio",
                                        daemon=True)
        # Plain function handlers and suspects' waits; threads start as they are needed.
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="shardq-slot")
        self._closing = False
        self._abandoned = False  # the stop's grace is over: outcomes are not wanted
        self._waiters: deque[asyncio.Future[None]] = deque()  # slots waiting for tasks
        self._tasks: list[asyncio.Task[None]] = []
        self._all: Any = None  # the future of every slot's end, once started

    def start(self) -> None:
        """Start the loop's thread and the slot coroutines."""
        self._thread.start()
        self.buffer.on_put = self._poke
        self._all = asyncio.run_coroutine_threadsafe(self._main(), self.loop)

    def close(self) -> None:
        """Take no new tasks from the buffer (running handlers go on)."""
        self._closing = True
        self._poke()

    def join(self, grace_s: float) -> list[Context]:
        """Wait up to ``grace_s`` for running handlers; return the contexts still running.

        Coroutine handlers still running then are cancelled and their outcomes dropped
        (the worker gives their tasks back), so that they unwind on the loop rather than
        when the process ends; then the loop stops."""
        self.close()
        if self._all is not None:
            with contextlib.suppress(FutureTimeout):
                self._all.result(grace_s)
        still = self.running()
        if still and self._all is not None:
            self._abandoned = True
            self.loop.call_soon_threadsafe(self._cancel_all)
            with contextlib.suppress(BaseException):  # however the slots ended
                self._all.result(UNWIND_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(UNWIND_S)
        if not self._thread.is_alive():  # else a handler blocks the loop: left to the exit
            self.loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        return still

    def _cancel_all(self) -> None:
        for task in self._tasks:
            task.cancel()

    def _poke(self) -> None:
        """Wake slots waiting for tasks (from any thread)."""
        with contextlib.suppress(RuntimeError):  # a closed loop: nothing waits any more
            self.loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        """On the loop: wake one waiting slot per task in the buffer (all when closing).
        Waking every slot for each batch would step hundreds of coroutines that mostly
        find the buffer empty again."""
        waiters, n = self._waiters, self.buffer.qsize()
        while waiters and (n > 0 or self._closing):
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                n -= 1

    async def _main(self) -> None:
        self._tasks = [asyncio.create_task(self._serve(i), name=f"shardq-slot-{i}")
                       for i in range(self.concurrency)]
        await asyncio.gather(*self._tasks)

    async def _serve(self, me: int) -> None:
        buffer, waiters = self.buffer, self._waiters
        while not self._closing:
            try:
                context = buffer.pop()
            except IndexError:
                # No await between the look and the wait: a put after the look schedules
                # a wake that runs after this slot began to wait.
                waiter = self.loop.create_future()
                waiters.append(waiter)
                await waiter
                continue
            self.taken()
            self._now[me] = (context, time.perf_counter())
            try:
                with tracing.process(context.task):  # this slot's own context
                    outcome = await self._run(me, context)
            finally:
                self._now[me] = None
            self.report(context, outcome)

    async def _run(self, me: int, context: Context) -> Outcome:
        task = context.task
        start = time.perf_counter()
        try:
            handler = self.app.resolve(task)
        except NoHandler as exc:
            return self.outcomes.no_handler(task, exc)
        token = bind(context)  # in this slot's own context: the handler awaited here sees it
        context.client = self.app.client  # for its durable calls
        try:
            ref = self.outcomes.isolatable(handler) if task.suspect else None
            if ref is not None:
                encoded = await self.loop.run_in_executor(self._pool, isolation.run_alone, ref,
                                                          context)
                return self.outcomes.succeeded(task, handler, encoded)
            return self.outcomes.returned(task, handler, await self._call(me, context, handler))
        except BaseException as exc:  # a handler's failure is the task's
            if self._abandoned:  # cancelled by join: the slot ends, the task goes back
                raise
            return self.outcomes.failed(task, handler, exc)
        finally:
            unbind(token)
            self._uncancel(me)
            self._observe(me, task.queue, time.perf_counter() - start)

    async def _call(self, me: int, context: Context, handler: Handler) -> Any:
        """Run the handler: a coroutine handler here, cancelled if the lease is lost; a
        plain function in the pool, with this slot's context (the task bound)."""
        payload = context.task.payload
        if not handler.is_async:
            run = contextvars.copy_context().run
            return await self.loop.run_in_executor(self._pool, run, handler.call, payload)
        context.is_async = True
        coroutine = handler.call(payload)
        context.on_lose = lambda: self._poke_cancel(me, context)
        try:
            if context.cancelled:  # lost while it waited in the buffer
                coroutine.close()
                raise asyncio.CancelledError
            return await coroutine
        finally:
            context.on_lose = None

    def _poke_cancel(self, me: int, context: Context) -> None:
        """Cancel slot ``me``'s handler if it still runs ``context`` (from any thread)."""
        def cancel() -> None:
            entry = self._now[me]
            if entry is not None and entry[0] is context and context.on_lose is not None:
                self._tasks[me].cancel()

        with contextlib.suppress(RuntimeError):  # a closed loop: the handler runs no more
            self.loop.call_soon_threadsafe(cancel)

    def _uncancel(self, me: int) -> None:
        """Take back cancellations meant for the handler that just ended, so the slot
        goes on (one may have come after it ended, or the handler swallowed it)."""
        current = self._tasks[me]
        while current.cancelling():
            current.uncancel()
