"""A failed handler's traceback as its task stores it: the handler's frames, not shardq's.

The frames of the worker that called the handler (its slots, the app's dispatch) say
nothing about why the task failed, and they crowd the few lines a reader of
``result().error`` or of a dead letter looks at.  They are left out; the handler's
frames, those of the code it called, and the exception's line stay, for the
exception and every exception chained to it.
"""

from __future__ import annotations

import os
import traceback

import shardq

OWN = os.path.dirname(os.path.abspath(shardq.__file__)) + os.sep
"""Where shardq's own modules are: frames in files under it are left out."""


def handler_traceback(exc: BaseException) -> str:
    """``exc``'s traceback, without shardq's own frames."""
    summary = traceback.TracebackException.from_exception(exc)
    _strip(summary, set())
    return "".join(summary.format())


def _strip(summary: traceback.TracebackException, seen: set[int]) -> None:
    if id(summary) in seen:  # chains can loop back on themselves
        return
    seen.add(id(summary))
    summary.stack = traceback.StackSummary.from_list(
        [frame for frame in summary.stack if not os.path.abspath(frame.filename).startswith(OWN)])
    for chained in (summary.__cause__, summary.__context__,
                    *(getattr(summary, "exceptions", None) or ())):
        if chained is not None:
            _strip(chained, seen)
