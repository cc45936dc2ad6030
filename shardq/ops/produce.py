"""Writing new tasks: one by INSERT, batches by COPY (PostgreSQL) or one multi-row INSERT."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, TypeVar
from uuid import UUID

from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

from shardq.core import tracing, validate
from shardq.core.plan import Atomic, CopyIn, Plan, Steps, done
from shardq.core.statements import Statements
from shardq.core.task import TaskId
from shardq.ops import keys

COPY_ROWS = 500
"""Rows per COPY statement.  A COPY gives every row it buffers (up to 1,000) a tuple
slot that pins the table's row type in the statement's resource owner, and PostgreSQL
keeps those identical entries in a hash table where they all collide: the bookkeeping
grows with the square of the rows per statement, about 1 µs a row at 1,000.  Statements
of 500 rows halve it for one round trip more; side by side, batches of 1,000 were
written 1.04x as fast on PostgreSQL 18 and 1.03x on 15."""
# PostgreSQL's binary COPY format: a signature, flags and header extension, then per row
# the number of fields and each field's length and bytes; -1 ends the data.
BINARY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
BINARY_TRAILER = (-1).to_bytes(2, signed=True)
FIELDS = (10).to_bytes(2)  # the columns of sql/copy_tasks.sql
FLOW_FIELDS = (12).to_bytes(2)  # and of sql/copy_flow_tasks.sql
UUID_OID = (2950).to_bytes(4)
UUID_LENGTH, INT4_LENGTH, TIMESTAMP_LENGTH = (16).to_bytes(4), (4).to_bytes(4), (8).to_bytes(4)
JSONB_VERSION = b"\x01"
NULL_FIELD = (-1).to_bytes(4, signed=True)
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
T = TypeVar("T")


def _as_is(text: str) -> str:
    return text


def jsonb(text: str) -> Jsonb:
    """A jsonb parameter from JSON text that validation already produced (no second dump)."""
    return Jsonb(text, dumps=_as_is)


def placement(st: Statements, queue: str, delay_s: float | None, run_at: datetime | None,
              priority: int, max_attempts: int | None,
              group: str | None = None) -> dict[str, Any]:
    """The validated options every task of one enqueue call shares, as bound parameters."""
    delay_s, run_at = validate.schedule(delay_s, run_at)
    return st.params(
        queue=validate.queue_name(queue), delay_s=delay_s, run_at=run_at,
        priority=validate.priority(priority),
        max_attempts=validate.max_attempts(max_attempts, st.config.max_attempts),
        notify=st.config.notify, group=validate.group(group), trace_context=None,
    )


def traced(params: dict[str, Any], count: int, make: Callable[[dict[str, Any]], Plan[T]],
           task_id: TaskId | None = None, flow_id: UUID | None = None) -> Plan[T]:
    """The plan ``make`` makes of ``params``; with a tracer installed, an enqueue span of
    ``count`` tasks (or of ``task_id``, when known beforehand; of flow ``flow_id``'s tasks)
    is begun first, its trace context goes into the params (stored with the tasks, so a
    flow's tasks share it), and the plan runs inside it (:attr:`Plan.around`)."""
    tracer = tracing.tracer
    if tracer is None:
        return make(params)
    span = tracer.publish(params["queue"], count, task_id, flow_id=flow_id)
    try:
        plan = make({**params, "trace_context": span.context})
    except BaseException as exc:  # an argument refused: the span ends with the error
        span.end(exc)
        raise
    return dataclasses.replace(plan, around=span)


def enqueue(st: Statements, params: dict[str, Any], payload: Any, key: str | None,
            conn: Any) -> Plan[TaskId]:
    """Add one task placed by ``params`` (see :func:`placement`); returns its id."""
    text = validate.payload_json(payload, st.config.max_payload_bytes)
    if key is not None:
        return traced(params, 1, lambda p: first(keys.enqueue_rows(st, conn, p, [key], [text])))
    # The id is made here so that a retry after a lost reply names the same task:
    # the statement then inserts nothing (ON CONFLICT (id) DO NOTHING).
    (task_id,) = st.dialect.new_ids(1)

    def make(p: dict[str, Any]) -> Plan[TaskId]:
        request = st.fetch("enqueue", {**p, "id": task_id, "payload": jsonb(text)})

        def steps() -> Steps[TaskId]:
            yield request
            return task_id

        return Plan(steps, conn)

    return traced(params, 1, make, task_id)


def enqueue_many(st: Statements, params: dict[str, Any], payloads: Iterable[Any],
                 task_keys: Sequence[str | None] | None, conn: Any) -> Plan[list[TaskId]]:
    """Add many tasks placed by ``params`` in one transaction; returns their ids in order.

    The batch is one transaction (a savepoint in the caller's) under ids made here, and
    is counted inside it (by the placement with COPY, by the INSERT without): when a
    retry finds the ids taken, the attempt whose reply was lost committed them all, and
    its count with them.
    """
    items = Payloads(validate.as_list(payloads, "payloads"), st.config.max_payload_bytes)
    n = len(items)
    if task_keys is not None and any(k is not None for k in
                                     validate.parallel("keys", task_keys, n)):
        return traced(params, n, lambda p: keys.enqueue_rows(st, conn, p, list(task_keys),
                                                             items.texts(0, n)))
    if not n:
        return done([])
    ids = NewIds(st.dialect.new_id_values(n))
    if not st.dialect.copy:
        items.texts(0, n)  # a bad payload fails the call before a transaction starts
    writer = copy_tasks if st.dialect.copy else _insert_tasks

    def make(p: dict[str, Any]) -> Plan[list[TaskId]]:
        tries = 0

        def steps() -> Steps[list[TaskId]]:
            nonlocal tries
            tries += 1
            try:
                yield Atomic(lambda: writer(st, p, ids, items))
            except UniqueViolation:
                if tries == 1 or conn is not None:
                    raise
            return ids.objects()

        return Plan(steps, conn)

    return traced(params, n, make)


def first(ids: Plan[list[TaskId]]) -> Plan[TaskId]:
    """The plan of ``ids`` with only its first id as its value."""
    def steps() -> Steps[TaskId]:
        return (yield from ids.steps())[0]

    return Plan(steps, ids.conn, ids.idempotent)


class NewIds:
    """A batch's new ids: their values, fixed before the first attempt so that a retry
    names the same tasks, and their :class:`TaskId` objects, made a piece at a time (a
    COPY makes each statement's while the server writes its rows: ten thousand at once
    would hold an event loop for about 10 ms)."""

    def __init__(self, values: Sequence[int]) -> None:
        self.values = values
        self._objects: list[TaskId] = []

    def make(self, end: int) -> None:
        """Make the objects of the first ``end`` ids, those not made yet."""
        have = len(self._objects)
        if have < end:
            self._objects += TaskId.made_from(self.values[have:end])

    def objects(self) -> list[TaskId]:
        """The ids as :class:`TaskId` objects, in order."""
        self.make(len(self.values))
        return self._objects


class Payloads:
    """A batch's payloads, each encoded to JSON text (and validated) on first use, in order.

    A COPY asks for each statement's texts while the server writes the previous
    statement's rows (:class:`shardq.core.copyio.EndThenWork`): encoding the whole batch
    first would leave the server idle meanwhile.  A bad payload then fails the batch
    after some of it was sent, which rolls all of it back.  Texts are kept, so a retried
    write sends the same ones.
    """

    def __init__(self, items: list[Any], max_bytes: int) -> None:
        self.items, self.max_bytes = items, max_bytes
        self._texts: list[str] = []

    @classmethod
    def encoded(cls, texts: list[str]) -> Payloads:
        """Payloads already encoded (and validated) as JSON texts."""
        payloads = cls(texts, 0)
        payloads._texts = texts
        return payloads

    def __len__(self) -> int:
        return len(self.items)

    def texts(self, start: int, end: int) -> list[str]:
        """The JSON texts of payloads ``start`` to ``end`` (exclusive)."""
        done, end = self._texts, min(end, len(self.items))
        if len(done) < end:
            limit = self.max_bytes
            done += [validate.payload_json(p, limit) for p in self.items[len(done):end]]
        return done[start:end]


def _placed(st: Statements, params: dict[str, Any], count: int) -> Steps[dict[str, Any]]:
    """The batch's placement; the same statement counts its ``count`` tasks and, with
    notify, wakes idle workers when the batch commits."""
    ((exec_time, pending, now, _),) = yield st.fetch("placement_batch",
                                                     {**params, "count": count})
    return {**params, "exec_time": exec_time, "pending_head_start_s": pending, "now": now}


@dataclass(frozen=True)
class FlowLink:
    """The flow of a batch of its tasks written with COPY, and the tasks that wait for
    them (sql/copy_flow_tasks.sql)."""

    flow_id: UUID
    next: list[UUID] | None

    def fields(self) -> bytes:
        """The two fields, as a COPY row's tail: the flow's id, and ``next`` as a
        one-dimensional uuid[] (dimensions, no NULLs, the element type, then the length
        and lower bound of the dimension, then the elements) or NULL."""
        head = UUID_LENGTH + self.flow_id.bytes
        if self.next is None:
            return head + NULL_FIELD
        body = b"".join((b"\x00\x00\x00\x01", bytes(4), UUID_OID, len(self.next).to_bytes(4),
                         b"\x00\x00\x00\x01", *[UUID_LENGTH + i.bytes for i in self.next]))
        return head + len(body).to_bytes(4) + body


def copy_tasks(st: Statements, params: dict[str, Any], ids: NewIds, items: Payloads,
               flow: FlowLink | None = None) -> Steps[None]:
    """Write a batch with COPY in PostgreSQL's binary format, in statements of at most
    :data:`COPY_ROWS` rows; the placement is computed once.

    Binary, the server reads the id, the two timestamps and the integers as they are
    stored instead of parsing their text, and nothing needs escaping.  The fields
    after the payload are the same on every row, so they are encoded once per batch;
    a row is its id, the payload's length and text, and that tail.  Each statement's
    rows are encoded while the server writes the previous statement's, and the id
    objects of its rows while it writes them.  Tasks of a flow (``flow``) add its two
    columns to the tail.
    """
    n = len(items)
    p = yield from _placed(st, params, n)
    queue = p["queue"].encode()
    head = (FIELDS if flow is None else FLOW_FIELDS) + UUID_LENGTH
    tail = (_timestamp(p["exec_time"]) + _int4(p["priority"])
            + _int4(p["pending_head_start_s"]) + _int4(p["max_attempts"])
            + _timestamp(p["now"]) + _text(p["group"]) + _text(p["trace_context"])
            + (b"" if flow is None else flow.fields()))
    queue_field = len(queue).to_bytes(4) + queue

    def rows(first: int, last: int) -> bytes:
        """Rows ``first`` to ``last`` (exclusive) as one COPY statement's data."""
        return b"".join([BINARY_SIGNATURE, *[
            b"".join((head, value.to_bytes(16), queue_field,
                      (len(data) + 1).to_bytes(4), JSONB_VERSION, data, tail))
            for value, data in zip(ids.values[first:last],
                                   [t.encode() for t in items.texts(first, last)],
                                   strict=True)], BINARY_TRAILER])

    query = st.query("copy_tasks" if flow is None else "copy_flow_tasks")
    pieces = max(1, -(-n // COPY_ROWS))
    bounds = [n * i // pieces for i in range(pieces + 1)]  # even pieces, none over COPY_ROWS
    spans = list(pairwise(bounds))
    encoded = [rows(*spans[0])]

    def meanwhile(i: int) -> None:
        """While the server writes statement ``i``'s rows: the next statement's rows,
        and the id objects of statement ``i``'s."""
        if i + 1 < len(spans):
            encoded.append(rows(*spans[i + 1]))
        ids.make(spans[i][1])

    for i in range(len(spans)):
        yield CopyIn(query, encoded[i], functools.partial(meanwhile, i))
        encoded[i] = b""  # sent and written: hold at most two statements' data


def _timestamp(value: datetime) -> bytes:
    """A timestamptz field: microseconds since 2000-01-01 UTC."""
    delta = value - PG_EPOCH
    return TIMESTAMP_LENGTH + ((delta.days * 86_400 + delta.seconds) * 1_000_000
                               + delta.microseconds).to_bytes(8, signed=True)


def _int4(value: int) -> bytes:
    """An int4 field."""
    return INT4_LENGTH + int(value).to_bytes(4, signed=True)


def _text(value: str | None) -> bytes:
    """A text field, or NULL."""
    if value is None:
        return NULL_FIELD
    data = value.encode()
    return len(data).to_bytes(4) + data


def _insert_tasks(st: Statements, params: dict[str, Any], ids: NewIds,
                  items: Payloads) -> Steps[None]:
    """Write a batch with one multi-row INSERT (engines without COPY).

    The INSERT counts the rows it wrote, not the placement: on CockroachDB a retry
    after a lost reply (the batch committed) inserts nothing, and must count nothing.
    """
    p = yield from _placed(st, params, 0)
    yield st.execute(st.query("enqueue_many"), {**p, "ids": ids.objects(),
                                                "payloads": items.texts(0, len(items))})
