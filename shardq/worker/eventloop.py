"""The event loop that coroutine handler slots run on, with timers kept to the microsecond.

asyncio's default loop on Linux waits in ``epoll_wait``, which counts whole
milliseconds: a timer due in 0.2 ms is waited for a whole millisecond (the timeout is
rounded up, so that the wait is never short).  With several slots whose handlers sleep
or time out at staggered moments, each waits up to a millisecond past its time: 16
slots of handlers that sleep 1 ms ran a fifth slower that way.  The selector here
waits with ``select`` on the epoll descriptor itself, whose timeout has microseconds,
and asks epoll for the events only once it is readable: a timer costs one system call,
as before, and fires on time.
"""

from __future__ import annotations

import asyncio
import select
import selectors

FD_SETSIZE = 1024  # select() takes no descriptor numbered this or higher


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop for the handler slots: with :class:`FineEpollSelector` where
    epoll exists and its descriptor fits ``select``, else asyncio's default."""
    if hasattr(selectors, "EpollSelector"):
        selector = FineEpollSelector()
        if selector.fileno() < FD_SETSIZE:
            return asyncio.SelectorEventLoop(selector)
        selector.close()
    return asyncio.new_event_loop()


class FineEpollSelector(selectors.EpollSelector):
    """An epoll selector whose waits end on time to the microsecond, not the millisecond."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """As ``EpollSelector.select``; a positive timeout is waited for in ``select``."""
        if timeout is None or timeout <= 0:
            return super().select(timeout)
        readable, _, _ = select.select([self.fileno()], [], [], timeout)
        return super().select(0) if readable else []
