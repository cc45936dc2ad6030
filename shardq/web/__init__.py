"""shardq's web dashboard: queues, dead letters and tasks, with a JSON API.

Needs the ``web`` extra (``pip install 'shardq[web]'``).  Serve it with
``shardq dashboard``, or mount :func:`create_app` into an ASGI app of your own.
The settings import without the extra (the CLI reads them); the app is imported
on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardq.web.config import DashboardConfig, read_token

if TYPE_CHECKING:
    from shardq.web.app import create_app

__all__ = ["DashboardConfig", "create_app", "read_token"]


def __getattr__(name: str) -> Any:
    if name == "create_app":  # Starlette and Jinja2 load only when an app is made
        from shardq.web.app import create_app

        return create_app
    raise AttributeError(f"module 'shardq.web' has no attribute {name!r}")
