"""The Django app ``shardq.contrib.django``: its management commands."""

from __future__ import annotations

from django.apps import AppConfig


class ShardqConfig(AppConfig):
    """``INSTALLED_APPS`` entry ``"shardq.contrib.django"``: adds ``manage.py
    shardq_worker`` and ``manage.py shardq_migrate``; it has no models."""

    name = "shardq.contrib.django"
    label = "shardq"
    verbose_name = "shardq"
