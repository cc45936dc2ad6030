"""Statement helpers shared by the Client's methods: batch writes and lease-checked updates."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from psycopg.types.json import Jsonb

from shardq.db import Conn
from shardq.errors import InvalidTask, LeaseLost
from shardq.task import Task

if TYPE_CHECKING:
    from shardq.client import Client

EMPTY_STATS: dict[str, Any] = {
    "available": 0, "scheduled": 0, "locked": 0, "dead": 0, "oldest_eligible_age_s": None,
}

BACKSLASH, ESCAPED = "\\", "\\\\"
COPY_CHUNK_ROWS = 200

T = TypeVar("T")


def _as_is(text: str) -> str:
    return text


def jsonb(text: str) -> Jsonb:
    """A jsonb parameter from JSON text that validation already produced (no second dump)."""
    return Jsonb(text, dumps=_as_is)


def _placement(conn: Conn, query: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    row = conn.execute(query("placement_one"), params).fetchone()
    assert row is not None
    exec_time, pending, now = row
    return {**params, "exec_time": exec_time, "pending_head_start_s": pending, "now": now}


def copy_tasks(conn: Conn, query: Callable[..., Any], params: dict[str, Any],
               ids: Sequence[UUID], texts: Sequence[str]) -> None:
    """Write a batch with one COPY (PostgreSQL); the placement is computed once.

    The rows are sent as one block of COPY text: the columns after the payload are
    the same on every row, and formatting them once per batch rather than through a
    per-row writer is what makes a large batch cheap on the client.  Queue names are
    validated to plain characters and payload JSON is ASCII without raw control
    characters, so the only character COPY's text format needs escaped is the backslash.
    """
    p = _placement(conn, query, params)
    tail = "\t".join(str(p[k]) for k in ("exec_time", "priority", "pending_head_start_s",
                                          "max_attempts", "now"))
    row_end = f"\t{tail}\n"
    head = f"\t{p['queue']}\t"
    with conn.cursor().copy(query("copy_tasks")) as copy:
        for start in range(0, len(ids), COPY_CHUNK_ROWS):
            end = start + COPY_CHUNK_ROWS
            copy.write("".join([
                f"{task_id.int:032x}{head}{text.replace(BACKSLASH, ESCAPED)}{row_end}"
                for task_id, text in zip(ids[start:end], texts[start:end], strict=True)]))
    if p["notify"]:
        conn.execute(query("notify"), p)


def insert_tasks(conn: Conn, query: Callable[..., Any], params: dict[str, Any],
                 ids: Sequence[UUID], texts: Sequence[str]) -> None:
    """Write a batch with one multi-row INSERT (CockroachDB)."""
    p = _placement(conn, query, params)
    conn.execute(query("enqueue_many"), {**p, "ids": list(ids), "payloads": list(texts)})


def parallel(name: str, values: Sequence[T] | None, n: int) -> list[T | None]:
    """A per-task list of ``n`` values (None when not given)."""
    if values is None:
        return [None] * n
    if isinstance(values, str) or len(values) != n:
        raise InvalidTask(f"{name} must have one entry per task ({n})")
    return list(values)


def locate(tasks: Sequence[Task]) -> dict[str, str]:
    """The arrays that address the tasks' rows and fence them by lease token.

    They are sent as array literals built here: the driver's list adapter spends
    several microseconds per element in Python, which made it the largest cost of a
    worker's acks.  Every element is a plain value (a number, a uuid, a timestamp, a
    queue name limited to ``[A-Za-z0-9_.:-]``), so double quotes are all the quoting
    needed; they also keep a queue named ``NULL`` from reading as a null.
    """
    return {
        "buckets": _array([str(t.bucket) for t in tasks]),
        "queues": _array([f'"{t.queue}"' for t in tasks]),
        "exec_times": _array([f'"{t.exec_time.isoformat()}"' for t in tasks]),
        "ids": _array([t.id.hex for t in tasks]),  # uuids without hyphens: both engines read them
        "tokens": _array([t.lease_token.hex if t.lease_token else "NULL" for t in tasks]),
    }


def _array(elements: list[str]) -> str:
    return "{" + ",".join(elements) + "}"


def settle_split(client: Client, tasks: Sequence[Task], merge: list[int],
                 plain: Callable[[list[int]], tuple[str, dict[str, Any]]],
                 keyed: Callable[[list[Task]], set[UUID]]) -> None:
    """Settle ``tasks`` in two groups: those at ``merge`` through ``keyed`` (keyed tasks that
    go back in line), the rest through the statement ``plain`` names for their indexes.
    Raises LeaseLost once, for the tasks either group did not touch."""
    tasks = list(tasks)
    if len({t.id for t in tasks}) != len(tasks):
        raise InvalidTask("the same task appears twice in one batch")
    chosen = set(merge)
    rest = [i for i in range(len(tasks)) if i not in chosen]
    lost: list[UUID] = []
    if rest:
        name, extra = plain(rest)
        try:
            settle(client, name, [tasks[i] for i in rest], extra)
        except LeaseLost as exc:
            lost += exc.task_ids
    if merge:
        group = [tasks[i] for i in merge]
        done = keyed(group)
        lost += [t.id for t in group if t.id not in done]
    if lost:
        raise LeaseLost(lost)


def settle(client: Client, name: str, tasks: Sequence[Task], extra: dict[str, Any]) -> None:
    """Run a lease-checked batch statement; raise LeaseLost for the tasks it did not touch.

    Statements that return a new address (extend) update those tasks in place:
    exec_time is part of the row's key while the lease lasts, and on CockroachDB the
    bucket is a hash of the whole key.
    """
    tasks = list(tasks)
    if not tasks:
        return
    if len({t.id for t in tasks}) != len(tasks):
        raise InvalidTask("the same task appears twice in one batch")
    params = client._params(**locate(tasks), **extra)
    query = client._query(name)

    def work(conn: Conn) -> list[tuple[Any, ...]]:
        return conn.execute(query, params).fetchall()

    rows = client.db.run(work)
    if len(rows) == len(tasks) and name != "extend_many":
        return  # every task was found (each row is a distinct one of them)
    done = {row[0]: row for row in rows}
    if name == "extend_many":
        for t in tasks:
            if t.id in done:
                t.exec_time, t.bucket = done[t.id][1], done[t.id][2]
    lost = [t.id for t in tasks if t.id not in done]
    if lost:
        raise LeaseLost(lost)
