"""The CLI's actions go through the audit trail, as the dashboard's do.

Each command that changes something (``queue pause|resume|purge|limit``, ``task
cancel``, ``dead retry|purge``, ``flow cancel``) runs its client call's plan with its
record in one transaction (:func:`shardq.ops.audit.audited`).  The trail names the
operating system's user and host as who acted, the database role the CLI connected
as as the role, and ``cli`` as the door.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

if TYPE_CHECKING:
    from shardq.client import Client
    from shardq.core.plan import Plan
    from shardq.ops import audit

T = TypeVar("T")


def actor(client: Client) -> audit.Actor:
    """Who acts through this CLI: ``user@host``, with the database role as the role."""
    from shardq.core.boundary import role_of  # the driver: only commands that connect
    from shardq.ops import audit

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for this uid (a container)
        user = "?"
    role = role_of(client.db.dsn)
    return audit.Actor(f"{user}@{socket.gethostname()}", f"database:{role or '?'}", "cli")


def act(client: Client, action: str, plan: Plan[T], describe: Callable[[T], str], *,
        queue: str | None = None, task_id: UUID | str | None = None,
        params: Mapping[str, Any] | None = None) -> T:
    """Run ``plan`` (a client call's, ``Client.pause.make(client, ...)``) with its record
    as ``action``; ``describe`` says what it did from its value."""
    from shardq.ops import audit

    entry = audit.Entry(actor(client), action, queue, task_id, dict(params or {}))
    return client.perform(audit.audited(client.statements, plan, entry, describe))
