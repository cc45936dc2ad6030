"""The arguments a task function accepts, and the check of a call against them: a call
the function could not take is refused before anything is written (``@app.task``'s
functions, Django's tasks)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shardq.core.errors import InvalidTask


class Arguments:
    """The arguments a task function accepts, read from its signature once; :meth:`check`
    then refuses a call the function could not take, before anything is written.

    ``Signature.bind`` costs about 2 µs a call, almost half of what writing a task costs
    in a large batch; the common calls (positional arguments only, or keyword arguments
    only) are decided from counts and name sets computed here, and only the others, and
    every refused call (for its message), go through ``bind``.  A function whose
    signature cannot be read (some builtins) takes any call.
    """

    def __init__(self, name: str, fn: Callable[..., object]) -> None:
        kinds = inspect.Parameter
        self.name = name
        try:
            self.signature = inspect.signature(fn)
        except (TypeError, ValueError):
            self.signature = inspect.Signature([kinds("args", kinds.VAR_POSITIONAL),
                                                kinds("kwargs", kinds.VAR_KEYWORD)])
        params = list(self.signature.parameters.values())
        positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY,
                                                      kinds.POSITIONAL_OR_KEYWORD)]
        required = [p for p in params if p.default is p.empty
                    and p.kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD)]
        # Required positional parameters come first (a default cannot precede one).
        self.fewest = sum(1 for p in required if p.kind is not kinds.KEYWORD_ONLY)
        self.most = (math.inf if any(p.kind is kinds.VAR_POSITIONAL for p in params)
                     else len(positional))
        self.needs_keywords = any(p.kind is kinds.KEYWORD_ONLY for p in required)
        self.any_keyword = any(p.kind is kinds.VAR_KEYWORD for p in params)
        self.keywords = frozenset(p.name for p in params if p.kind in (
            kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY))
        self.required_keywords = frozenset(p.name for p in required)
        self.positional_only_required = any(p.kind is kinds.POSITIONAL_ONLY for p in required)

    def check(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Refuse with :class:`InvalidTask` a call the function cannot take, naming the
        task, its parameters and what is wrong."""
        if not kwargs:
            if self.fewest <= len(args) <= self.most and not self.needs_keywords:
                return
        elif not args:
            keys = kwargs.keys()
            if (not self.positional_only_required and self.required_keywords <= keys
                    and (self.any_keyword or keys <= self.keywords)):
                return
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidTask(f"{self.name}{self._shown()}: {exc}") from None

    def _shown(self) -> inspect.Signature:
        """The signature without annotations, which make it long and say nothing of how
        to call the function."""
        return self.signature.replace(
            parameters=[p.replace(annotation=p.empty)
                        for p in self.signature.parameters.values()],
            return_annotation=inspect.Signature.empty)
