"""A Django task's result: shardq's outcome of the task, in the Tasks API's terms.

A task that succeeded has its call and return value in its shardq result (see
:mod:`shardq.contrib.django.calls`); one waiting, running or failed has its call in its
row.  So a lookup reads the result and, unless the task succeeded, the row, both in one
plan that either client runs.  ``worker_ids`` has one entry per attempt (so ``attempts``
is right), naming the worker of that attempt as ``host:pid``: shardq records each
attempt's worker in ``shardq.attempts`` (a row carries them, a succeeded task's are read
when it had more than one attempt; one that succeeded at once has its worker in its
result).  An entry is empty where no worker is known (the attempt was claimed outside a
worker, or its record is no longer kept).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from shardq.api import Operations
from shardq.contrib.django import calls
from shardq.contrib.django.compat import (
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
)
from shardq.core.plan import Plan, Steps, plan
from shardq.core.task import Attempt, TaskInfo
from shardq.core.task import TaskResult as Outcome

STATUSES = {"pending": TaskResultStatus.READY, "running": TaskResultStatus.RUNNING,
            "succeeded": TaskResultStatus.SUCCESSFUL, "failed": TaskResultStatus.FAILED}
TRACEBACK = "Traceback (most recent call last):"
# The line a traceback ends with names the exception's class: module.QualName, the
# module left out for built-in exceptions.
EXCEPTION_LINE = re.compile(r"([A-Za-z_][\w.]*)(?::|$)")
UNNAMED = "builtins.Exception"  # the class of an error whose text names none
# Attempts that gave their attempt back (the task's count of attempts leaves them out):
# released, deferred, and parked by a durable call that waits.
GIVEN_BACK = frozenset({"released", "deferred", "parked"})


@dataclass(frozen=True)
class Found:
    """What shardq holds about a task: its outcome, its row while it has one, and its
    recorded attempts."""

    outcome: Outcome
    info: TaskInfo | None
    history: Sequence[Attempt] = ()


def lookup(client: Operations, task_id: UUID) -> Plan[Found]:
    """The plan reading a task's outcome, and its row unless it succeeded (a succeeded
    task's attempts instead, when it had several)."""
    def steps() -> Steps[Found]:
        outcome: Outcome = yield from Operations.result.make(client, task_id).steps()
        if outcome.status == "unknown":
            return Found(outcome, None)
        if outcome.status != "succeeded":
            info: TaskInfo | None = yield from Operations.get.make(client, task_id).steps()
            if info is not None:
                return Found(outcome, info, info.history)
            # it finished between the two reads
            outcome = yield from Operations.result.make(client, task_id).steps()
        if outcome.status != "succeeded" or (outcome.attempts or 0) <= 1:
            return Found(outcome, None)
        history: list[Attempt] = yield from Operations.attempts.make(client, task_id).steps()
        return Found(outcome, None, history)

    return plan(steps)


def django_result(alias: str, task_id: UUID, found: Found) -> TaskResult[Any, Any]:
    """``found`` as a Django TaskResult of backend ``alias``.  Raises
    ``TaskResultDoesNotExist`` when shardq has no such task, its result expired, or it
    is not a Django task's."""
    outcome, info = found.outcome, found.info
    status = STATUSES.get(outcome.status)
    if status is TaskResultStatus.SUCCESSFUL:
        call, run = outcome.value, _succeeded(outcome.value)
    else:
        call, run = (info.payload, _from_row(outcome, info)) if info else (None, None)
    if status is None or run is None or not calls.is_call(call):
        raise TaskResultDoesNotExist(str(task_id))
    workers = worker_ids(outcome.attempts or 0, found.history, run.worker)
    result: TaskResult[Any, Any] = TaskResult(
        task=calls.task_of(call), id=str(task_id), status=status,
        enqueued_at=outcome.enqueued_at, started_at=run.started_at,
        finished_at=outcome.finished_at, last_attempted_at=run.last_attempted_at,
        args=call["args"], kwargs=call["kwargs"], backend=alias,
        errors=[TaskError(exception_class_path=exception_path(e), traceback=e)
                for e in run.errors],
        worker_ids=workers)
    if status is TaskResultStatus.SUCCESSFUL:
        # A TaskResult is frozen; Django's own backends set the value this way too.
        object.__setattr__(result, "_return_value", call.get("return_value"))
    return result


@dataclass(frozen=True)
class Run:
    """What a result says about a task's attempts beyond shardq's outcome."""

    started_at: datetime | None
    last_attempted_at: datetime | None
    errors: list[str]
    worker: str
    """The worker of the attempt that succeeded, as its result records it (else empty)."""


def _succeeded(value: Any) -> Run | None:
    """The attempt a succeeded task's result records (None: not a Django task's)."""
    if not calls.is_call(value):
        return None
    started = calls.when(value.get("started_at"))
    return Run(started, started, [], str(value.get("worker_id", "")))


def _from_row(outcome: Outcome, info: TaskInfo) -> Run:
    """The attempts of a task that has a row: waiting (its last error, if a retry is
    due), running, or failed (dead, with its last error)."""
    error = outcome.error if outcome.status == "failed" else info.last_error
    return Run(info.first_claimed_at, info.last_claimed_at, [error] if error else [], "")


def worker_ids(attempts: int, history: Sequence[Attempt], succeeded_on: str) -> list[str]:
    """The worker of each of a task's ``attempts``, oldest first, from its recorded
    ``history``; ``succeeded_on`` names the worker of the attempt that succeeded when no
    record of it is kept (a task that succeeded at once has none)."""
    counted = [a for a in history if a.outcome not in GIVEN_BACK]
    workers = [_worker(a) for a in counted]
    if succeeded_on and (not counted or counted[-1].outcome != "acked"):
        workers.append(succeeded_on)
    workers = workers[-attempts:] if attempts else []
    return [""] * (attempts - len(workers)) + workers


def _worker(attempt: Attempt) -> str:
    """An attempt's worker as ``host:pid`` (as a Django task's result names its worker),
    or empty for a claim made outside a worker."""
    if attempt.worker_host is None or attempt.worker_pid is None:
        return ""
    return f"{attempt.worker_host}:{attempt.worker_pid}"


def exception_path(text: str) -> str:
    """The class of the exception a stored traceback ends with, as Django names it
    (``module.QualName``, ``builtins.`` for built-in ones)."""
    start = text.rfind(TRACEBACK)
    if start < 0:
        return UNNAMED
    for line in text[start:].splitlines()[1:]:
        if line and not line[0].isspace():  # the frames are indented; the error is not
            named = EXCEPTION_LINE.match(line)
            if named is None:
                return UNNAMED
            name = named.group(1)
            return name if "." in name else f"builtins.{name}"
    return UNNAMED
