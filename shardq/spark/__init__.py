"""Bulk-insert tasks from PySpark pipelines with Spark's own JDBC writer.

``write_tasks(df, dsn=..., queue=..., payload=...)`` turns each row of a DataFrame into
a task; the executors write the rows, no Python runs per row.  PySpark is an optional
extra (``pip install 'shardq[spark]'``): this package imports without it and says so
when used.  Spark needs the PostgreSQL JDBC driver (``spark.jars``, e.g. Debian's
``libpostgresql-jdbc-java`` at /usr/share/java/postgresql.jar) and a TCP address.
"""

from shardq.spark.frame import JSON_OPTIONS, SPARK_NAMESPACE, task_id
from shardq.spark.jdbc import (
    COCKROACHDB_BATCH_SIZE,
    POSTGRESQL_BATCH_SIZE,
    Target,
    jdbc_target,
    libpq_url,
    writer_options,
)
from shardq.spark.write import WriteResult, prune_ledger, write_tasks

__all__ = [
    "COCKROACHDB_BATCH_SIZE",
    "JSON_OPTIONS",
    "POSTGRESQL_BATCH_SIZE",
    "SPARK_NAMESPACE",
    "Target",
    "WriteResult",
    "jdbc_target",
    "libpq_url",
    "prune_ledger",
    "task_id",
    "write_tasks",
    "writer_options",
]
