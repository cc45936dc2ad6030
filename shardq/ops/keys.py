"""Keyed tasks: one execution per (queue, key) at a time, re-enqueues coalesced.

The database enforces the rules with two unique partial indexes: at most one
waiting (available) task per key, and at most one running (locked) one.  A key
enqueued while its task waits updates that task (latest payload, earlier place in
line); enqueued while its task runs, it adds the one follow-up, which claims pass
over until the running task is gone.  A running keyed task that goes back in line
(retry, release, defer, expired lease) merges with its follow-up: the follow-up's
id and payload (the latest enqueued) with the returning task's place in line,
attempts and history.  Unkeyed tasks never touch any of this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID, uuid4

from psycopg.errors import UniqueViolation

from shardq.core import rules, validate
from shardq.core.errors import InvalidTask
from shardq.core.plan import Plan, Steps
from shardq.core.statements import Statements
from shardq.core.task import Task, TaskId, addresses


def check_key(key: object) -> str:
    """A key: a non-empty string of at most 512 characters, without NUL or lone surrogates."""
    if not isinstance(key, str) or not 1 <= len(key) <= rules.MAX_KEY_CHARS:
        raise InvalidTask(f"a key must be a string of 1 to {rules.MAX_KEY_CHARS} characters, "
                          f"got {key!r:.80}")
    return validate.storable("a key", key)


def enqueue_rows(st: Statements, conn: Any, params: dict[str, Any],
                 keys: Sequence[str | None], payloads: Sequence[Any]) -> Plan[list[TaskId]]:
    """Insert tasks as rows (coalescing keyed ones); one TaskId per input, in order.

    Inputs sharing a key collapse into one row first (the last payload wins), so
    the statement meets each key once.  A retry after a lost reply coalesces again into
    the waiting tasks it made (the same payloads), unless one was claimed meanwhile:
    then its id, being unique, is refused, which proves the first attempt committed (it
    was one statement), and the ids sent are the answer.
    """
    st.dialect.require_keyed_tasks()
    last: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key is not None:
            last[check_key(key)] = i
    # One row per key, in key order: concurrent batches then lock the waiting rows
    # they coalesce into in the same order, so they cannot deadlock.
    kept = sorted((i for i, key in enumerate(keys) if key is None or last[key] == i),
                  key=lambda i: (keys[i] is None, keys[i] or ""))
    ids = {i: uuid4() for i in kept}
    request = st.fetch("enqueue_rows", {
        **params, "ids": [ids[i] for i in kept], "keys": [keys[i] for i in kept],
        "payloads": [payloads[i] for i in kept]})
    tries = 0

    def steps() -> Steps[list[TaskId]]:
        nonlocal tries
        tries += 1
        try:
            # Each returned row is (task id, key); a key's id differs from the one
            # sent when the row was coalesced into the key's waiting task.
            fetched = yield request
            by_key = {key: got for got, key, *_ in fetched if key}
        except UniqueViolation:
            if tries == 1 or conn is not None:
                raise
            by_key = {key: ids[i] for i in kept if (key := keys[i]) is not None}
        return _task_ids(keys, last, ids, by_key)

    return Plan(steps, conn)


def _task_ids(keys: Sequence[str | None], last: dict[str, int], ids: dict[int, UUID],
              by_key: dict[str, UUID]) -> list[TaskId]:
    """One TaskId per input: its own id, or its key's task (coalesced when not its own)."""
    out: list[TaskId] = []
    for i, key in enumerate(keys):
        if key is None:
            out.append(TaskId(ids[i]))
        else:
            survivor = last[key]
            out.append(TaskId(by_key[key], coalesced=i != survivor
                              or by_key[key] != ids[survivor]))
    return out


def putback(st: Statements, tasks: Sequence[Task], *, run_at: Sequence[Any],
            delays_s: Sequence[float | None], use_backoff: Sequence[bool],
            errors: Sequence[str | None], keep_errors: bool,
            attempt_change: int, outcome: str) -> Steps[set[UUID]]:
    """Put claimed keyed tasks back in line (merging follow-ups), recording each attempt
    with ``outcome`` (failed, released or deferred); returns the ids done."""
    st.dialect.require_keyed_tasks()
    # Key order, as in enqueue_rows, so a batch and a concurrent enqueue batch lock the
    # follow-ups they share in the same order.
    order = sorted(range(len(tasks)), key=lambda i: tasks[i].key or "")
    tasks = [tasks[i] for i in order]
    run_at, delays_s = [run_at[i] for i in order], [delays_s[i] for i in order]
    use_backoff, errors = [use_backoff[i] for i in order], [errors[i] for i in order]
    n = len(tasks)
    rows = yield st.fetch("requeue_keyed", {
        **addresses(tasks), "run_ats": list(run_at), "delays_s": list(delays_s),
        "use_backoff": list(use_backoff), "errors": list(errors),
        "keep_errors": [keep_errors] * n, "attempt_changes": [attempt_change] * n,
        "outcome": outcome})
    return {row[0] for row in rows}
