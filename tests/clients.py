"""Both clients behind one blocking face, so one behavioural test runs against each.

:class:`Blocking` drives a :class:`shardq.AsyncClient` from blocking test code: each
call of the shared API (:class:`shardq.api.Operations`) runs as a coroutine on an event
loop in a thread of its own, and its value or error comes back as the blocking Client's
would.  What only the blocking client has (the statements layer, the janitor, the
throughput history) is answered by a blocking Client on the same database.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import shardq
from shardq.api import Operations
from shardq.api.operation import operation

T = TypeVar("T")

SHARED = frozenset(name for name in dir(Operations)
                   if isinstance(getattr(Operations, name), operation))
"""The calls both clients make with one implementation."""


class Blocking:
    """An AsyncClient with a blocking face (see the module's docstring)."""

    def __init__(self, dsn: str, **settings: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="test-asyncio")
        self._thread.start()
        self.blocking = shardq.Client(dsn, **settings)
        self.aclient = self._wait(shardq.AsyncClient(dsn, **settings).open())

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def db(self) -> Any:
        """The AsyncClient's runner (its pool's statistics answer as the Client's do)."""
        return self.aclient.db

    def __getattr__(self, name: str) -> Any:
        if name not in SHARED:
            return getattr(self.blocking, name)
        call: Callable[..., Coroutine[Any, Any, Any]] = getattr(self.aclient, name)
        return lambda *args, **kwargs: self._wait(call(*args, **kwargs))

    def close(self) -> None:
        """Close both clients and stop the loop."""
        self._wait(self.aclient.close())
        self.blocking.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> Blocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_client(kind: str, dsn: str, **settings: Any) -> shardq.Client:
    """A Client (``kind`` "Client"), or an AsyncClient behind a blocking face that answers
    the Client's calls alike (``kind`` "AsyncClient")."""
    if kind == "AsyncClient":
        return Blocking(dsn, **settings)  # type: ignore[return-value]
    return shardq.Client(dsn, **settings)
