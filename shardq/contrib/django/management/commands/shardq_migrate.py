"""``manage.py shardq_migrate``: create or upgrade the shardq schema."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from shardq.cli.main import main
from shardq.contrib.django.backend import backend_named
from shardq.contrib.django.compat import DEFAULT_TASK_BACKEND_ALIAS


class Command(BaseCommand):
    """``shardq migrate`` on the task backend's database (its DSN, or its DATABASES
    alias): creates the schema, or brings it to this shardq's revision."""

    help = "Create or upgrade the shardq schema in the task backend's database"

    def add_arguments(self, parser: CommandParser) -> None:
        """``--backend``: the TASKS alias whose database to migrate."""
        parser.add_argument("--backend", default=DEFAULT_TASK_BACKEND_ALIAS,
                            help="the TASKS alias whose database to migrate (default: "
                                 "%(default)s)")

    def handle(self, *args: Any, **options: Any) -> None:
        """Run ``shardq migrate --dsn ...`` (its settings from the backend's OPTIONS)."""
        try:
            config = backend_named(options["backend"]).settings.client_config()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        assert config.dsn is not None  # the backend always names its database
        buckets = [] if config.bucket_count is None else ["--bucket-count",
                                                          str(config.bucket_count)]
        code = main(["migrate", "--dsn", config.dsn, *buckets])
        if code:
            raise CommandError("shardq migrate failed", returncode=code)
