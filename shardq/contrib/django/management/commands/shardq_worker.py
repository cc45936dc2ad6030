"""``manage.py shardq_worker``: run a shardq worker for the project's Django tasks."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from shardq.contrib.django.compat import DEFAULT_TASK_BACKEND_ALIAS
from shardq.core.config import ClientConfig, add_arguments
from shardq.core.errors import ConfigError
from shardq.worker.config import WorkerConfig


class Command(BaseCommand):
    """Consume the task backend's queues (all its ``QUEUES``, or each ``--queue``) with
    ``shardq consume``'s flags until SIGTERM or SIGINT."""

    help = ("Run a shardq worker for the project's Django tasks; takes `shardq consume`'s "
            "flags (client flags override the backend's OPTIONS)")

    def add_arguments(self, parser: CommandParser) -> None:
        """``--backend`` and every ``shardq consume`` flag."""
        parser.add_argument("--backend", default=DEFAULT_TASK_BACKEND_ALIAS,
                            help="the TASKS alias whose tasks to run (default: %(default)s)")
        parser.add_argument("--dsn", help="database URL (postgresql://...) [default: the "
                                          "backend's OPTIONS: its DSN, or its DATABASES alias]")
        add_arguments(parser, ClientConfig, only=tuple(
            f.name for f in dataclasses.fields(ClientConfig) if f.name != "dsn"))
        add_arguments(parser, WorkerConfig)

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the worker; a bad setting is one line (CommandError)."""
        from shardq.contrib.django import worker  # the daemon: for this command only

        try:
            code = worker.main(options["backend"], argparse.Namespace(**options))
        except (ConfigError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from exc
        if code:
            raise CommandError("a worker process failed", returncode=code)
