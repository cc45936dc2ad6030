"""The claimed task a worker holds, and the record of any task."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, SafeUUID


@dataclass(eq=False)
class Task:
    """A claimed task.

    ``id`` finds its row; while the task is claimed ``exec_time`` is the lease
    expiry, which :meth:`Client.extend` updates in place.  ``lease_token`` (one per
    claim, shared by the tasks it took) fences every later operation: once the
    lease is lost, they raise :class:`shardq.LeaseLost`.
    """

    id: UUID
    queue: str
    bucket: int
    exec_time: datetime
    lease_token: UUID
    payload: Any
    attempts: int
    max_attempts: int
    priority: int
    enqueued_at: datetime
    key: str | None = None
    suspect: bool = False
    """The task's last lease expired without a result: it may have killed the worker
    that held it, so a worker runs it alone (see :mod:`shardq.worker.isolation`)."""

    @property
    def lease_expires_at(self) -> datetime:
        """When the lease ends unless extended (the row's exec_time while claimed)."""
        return self.exec_time

    @property
    def is_last_attempt(self) -> bool:
        """True when a failure of this attempt makes the task dead."""
        return self.attempts >= self.max_attempts


@dataclass(frozen=True)
class TaskInfo:
    """Everything stored about one task: its state and its history (:meth:`Client.get`)."""

    id: UUID
    queue: str
    bucket: int
    status: str
    exec_time: datetime
    payload: Any
    key: str | None
    priority: int
    pending_head_start_s: int
    attempts: int
    max_attempts: int
    lease_token: UUID | None
    last_error: str | None
    enqueued_at: datetime
    first_claimed_at: datetime | None
    last_claimed_at: datetime | None
    times_claimed: int
    times_requeued: int
    last_requeued_at: datetime | None
    state: str
    """available, scheduled (available but not yet due), locked or dead."""


class TaskId(UUID):
    """A task id returned by an enqueue; ``coalesced`` is True when the call added no task
    but updated the waiting task of its key (whose id this is)."""

    __slots__ = ("coalesced",)
    coalesced: bool

    def __init__(self, value: UUID | str, coalesced: bool = False) -> None:
        if isinstance(value, UUID):
            super().__init__(int=value.int)
        else:
            super().__init__(value)
        object.__setattr__(self, "coalesced", coalesced)

    @classmethod
    def random_batch(cls, n: int) -> list[TaskId]:
        """``n`` new random (version 4) ids, made an order of magnitude faster than
        ``uuid4()`` one by one: one read of the system's random source, and no parsing."""
        raw = os.urandom(16 * n)
        ids = []
        for start in range(0, 16 * n, 16):
            task_id = object.__new__(cls)
            value = int.from_bytes(raw[start:start + 16]) & _V4_CLEAR | _V4_SET
            object.__setattr__(task_id, "int", value)
            object.__setattr__(task_id, "is_safe", SafeUUID.unknown)
            object.__setattr__(task_id, "coalesced", False)
            ids.append(task_id)
        return ids


# The version (4) and variant (RFC 4122) bits of a random UUID, as uuid.UUID sets them.
_V4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_V4_SET = (0x4000 << 64) | (0x8000 << 48)


def addresses(tasks: Sequence[Task]) -> dict[str, str]:
    """The arrays that find claimed tasks' rows (by id) and fence them (by lease token).

    They are sent as array literals built here: the driver's list adapter spends
    several microseconds per element in Python, which made it the largest cost of a
    worker's acks.  Uuids are written as 32 hex digits, which both engines read.
    """
    return {
        "ids": "{" + ",".join([t.id.hex for t in tasks]) + "}",
        "tokens": "{" + ",".join([t.lease_token.hex if t.lease_token else "NULL"
                                  for t in tasks]) + "}",
    }
