"""The app's tasks, declared with the Tasks API (``django.tasks``, or its backport)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import django

from shardq import Retry

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


@task(takes_context=True)
def flaky(context: TaskContext[Any, Any]) -> int:
    """Fails its first attempt, which is retried an hour later (the test brings it
    forward, for another worker to run it); then returns its attempt."""
    if context.attempt == 1:
        raise Retry(in_s=3600, reason="the first attempt fails")
    return context.attempt
