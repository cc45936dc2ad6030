"""``manage.py tasks_demo``: enqueue the app's tasks and read their results through
the Tasks API, printing what it saw as JSON (tests/test_django.py reads it)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.utils import timezone

from shardq.contrib.django.compat import (
    InvalidTask,
    TaskResult,
    TaskResultDoesNotExist,
    default_task_backend,
)

from ...tasks import add, flaky, report, shout, whoami

POLL_S = 0.1


def summary(result: TaskResult[Any, Any]) -> dict[str, Any]:
    """What a test asserts about a result."""
    return {
        "status": str(result.status),
        "value": result.return_value if result.status == "SUCCESSFUL" else None,
        "errors": [{"class": e.exception_class_path, "traceback": e.traceback}
                   for e in result.errors],
        "attempts": result.attempts,
        "args": result.args,
        "kwargs": result.kwargs,
        "task": result.task.module_path,
        "queue": result.task.queue_name,
        "priority": result.task.priority,
        "run_after": None if result.task.run_after is None else
        result.task.run_after.isoformat(),
        "finished": result.finished_at is not None,
        "worker_ids": result.worker_ids,
    }


def enqueue() -> dict[str, str]:
    """Enqueue each task once (one through aenqueue), one for an hour from now, one in a
    transaction that commits and one in a transaction that rolls back."""
    ids = {"add": add.enqueue(2, 3).id, "report": report.enqueue("sales").id,
           "whoami": whoami.enqueue(tag="ctx").id,
           "shout": asyncio.run(shout.aenqueue("hi")).id, "flaky": flaky.enqueue().id}
    later = add.using(priority=100, run_after=timezone.now() + timedelta(hours=1))
    ids["later"] = later.enqueue(1, 2).id
    with transaction.atomic():
        ids["committed"] = add.enqueue(a=10, b=20).id
    with transaction.atomic():
        ids["rolled_back"] = add.enqueue(0, 0).id
        transaction.set_rollback(True)
    return ids


def wait(ids: list[str], timeout_s: float, failed: list[str]) -> dict[str, Any]:
    """The results of ``ids`` (get_result) once each finished, and of ``failed`` once an
    attempt of each failed, or at the timeout."""
    deadline = time.monotonic() + timeout_s
    results = {i: default_task_backend.get_result(i) for i in [*ids, *failed]}

    def done(result: TaskResult[Any, Any]) -> bool:
        return bool(result.errors) if result.id in failed else result.is_finished

    while not all(done(r) for r in results.values()) and time.monotonic() < deadline:
        time.sleep(POLL_S)
        for result in results.values():
            if not done(result):
                result.refresh()
    return {i: summary(r) for i, r in results.items()}


async def read(ids: list[str]) -> dict[str, Any]:
    """The results of ``ids`` through aget_result; None for an id of no result."""
    found: dict[str, Any] = {}
    for i in ids:
        try:
            found[i] = summary(await default_task_backend.aget_result(i))
        except TaskResultDoesNotExist:
            found[i] = None
    return found


def refusals() -> dict[str, str]:
    """What the backend raises for calls it refuses, before anything is written."""
    attempts: dict[str, Any] = {
        "bad_arguments": lambda: add.enqueue(1, 2, 3),  # type: ignore[call-arg]
        "not_json": lambda: add.enqueue(1, object()),  # type: ignore[arg-type]
        "bad_queue": lambda: add.using(queue_name="nightly"),
        "bad_priority": lambda: add.using(priority=101),
        "unknown_id": lambda: add.get_result("0190aaaa-0000-7000-8000-000000000000"),
        "not_an_id": lambda: add.get_result("nope"),
    }
    seen: dict[str, str] = {}
    for name, attempt in attempts.items():
        try:
            attempt()
        except (TypeError, InvalidTask, TaskResultDoesNotExist) as exc:
            seen[name] = type(exc).__name__
        else:
            seen[name] = "accepted"
    return seen


class Command(BaseCommand):
    """``enqueue``, ``wait ID... [--failed ID]...``, ``read ID...`` or ``refuse``; prints
    JSON."""

    help = "Enqueue the app's tasks and read their results (JSON on stdout)"

    def add_arguments(self, parser: CommandParser) -> None:
        """The action, and the result ids it reads."""
        parser.add_argument("action", choices=["enqueue", "wait", "read", "refuse"])
        parser.add_argument("ids", nargs="*")
        parser.add_argument("--failed", action="append", default=[],
                            help="wait for an attempt of this task to fail (not to finish)")
        parser.add_argument("--timeout-s", type=float, default=60.0)

    def handle(self, *args: Any, **options: Any) -> None:
        """Do the action and print what it saw."""
        action, ids = options["action"], options["ids"]
        out: Any = (enqueue() if action == "enqueue" else
                    wait(ids, options["timeout_s"], options["failed"]) if action == "wait" else
                    asyncio.run(read(ids)) if action == "read" else refusals())
        self.stdout.write(json.dumps(out))
