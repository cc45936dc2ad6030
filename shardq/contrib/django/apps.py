"""The Django app ``shardq.contrib.django``: its management commands and system checks."""

from __future__ import annotations

from django.apps import AppConfig


class ShardqConfig(AppConfig):
    """``INSTALLED_APPS`` entry ``"shardq.contrib.django"``: adds ``manage.py
    shardq_worker``, ``manage.py shardq_migrate`` and the checks of
    :mod:`shardq.contrib.django.checks`; it has no models."""

    name = "shardq.contrib.django"
    label = "shardq"
    verbose_name = "shardq"

    def ready(self) -> None:
        """Register the system checks of the task backends."""
        from shardq.contrib.django import checks  # noqa: F401  (registers them)
