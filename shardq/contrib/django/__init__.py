"""shardq as the backend of Django's Tasks framework (``django.tasks`` from Django 6, the
``django-tasks`` backport before it).

In ``settings.py``::

    INSTALLED_APPS = [..., "shardq.contrib.django"]   # manage.py shardq_worker, shardq_migrate
    TASKS = {"default": {"BACKEND": "shardq.contrib.django.ShardqBackend",
                         "QUEUES": ["default", "emails"],
                         "OPTIONS": {"DATABASE": "default"}}}

See :mod:`shardq.contrib.django.options` for the OPTIONS.  ``ShardqBackend`` is loaded
on first use, so listing the app does not import the client until a backend is made.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardq.contrib.django.backend import ShardqBackend

__all__ = ["ShardqBackend"]


def __getattr__(name: str) -> Any:
    """``ShardqBackend``, imported from :mod:`shardq.contrib.django.backend` on first use."""
    if name != "ShardqBackend":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module("shardq.contrib.django.backend").ShardqBackend
