"""A client call written once: the :class:`operation` descriptor, and the runners it
reads a call's plan with (:class:`SyncRunner` for the Client, :class:`AsyncRunner` for the
AsyncClient)."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from shardq.core.plan import Plan
from shardq.core.turnstile import Turnstile

P = ParamSpec("P")
T = TypeVar("T")


class SyncRunner(ABC):
    """Runs plans and returns their values (the blocking client)."""

    @abstractmethod
    def perform(self, plan: Plan[T]) -> T:
        """Run ``plan`` and return its value."""

    @abstractmethod
    def follow_layout(self) -> None:
        """Re-read the schema's layout if it is due (a reshard may have changed it):
        before a call composes its statements."""


class AsyncRunner(ABC):
    """Runs plans as coroutines (the asyncio client).

    A call passes its runner's :attr:`turnstile` before it makes its plan: its
    arguments are validated after its first suspension, and a burst of calls started
    at once does that work a few calls per turn of the event loop
    (:mod:`shardq.core.turnstile`); an invalid argument is raised by the awaited call.
    """

    _turnstile: Turnstile | None = None

    @property
    def turnstile(self) -> Turnstile:
        """The turnstile this runner's calls pass, made on first use."""
        if self._turnstile is None:
            self._turnstile = Turnstile()
        return self._turnstile

    @abstractmethod
    async def perform(self, plan: Plan[T]) -> T:
        """Run ``plan`` and return its value."""

    @abstractmethod
    async def follow_layout(self) -> None:
        """:meth:`SyncRunner.follow_layout`, awaited."""


class operation(Generic[P, T]):
    """A client method written once: the decorated function makes a call's plan; read
    from a client, the method runs that plan with the client's runner."""

    def __init__(self, make: Callable[Concatenate[Any, P], Plan[T]]) -> None:
        self.make = make
        # The method's name and docstring, for help() and the API reference.
        for name in functools.WRAPPER_ASSIGNMENTS:
            if hasattr(make, name):
                setattr(self, name, getattr(make, name))
        self.__wrapped__ = make

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> operation[P, T]: ...

    @overload
    def __get__(self, obj: SyncRunner, owner: type) -> Callable[P, T]: ...

    @overload
    def __get__(self, obj: AsyncRunner, owner: type
                ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            return self
        make, perform, follow = self.make, obj.perform, obj.follow_layout
        method: Callable[..., Any]
        # A call composes its statements as it makes its plan: for the layout read
        # again first when it is due, so that no call of a client idle through a
        # reshard names a bucket the schema no longer has.
        if isinstance(obj, AsyncRunner):
            enter = obj.turnstile.enter

            @functools.wraps(make)
            async def call(*args: P.args, **kwargs: P.kwargs) -> Any:
                await enter()
                await follow()
                return await perform(make(obj, *args, **kwargs))

            method = call
        else:
            @functools.wraps(make)
            def run(*args: P.args, **kwargs: P.kwargs) -> Any:
                follow()
                return perform(make(obj, *args, **kwargs))

            method = run

        # Kept on the instance, which is looked at before a non-data descriptor: the
        # next call skips this (the worker calls some of these thousands of times).
        obj.__dict__[self.name] = method
        return method
