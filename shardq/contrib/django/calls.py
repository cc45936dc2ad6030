"""A Django task's call as a shardq payload, and back to the task it calls.

The payload is ``{"django_task": module path, "args": [...], "kwargs": {...},
"queue_name": ..., "priority": ..., "run_after": ISO time or None}``; the worker's
result adds ``return_value``, ``started_at`` and ``worker_id`` to it, so a finished
task's result still says what was called after its row is gone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.module_loading import import_string

from shardq.contrib.django.compat import Task

TASK_KEY = "django_task"


def is_call(value: Any) -> bool:
    """Whether ``value`` is a Django task's payload (or a result made from one)."""
    return (isinstance(value, dict) and isinstance(value.get(TASK_KEY), str)
            and isinstance(value.get("args"), list) and isinstance(value.get("kwargs"), dict))


def task_of(call: dict[str, Any]) -> Task[Any, Any]:
    """The task a payload calls, with the options it was enqueued with.  Raises
    ImportError when its module path no longer names a task."""
    path = call[TASK_KEY]
    found = import_string(path)
    if not isinstance(found, Task):
        raise ImportError(f"{path} is a {type(found).__name__}, not a task (@task)")
    return found.using(priority=call.get("priority"), queue_name=call.get("queue_name"),
                       run_after=when(call.get("run_after")))


def when(value: Any) -> datetime | None:
    """An ISO time stored in a payload or a result, as a datetime."""
    return datetime.fromisoformat(value) if isinstance(value, str) else None
