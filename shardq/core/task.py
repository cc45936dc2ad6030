"""The claimed task a worker holds, and the record of any task."""

from __future__ import annotations

import os
import time
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
    trace_context: str | None = None
    """The W3C ``traceparent`` of the span that enqueued the task, when it was enqueued
    under a tracer (see :mod:`shardq.contrib.opentelemetry`); else None."""

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
    """available, scheduled (available but not yet due), parked (a durable task waiting
    for a sleep, an event or its children: see ``waiting_for``), locked, dead, or waiting
    (a task of a flow that waits for others to succeed first).  A parked task that was
    woken is available until a worker claims it."""
    group: str | None = None
    """The group it was enqueued in (``enqueue(..., group=...)``), if any."""
    worker_id: UUID | None = None
    """The worker whose claim holds the task, or held it last (None for a claim that
    gave no worker identity)."""
    history: tuple[Attempt, ...] = ()
    """Its attempts, oldest first, the running one last (:meth:`Client.get` reads them;
    task lists leave them out)."""

    trace_context: str | None = None
    """The W3C ``traceparent`` of the span that enqueued the task, if it was traced."""
    flow_id: UUID | None = None
    """The flow the task belongs to (:meth:`Client.flow` reads it), or None."""
    waits: int | None = None
    """How many tasks of its flow it still waits for (a ``waiting`` task), else None."""
    steps: tuple[Step, ...] = ()
    """A durable task's checkpointed calls, in the order they were written (:meth:`Client.get`
    reads them; task lists leave them out)."""
    waiting_for: Waiting | None = None
    """What a ``parked`` task waits for, else None."""


@dataclass(frozen=True)
class Step:
    """One durable call of a task, as checkpointed (``ctx.step``, ``ctx.sleep``, ...).

    ``kind`` is ``step``, ``sleep``, ``event`` (``wait_event``), ``spawn`` or ``wait``;
    ``state`` is ``done``, ``waiting`` (the call parked the task) or ``timed_out``.
    """

    name: str
    kind: str
    state: str
    value: Any
    """What the call came to, as JSON reads back: a step's return value, an event's
    payload, a spawned child's id, the children's results; while it waits, what it waits
    for (``{"event": name}``, ``{"children": [ids]}``)."""
    until: datetime | None
    """A sleep's end, or a wait's deadline (None: none)."""
    at: datetime
    """When the checkpoint was last written."""


@dataclass(frozen=True)
class Waiting:
    """What a parked durable task waits for."""

    reason: str
    """``sleep``, ``event`` or ``children``."""
    event: str | None
    """The event's name (``reason`` event), else None."""
    until: datetime | None
    """When the task wakes at the latest: the sleep's end or the wait's deadline (None:
    no deadline, it waits until what it waits for comes)."""


@dataclass(frozen=True)
class Attempt:
    """One attempt of a task: when it was claimed, by which worker, how it ended.

    ``outcome`` is one of ``acked``, ``failed``, ``lease_expired``, ``released``,
    ``deferred``, ``cancelled``, ``dead`` (it failed, or its lease expired, and the task
    is dead), ``parked`` (a durable call waits: the claim is given back and counts as
    no attempt, ``error`` says what it waits for, and the next claim is the task woken),
    or ``running`` for the attempt under way.  A task that succeeded at its
    first attempt has none recorded.  The worker's name, host and pid are those it had
    when the attempt ended (None for a claim made outside a worker).
    """

    attempt: int
    """The claim's number: 1 for the task's first claim, counting every claim."""
    outcome: str
    claimed_at: datetime | None
    ended_at: datetime | None
    """None while it runs."""
    error: str | None
    worker_id: UUID | None
    worker_name: str | None
    worker_host: str | None
    worker_pid: int | None

    @property
    def duration_s(self) -> float | None:
        """How long the attempt held the task, from its claim to its end (None while it
        runs)."""
        if self.claimed_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.claimed_at).total_seconds()

    @property
    def worker(self) -> str | None:
        """The worker as ``name (host, pid N)``, or its id when only that is known."""
        if self.worker_name is not None:
            return f"{self.worker_name} ({self.worker_host}, pid {self.worker_pid})"
        return None if self.worker_id is None else str(self.worker_id)


@dataclass(frozen=True)
class TaskResult:
    """What became of one task, as :meth:`Client.result` finds it.

    ``status`` is one of:

    - ``"pending"``: waiting to run, or scheduled for later (a retry included);
    - ``"running"``: claimed by a worker now;
    - ``"succeeded"``: done, and its handler's return value kept (``value``);
    - ``"failed"``: dead, with ``error`` its last error;
    - ``"unknown"``: never enqueued, done without a kept result, cancelled, purged, or
      its result expired.

    A succeeded task whose return value could not be kept (not JSON, or larger than
    ``max_payload_bytes``) has ``value`` None and ``error`` saying why.
    """

    id: UUID
    status: str
    value: Any = None
    """What the handler returned, as JSON reads back (tuples become lists, say)."""
    error: str | None = None
    attempts: int | None = None
    """Attempts the task had (or has had so far); None when unknown."""
    enqueued_at: datetime | None = None
    finished_at: datetime | None = None
    """When it succeeded, or died; None before."""
    queue: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the task is done for good: succeeded or failed."""
        return self.status in ("succeeded", "failed")


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

    @staticmethod
    def random_values(n: int) -> list[int]:
        """The values of ``n`` new random (version 4) ids, made an order of magnitude
        faster than ``uuid4()`` one by one: one read of the system's random source, and
        no parsing."""
        raw = os.urandom(16 * n)
        return [int.from_bytes(raw[s:s + 16]) & _V4_CLEAR | _V4_SET for s in range(0, 16 * n, 16)]

    @staticmethod
    def ordered_values(n: int) -> range:
        """The values of ``n`` new time-ordered (version 7, RFC 9562) ids: the Unix time
        in milliseconds, then 74 bits that are random (73 of them) for a batch's first id
        and count up by one from there, the RFC's monotonic random method: one random
        draw per batch.  New ids sort after older ones, so an index on ids takes each
        batch in at its right edge, a few pages, instead of on as many random pages as
        it has rows; and a batch's ids ascend, so PostgreSQL adds each to the index's
        rightmost page without searching the tree for it.  Two batches of one
        millisecond overlap only if their random starts fall within a batch's length of
        each other: about 2^-62 for two batches of a thousand.  The last bytes, which
        pick the bucket, count up too, so a batch spreads evenly over the buckets."""
        first = ((time.time_ns() // 1_000_000) << 80 | _V7_SET
                 | int.from_bytes(os.urandom(10)) & _V7_FIRST)
        return range(first, first + n)

    @classmethod
    def made_from(cls, values: Sequence[int]) -> list[TaskId]:
        """Ids of these 128-bit values, which are valid (made by :meth:`random_values` or
        :meth:`ordered_values`): UUID's checks are skipped, and the slots are set through
        their descriptors (UUID forbids plain assignment)."""
        ids = [object.__new__(cls) for _ in values]
        unknown = SafeUUID.unknown
        for task_id, value in zip(ids, values, strict=True):
            _SET_INT(task_id, value)
            _SET_SAFE(task_id, unknown)
            _SET_COALESCED(task_id, False)
        return ids


_SET_INT = UUID.__dict__["int"].__set__
_SET_SAFE = UUID.__dict__["is_safe"].__set__
_SET_COALESCED = TaskId.__dict__["coalesced"].__set__
# The version (4) and variant (RFC 4122) bits of a random UUID, as uuid.UUID sets them.
_V4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_V4_SET = (0x4000 << 64) | (0x8000 << 48)
# Version 7: 48 bits of time, the version (7), 12 random bits, the variant, 62 random bits.
_V7_SET = (0x7 << 76) | (0b10 << 62)
# A batch's first id leaves the top bit of the last 62 clear, so counting up from it
# never carries into the variant bits.
_V7_FIRST = (0xFFF << 64) | ((1 << 61) - 1)


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
