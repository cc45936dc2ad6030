"""The app's tasks, declared with the Tasks API (``django.tasks``, or its backport)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import django

if TYPE_CHECKING or django.VERSION >= (6, 0):
    from django.tasks import TaskContext, task
else:
    from django_tasks import TaskContext, task


class ReportFailed(Exception):
    """What :func:`report` raises."""


@task
def add(a: int, b: int) -> int:
    """The sum of two numbers."""
    return a + b


@task(queue_name="reports", priority=50)
def report(name: str) -> None:
    """Fails, every time."""
    raise ReportFailed(f"no data for {name}")


@task(takes_context=True)
def whoami(context: TaskContext[Any, Any], tag: str) -> dict[str, Any]:
    """What the task's context says about its run."""
    return {"tag": tag, "id": context.task_result.id, "attempt": context.attempt}


@task
async def shout(word: str) -> str:
    """``word`` in capitals, from a coroutine."""
    await asyncio.sleep(0)
    return word.upper()
