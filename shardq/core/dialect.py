"""The two engines shardq runs on, as objects that answer what each can do.

Code that behaves differently per engine asks its :class:`Dialect` (``dialect.copy``,
``dialect.keyed_tasks``, ``dialect.bucket_of(...)``) rather than comparing names.
SQL that differs lives in ``sql/<dialect name>/`` beside the shared files.

The bucket formula is here, once, in both of its forms: :func:`bucket_expression` is
the expression PostgreSQL's generated ``bucket`` column is defined with (migration 0002
renders it) and that a resharded layout's indexes and statements name, and
:meth:`PostgreSQL.bucket_of` computes the same number in Python.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from psycopg import sql

from shardq.core.errors import ConfigError, SchemaNotReady
from shardq.core.task import TaskId

BUCKET_FORMULA = sql.SQL(
    "mod(get_byte(uuid_send({id}), 14) * 256 + get_byte(uuid_send({id}), 15), {count})")


def bucket_expression(id_column: sql.Composable, bucket_count: int) -> sql.Composed:
    """PostgreSQL's bucket of a row: the id's last two bytes, big-endian, mod the count."""
    return BUCKET_FORMULA.format(id=id_column, count=sql.Literal(int(bucket_count)))


def bucket_sql(id_column: str, bucket_count: int) -> str:
    """:func:`bucket_expression` as text, over a column written as ``id_column`` (the
    generated column's definition in migration 0002)."""
    return bucket_expression(sql.SQL(id_column), bucket_count).as_string(None)


EXPRESSION_MARK = "#"
"""How a layout's bucket reads when it is :func:`bucket_sql` over the id itself, not a
column: the mark and the count (``#64``), which no column of shardq is named."""


def expression_bucket(bucket_count: int) -> str:
    """The bucket of PostgreSQL's expression layout of ``bucket_count`` buckets, as a
    layout holds it (see :data:`EXPRESSION_MARK`)."""
    return f"{EXPRESSION_MARK}{int(bucket_count)}"


def expression_count(bucket: str) -> int | None:
    """The bucket count of an expression layout's bucket; None for a column's name."""
    if bucket.startswith(EXPRESSION_MARK):
        return int(bucket[len(EXPRESSION_MARK):])
    return None


@dataclass(frozen=True)
class Dialect(ABC):
    """What one engine can do, and how shardq's schema looks on it."""

    name: str
    """The engine's name, which is also the folder of its SQL overrides."""
    copy: bool
    """Batches of new tasks are written with COPY (else one multi-row INSERT)."""
    keyed_tasks: bool
    """Statements may modify the tasks table twice, which keyed tasks need."""
    notify: bool
    """LISTEN/NOTIFY wakes idle workers when tasks are enqueued."""
    ordered_ids: bool
    """New task ids are time-ordered (version 7), so the id index takes each batch in at
    its right edge instead of on as many random pages as the batch has rows.
    CockroachDB wants them random (version 4): ordered keys would send every insert
    to the one range that holds the newest ids."""
    vacuum: bool
    """Dead row versions are removed by VACUUM, tuned per table with storage parameters
    (autovacuum_*), and indexes can be rebuilt with REINDEX CONCURRENTLY.  CockroachDB
    has none of these: its MVCC garbage goes after gc.ttlseconds (migration 0005)."""

    @abstractmethod
    def bucket_of(self, task_id: UUID, bucket_count: int) -> int | None:
        """The bucket of a task from its id alone, or None where the id does not decide it."""

    def buckets_of(self, ids: Iterable[UUID] | None, bucket_count: int) -> list[int]:
        """The buckets that hold these ids (every bucket when it cannot be narrowed)."""
        if ids is None:
            return list(range(bucket_count))
        found = [self.bucket_of(i, bucket_count) for i in ids]
        if any(b is None for b in found):
            return list(range(bucket_count))
        return sorted({b for b in found if b is not None})

    def new_ids(self, n: int) -> list[TaskId]:
        """``n`` new task ids of the kind this engine wants (see :attr:`ordered_ids`)."""
        return TaskId.made_from(self.new_id_values(n))

    def new_id_values(self, n: int) -> Sequence[int]:
        """The 128-bit values of ``n`` new task ids (:meth:`new_ids` without the objects)."""
        return TaskId.ordered_values(n) if self.ordered_ids else TaskId.random_values(n)

    def require_keyed_tasks(self) -> None:
        """Raise ConfigError where keyed tasks cannot work."""
        if not self.keyed_tasks:
            raise ConfigError(f"keyed tasks need PostgreSQL: on {self.name} a statement cannot "
                              "modify the tasks table twice, which merging a retry needs")

    @abstractmethod
    def new_bucket_column(self, bucket_count: int) -> str:
        """The bucket column of a schema created with ``bucket_count`` buckets."""

    @abstractmethod
    def layout_bucket(self, bucket_count: int, expression: bool) -> str:
        """The bucket of the layout that ``shardq.layout`` describes (its count, and
        whether the bucket is an expression of the id or the table's column)."""

    @abstractmethod
    def bucket_column(self, columns: Mapping[str, str]) -> tuple[str, int]:
        """The bucket column and bucket count, from ``schema_info``'s rows (name → expression).

        Raises SchemaNotReady when the tasks table is not there.
        """


_COUNT_IN_EXPR = re.compile(r"(\d+)\)*\s*$")
COUNT_IN_SHARD = re.compile(r"_shard_(\d+)$")


@dataclass(frozen=True)
class PostgreSQL(Dialect):
    """PostgreSQL: ``bucket`` is a stored generated column, a function of the id."""

    def bucket_of(self, task_id: UUID, bucket_count: int) -> int:
        """The same number as :func:`bucket_sql` computes in the database."""
        return int.from_bytes(task_id.bytes[14:16], "big") % bucket_count

    def new_bucket_column(self, bucket_count: int) -> str:
        """``bucket``, whatever the count."""
        return "bucket"

    def layout_bucket(self, bucket_count: int, expression: bool) -> str:
        """The stored column ``bucket``, or :func:`expression_bucket` once a reshard made
        the bucket an expression that indexes are built over."""
        return expression_bucket(bucket_count) if expression else "bucket"

    def bucket_column(self, columns: Mapping[str, str]) -> tuple[str, int]:
        """``bucket``, and the modulus of its generation expression."""
        match = _COUNT_IN_EXPR.search(columns.get("bucket", ""))
        if match is None:
            raise SchemaNotReady("the table shardq.tasks does not exist")
        return "bucket", int(match.group(1))


@dataclass(frozen=True)
class CockroachDB(Dialect):
    """CockroachDB: a hash-sharded primary key whose hidden shard column hashes the whole key."""

    def bucket_of(self, task_id: UUID, bucket_count: int) -> None:
        """None: the shard hashes (queue, status, exec_time, id), not the id alone."""
        return None

    def new_bucket_column(self, bucket_count: int) -> str:
        """The hidden shard column CockroachDB names after the primary key's columns,
        sorted, and the count: ``crdb_internal_exec_time_id_queue_status_shard_N``."""
        return f"crdb_internal_exec_time_id_queue_status_shard_{int(bucket_count)}"

    def layout_bucket(self, bucket_count: int, expression: bool) -> str:
        """The shard column of a primary key hashed into ``bucket_count`` buckets (while a
        reshard runs the table has two, and the layout says which claims use)."""
        return self.new_bucket_column(bucket_count)

    def bucket_column(self, columns: Mapping[str, str]) -> tuple[str, int]:
        """The one ``crdb_internal_…_shard_N`` column, and N."""
        shards = sorted(c for c in columns if COUNT_IN_SHARD.search(c))
        if len(shards) > 1:
            raise SchemaNotReady(f"shardq.tasks has several shard columns {shards} "
                                 "(a bucket-count change is in progress)")
        if not shards:
            raise SchemaNotReady("the table shardq.tasks does not exist")
        match = COUNT_IN_SHARD.search(shards[0])
        assert match is not None
        return shards[0], int(match.group(1))


POSTGRESQL: Dialect = PostgreSQL("postgresql", copy=True, keyed_tasks=True, notify=True,
                                 ordered_ids=True, vacuum=True)
COCKROACHDB: Dialect = CockroachDB("cockroachdb", copy=False, keyed_tasks=False, notify=False,
                                   ordered_ids=False, vacuum=False)
DIALECTS: dict[str, Dialect] = {d.name: d for d in (POSTGRESQL, COCKROACHDB)}


def from_version(version: str) -> Dialect:
    """The dialect of a server, from what its ``version()`` says."""
    return COCKROACHDB if "CockroachDB" in version else POSTGRESQL


def named(name: str) -> Dialect:
    """The dialect called ``name`` ('postgresql' or 'cockroachdb')."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise ConfigError(f"unknown dialect {name!r}: use one of {sorted(DIALECTS)}") from None
