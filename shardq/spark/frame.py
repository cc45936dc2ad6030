"""The DataFrame that ``write_tasks`` sends: typed task columns, times in UTC, stable ids.

Everything here is Spark SQL, evaluated by the executors: no Python runs per row.
PySpark is imported when a function needs it, so ``shardq.spark`` imports without it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from shardq.core import rules, validate
from shardq.core.errors import ConfigError, InvalidTask

# The namespace of the deterministic (version 5) ids of idempotent writes; a job may
# pass its own to keep its ids apart from another job's.
SPARK_NAMESPACE = uuid.UUID("679d7eaf-f3af-5e14-993a-f5cfd63c0582")

# to_json of payload columns: timestamps as UTC instants to the microsecond, whatever
# spark.sql.session.timeZone says, and null fields kept.
JSON_OPTIONS = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timeZone": "UTC",
    "ignoreNullFields": "false",
}

ColumnLike = Any  # a column name, or a pyspark.sql.Column
# What starts the message of an error a row's value raises in Spark (raise_error).
RAISED = "shardq:"
# Spark's integral types (and the type of a null literal), which cast to int exactly.
INTEGER_TYPES = ("byte", "short", "integer", "long", "void")


def functions() -> Any:
    """``pyspark.sql.functions``, or a ConfigError saying how to install PySpark."""
    try:
        from pyspark.sql import functions as f
    except ImportError as exc:
        raise ConfigError(
            "shardq.spark needs PySpark: pip install 'shardq[spark]' (and a Java runtime "
            "with the PostgreSQL JDBC driver on spark.jars)"
        ) from exc
    return f


def column(F: Any, df: Any, value: ColumnLike, what: str) -> Any:
    """``value`` as a Column: a name of one of ``df``'s columns, or a Column."""
    if isinstance(value, str):
        if value not in df.columns:
            raise ConfigError(f"{what}: the DataFrame has no column {value!r} "
                              f"(it has {', '.join(df.columns)})")
        return F.col(value)
    return value


def type_name(df: Any, col: Any) -> str:
    """The Spark SQL type name of ``col`` over ``df`` (``string``, ``timestamp``, ...)."""
    return str(df.select(col).schema.fields[0].dataType.typeName())


def payload_column(F: Any, df: Any, payload: ColumnLike | Sequence[str]) -> Any:
    """The payload as JSON text: a JSON string column as it is, a struct/map/array column
    or a list of column names packed with ``to_json(struct(...))``."""
    if isinstance(payload, list | tuple):
        if not payload:
            raise ConfigError("payload: name at least one column")
        cols = [column(F, df, name, "payload") for name in payload]
        return F.to_json(F.struct(*cols), JSON_OPTIONS)
    col = column(F, df, payload, "payload")
    kind = type_name(df, col)
    if kind == "string":
        return col
    if kind in ("struct", "map", "array"):
        return F.to_json(col, JSON_OPTIONS)
    raise ConfigError(f"payload: a JSON string column or a struct, map or array is needed, "
                      f"got a {kind} column")


def utc_micros(F: Any, df: Any, value: ColumnLike, what: str) -> Any:
    """Microseconds since the Unix epoch of a time column.

    TimestampType is an instant already.  A TimestampNTZType (or DateType) value has no
    zone: it is read as UTC here, never in the JVM's or the session's zone.
    """
    col = column(F, df, value, what)
    kind = type_name(df, col)
    if kind == "timestamp":
        return F.unix_micros(col)
    if kind in ("timestamp_ntz", "date"):
        local = col.cast("timestamp_ntz")
        seconds = F.extract(F.lit("SECOND"), local)  # with the fraction, to the microsecond
        return F.unix_micros(F.make_timestamp(
            F.year(local), F.month(local), F.dayofmonth(local), F.hour(local),
            F.minute(local), seconds, F.lit("UTC")))
    raise ConfigError(f"{what}: a timestamp column is needed (TimestampType, or "
                      f"TimestampNTZType read as UTC), got a {kind} column")


def int_column(F: Any, df: Any, value: ColumnLike | int | None, what: str,
               default: int) -> Any:
    """An int column (nulls become ``default``), from a column or one value for all rows."""
    if value is None:
        return F.lit(default)
    if isinstance(value, bool):
        raise InvalidTask(f"{what} must be an integer, got {value!r}")
    if isinstance(value, int):
        if what == "priority":
            validate.priority(value)
        else:
            validate.max_attempts(value, default)
        return F.lit(value)
    col = column(F, df, value, what)
    kind = type_name(df, col)
    if kind not in INTEGER_TYPES:
        raise ConfigError(f"{what}: must be an integer column, not {kind}")
    if kind == "long":  # a cast out of int's range would fail naming no column
        low, rule = ((-rules.MAX_PRIORITY_S, rules.PRIORITY_RULE) if what == "priority"
                     else (1, rules.CHECKS["tasks_attempts_check"][1]))
        col = F.when(col.between(low, rules.INT4_MAX) | col.isNull(), col).otherwise(
            F.raise_error(F.lit(f"{RAISED} {what}: {rule}")))
    return F.coalesce(col.cast("int"), F.lit(default))


def group_column(F: Any, group: ColumnLike) -> Any:
    """One group for every row (a name), or a Column holding each row's group."""
    if isinstance(group, str):
        return F.lit(validate.group(group))
    return group.cast("string")


def queue_column(F: Any, df: Any, queue: ColumnLike) -> Any:
    """One queue for every row (a name), or a Column holding each row's queue."""
    if isinstance(queue, str):
        return F.lit(validate.queue_name(queue))
    kind = type_name(df, queue)
    if kind != "string":
        raise ConfigError(f"queue: must be a string column, not {kind}")
    return queue


def id_part(F: Any, df: Any, name: str) -> Any:
    """A natural-key column as the text its deterministic id is computed from."""
    col = column(F, df, name, "id_columns")
    kind = type_name(df, col)
    if kind in ("timestamp", "timestamp_ntz", "date"):
        return utc_micros(F, df, name, "id_columns").cast("string")
    if kind == "binary":
        return F.hex(col)
    if kind in ("struct", "map", "array"):
        return F.to_json(col, JSON_OPTIONS)
    return col.cast("string")


def uuid5_column(F: Any, parts: Sequence[Any], namespace: uuid.UUID) -> Any:
    """The version-5 uuid of the JSON array ``parts`` (string columns), as canonical text.

    SHA-1 of the namespace's 16 bytes and the name's UTF-8, version nibble 5, variant
    bits 10; bytes 14-15 (which pick the bucket) are hash bytes, so ids spread evenly.
    """
    name = F.to_json(F.array(*parts))
    digest = F.sha1(F.concat(F.unhex(F.lit(namespace.hex)), F.encode(name, "UTF-8")))

    def hexes(start: int, length: int) -> Any:
        return F.substring(digest, start, length)

    variant = F.translate(hexes(17, 1), "0123456789abcdef", "89ab89ab89ab89ab")
    return F.concat(hexes(1, 8), F.lit("-"), hexes(9, 4), F.lit("-5"), hexes(14, 3),
                    F.lit("-"), variant, hexes(18, 3), F.lit("-"), hexes(21, 12))


def task_id(queue: str, *parts: str | None, namespace: uuid.UUID = SPARK_NAMESPACE) -> uuid.UUID:
    """The id an idempotent write gives a row of ``queue`` whose ``id_columns`` read ``parts``
    (each as Spark casts it to a string; times as microseconds since the epoch, UTC).

    The same as the Spark expression for text without control characters (Spark's JSON
    writes their escapes in capitals).
    """
    name = json.dumps([queue, *parts], ensure_ascii=False, separators=(",", ":"))
    return uuid.uuid5(namespace, name)
