"""The worker side: a shardq handler that runs Django tasks, and the worker around it.

``manage.py shardq_worker`` registers :func:`run_task` as the raw handler of each
queue it consumes; the handler imports the task by its module path and calls it the
Tasks API's way (``Task.call``, with a ``TaskContext`` first when the task takes one),
sending Django's ``task_started`` and ``task_finished`` signals.  Its return value,
with the call, becomes the shardq task's result, kept ``KEEP_RESULT_S``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import socket
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import django
from django.apps import apps
from django.db import close_old_connections
from django.utils import timezone

from shardq.app import App
from shardq.contrib.django import calls
from shardq.contrib.django.backend import ShardqBackend, backend_named
from shardq.contrib.django.compat import (
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)
from shardq.core.config import ClientConfig, from_arguments
from shardq.core.errors import ConfigError
from shardq.handler import current
from shardq.worker import logs, processes
from shardq.worker.config import WorkerConfig
from shardq.worker.run import serve_app


def worker_id() -> str:
    """This process as Django's results name a worker: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run_task(payload: Any) -> dict[str, Any]:
    """Run the Django task ``payload`` calls; return its result (see
    :mod:`shardq.contrib.django.calls`).  A task that raises fails the attempt."""
    if not apps.ready:  # a suspect task runs alone in a fresh interpreter (spawned)
        django.setup()
    if not calls.is_call(payload):
        raise ValueError(f"not a Django task's payload: {payload!r:.200}")
    task = calls.task_of(payload)
    attempt = current().task
    started = timezone.now()
    result: TaskResult[Any, Any] = TaskResult(
        task=task, id=str(attempt.id), status=TaskResultStatus.RUNNING,
        enqueued_at=attempt.enqueued_at, started_at=started, finished_at=None,
        last_attempted_at=started, args=payload["args"], kwargs=payload["kwargs"],
        backend=task.backend, errors=[], worker_ids=[worker_id()] * attempt.attempts)
    sender = type(task.get_backend())
    task_started.send(sender, task_result=result)
    close_old_connections()  # as a request does: CONN_MAX_AGE and broken connections
    try:
        args = [TaskContext(task_result=result), *result.args] if task.takes_context else (
            result.args)
        value = normalize_json(task.call(*args, **result.kwargs))
    except BaseException as exc:
        if attempt.is_last_attempt:  # else the task is READY again, for its next attempt
            kind = type(exc)
            _finish(result, TaskResultStatus.FAILED, [TaskError(
                exception_class_path=f"{kind.__module__}.{kind.__qualname__}",
                traceback="".join(traceback.format_exception(exc)))])
            task_finished.send(sender, task_result=result)
        raise
    finally:
        close_old_connections()
    _finish(result, TaskResultStatus.SUCCESSFUL, [])
    object.__setattr__(result, "_return_value", value)
    task_finished.send(sender, task_result=result)
    return {**payload, "return_value": value, "started_at": started.isoformat(),
            "worker_id": worker_id()}


def _finish(result: TaskResult[Any, Any], status: TaskResultStatus,
            errors: list[TaskError]) -> None:
    # A TaskResult is frozen; Django's own backends update theirs this way too.
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", timezone.now())
    result.errors.extend(errors)


def queues_of(backend: ShardqBackend, asked: Sequence[str]) -> tuple[str, ...]:
    """The queues a worker of ``backend`` consumes: those ``asked`` for, which the
    backend must allow, else all of its ``QUEUES``."""
    allowed = sorted(backend.queues)
    if not asked and not allowed:
        raise ConfigError(f"TASKS[{backend.alias!r}] allows any queue (QUEUES is empty): "
                          "name the queues to consume with --queue")
    unknown = [q for q in asked if allowed and q not in allowed]
    if unknown:
        raise ConfigError(f"--queue {unknown[0]!r} is not one of TASKS[{backend.alias!r}]'s "
                          f"QUEUES ({', '.join(allowed)})")
    return tuple(asked or allowed)


def app_for(backend: ShardqBackend, queues: Sequence[str]) -> App:
    """A shardq App running Django tasks on ``queues``, keeping their results."""
    app = App()
    for queue in queues:
        app.handler(queue, keep_result_s=backend.settings.keep_result_s)(run_task)
    return app


class WrittenOnce(logging.Filter):
    """Lets through to the worker's handler (on the root logger) only the records no
    console handler of Django's logging has written on their way up.

    Django's default logging gives the ``django`` logger a console handler that writes
    under ``DEBUG = True``, and lets its records propagate: ``django.tasks``' lines would
    reach the root too, and be written twice.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """False when a handler of the record's logger, or of one it propagates through
        below the root, writes records like it to the console."""
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None and logger.parent is not None:  # the root has no parent
            if any(_to_console(handler, record) for handler in logger.handlers):
                return False
            logger = logger.parent if logger.propagate else None
        return True


def _to_console(handler: logging.Handler, record: logging.LogRecord) -> bool:
    return (isinstance(handler, logging.StreamHandler)
            and handler.stream in (sys.stderr, sys.stdout)
            and record.levelno >= handler.level and bool(handler.filter(record)))


def write_once() -> None:
    """Make the worker's handlers (on the root logger, set up by
    :func:`shardq.worker.logs.configure`) skip what Django's logging writes already."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(WrittenOnce())


def serve(alias: str, client_config: ClientConfig, config: WorkerConfig) -> int:
    """One worker process of ``--processes N``: a spawned interpreter, which sets Django
    up (DJANGO_SETTINGS_MODULE is inherited) before it runs the worker."""
    django.setup()
    write_once()
    return serve_app(app_for(backend_named(alias), config.queue), client_config, config)


def main(alias: str, flags: argparse.Namespace) -> int:
    """``manage.py shardq_worker``: run the worker of backend ``alias`` with ``shardq
    consume``'s ``flags`` (a client flag overrides the backend's OPTIONS) until a signal,
    in ``--processes`` processes."""
    backend = backend_named(alias)
    config = from_arguments(WorkerConfig, flags)
    config = dataclasses.replace(config, queue=queues_of(backend, config.queue))
    client_config = backend.settings.client_config(
        **{f.name: getattr(flags, f.name, None) for f in dataclasses.fields(ClientConfig)})
    logs.configure(config.log_format)
    write_once()
    if config.processes > 1:
        return processes.supervise(serve, alias, client_config, config)
    return serve_app(app_for(backend, config.queue), client_config, config)
