"""Claiming: one bounded, index-ordered ``UPDATE … SKIP LOCKED … RETURNING`` on one bucket."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from json import JSONDecoder
from typing import Any
from uuid import UUID, uuid4

from psycopg.errors import UniqueViolation
from psycopg.rows import RowFactory, RowMaker

from shardq.core import validate
from shardq.core.plan import Atomic, Fetch, Plan, Steps
from shardq.core.statements import Statements
from shardq.core.task import Task

# The fields of Task a claim returns, in their declared order.  The queue and the lease
# token are the claim's own parameters, so they are not read back: decoding a uuid per
# row was a measurable share of a worker's time.
GIVEN = ("queue", "lease_token")
RETURNED = tuple(f.name for f in fields(Task) if f.name not in GIVEN)
# The payload column is jsonb printed by the server: one JSON value, nothing around it,
# so raw_decode's scanner alone reads it (json.loads adds two whitespace regex
# matches and its checks: more than half the cost of decoding a small payload).
_decode = JSONDecoder().raw_decode
# claim_buckets reads each bucket of its list in turn: claim_range's bucket is the list's
# current row, not a bound parameter.
LISTED = {"this_bucket": "bucket_listed"}


def task_rows(queue: str, token: UUID) -> RowFactory[Task]:
    """Rows of a claim (:data:`RETURNED`, the payload as JSON text) as Tasks of ``queue``
    under lease ``token``."""
    def factory(cursor: Any) -> RowMaker[Task]:
        def make(v: Sequence[Any]) -> Task:  # the RETURNED columns, by position
            return Task(v[0], queue, v[1], v[2], token, _decode(v[3])[0], v[4], v[5], v[6],
                        v[7], v[8], v[9], v[10])
        return make
    return factory


def claim_bucket(st: Statements, queue: str, bucket: int, *, limit: int,
                 lease_s: float | None, worker_id: UUID | None = None) -> Plan[list[Task]]:
    """Claim up to ``limit`` eligible tasks of ``queue`` from one bucket (one statement),
    for the worker ``worker_id`` (recorded on the rows and in their attempts' history)."""
    validate.queue_name(queue)
    validate.claim(bucket, st.bucket_count, limit, lease_s)
    return Plan(_claimer(st, queue, bucket, limit, lease_s, validate.worker_id(worker_id)))


def claim_buckets(st: Statements, queue: str, buckets: Sequence[int], *, limit: int,
                  lease_s: float | None, worker_id: UUID | None = None) -> Plan[list[Task]]:
    """Claim up to ``limit`` eligible tasks of ``queue`` from the ``buckets`` listed, in
    their order, in one statement: each bucket's index range in turn, until the limit.
    A worker claims so the buckets a burst of notifications named (one statement for the
    burst, not one per task)."""
    validate.queue_name(queue)
    listed = validate.buckets(buckets, st.bucket_count)
    validate.claim(None, st.bucket_count, limit, lease_s)
    return Plan(_plain(st, queue, st.query("claim_buckets", limit, fragments=LISTED),
                       "claim_recover_any", lease_s, validate.worker_id(worker_id),
                       buckets=listed))


def claim(st: Statements, queue: str, start: int, *, limit: int,
          lease_s: float | None, worker_id: UUID | None = None) -> Plan[list[Task]]:
    """Claim up to ``limit`` eligible tasks of ``queue`` from the first bucket, from
    ``start`` round, that has any (one statement per bucket visited), for the worker
    ``worker_id``."""
    validate.queue_name(queue)
    validate.claim(None, st.bucket_count, limit, lease_s)
    holder = validate.worker_id(worker_id)
    n = st.bucket_count
    # Each bucket's claim is made when first visited (most calls visit one), and kept:
    # a retry visits it again under the same lease token.
    made: dict[int, Callable[[], Steps[list[Task]]]] = {}

    def steps() -> Steps[list[Task]]:
        for bucket in ((start + step) % n for step in range(n)):
            if bucket not in made:
                made[bucket] = _claimer(st, queue, bucket, limit, lease_s, holder)
            tasks = yield from made[bucket]()
            if tasks:
                return tasks
        return []

    return Plan(steps)


def _claimer(st: Statements, queue: str, bucket: int, limit: int,
             lease_s: float | None, worker_id: UUID | None) -> Callable[[], Steps[list[Task]]]:
    """The steps of one bucket's claim, run afresh on each attempt."""
    return _plain(st, queue, st.query("claim", limit), "claim_recover", lease_s, worker_id,
                  bucket=bucket)


def _plain(st: Statements, queue: str, take: bytes, recover: str, lease_s: float | None,
           worker_id: UUID | None, **where: Any) -> Callable[[], Steps[list[Task]]]:
    """The steps of a plain claim statement ``take`` of the buckets ``where`` names,
    recovered by the query ``recover`` when retried."""
    lease = lease_s if lease_s is not None else st.config.lease_s
    # One lease token for the whole claim, made here: a claim whose reply was lost
    # after the server committed finds what it took by it.
    token = uuid4()
    params = st.params(queue=queue, lease_s=lease, token=token, worker_id=worker_id, **where)
    rows = task_rows(queue, token)
    return attempt_claim(Fetch(take, params, rows), Fetch(st.query(recover), params, rows))


def attempt_claim(take: Fetch, recover: Fetch, raced: Callable[[], object] = lambda: None,
                  *, guarded: bool = False) -> Callable[[], Steps[list[Task]]]:
    """The steps of one claim statement ``take``, run afresh on each attempt: a retry
    first collects, by the claim's lease token (``recover``), what an attempt whose
    reply was lost took.  ``raced`` is told when a concurrent claim won a unique index
    (the claim then took nothing).  ``guarded``: the claim runs inside a transaction
    that must outlive such a race, so it runs in a savepoint of its own (a failed
    statement would otherwise abort the whole transaction)."""
    tries = 0

    def alone() -> Steps[list[Task]]:
        claimed: list[Task] = yield take
        return claimed

    def steps() -> Steps[list[Task]]:
        nonlocal tries
        tries += 1
        if tries > 1:
            taken: list[Task] = yield recover
            if taken:
                return taken
        try:
            claimed: list[Task] = yield (Atomic(alone) if guarded else take)
        except UniqueViolation:
            # Two claims raced for two tasks of one key (tasks_running_keys) or for one
            # capacity slot (tasks_slots): the index let one win.  This range is simply
            # tried again later.
            raced()
            return []
        return claimed

    return steps
