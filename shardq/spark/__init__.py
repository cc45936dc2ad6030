"""Tasks from PySpark pipelines, batch and streaming, and their outcomes read back.

``write_tasks(df, dsn=..., queue=..., payload=...)`` turns each row of a DataFrame into
a task; the executors write the rows, no Python runs per row.  PySpark is an optional
extra (``pip install 'shardq[spark]'``): this package imports without it and says so
when used.  ``write_stream_tasks`` is the Structured Streaming sink (each row one task,
once, across retries and restarts); ``read_tasks`` reads tasks, dead letters and
kept results back as a DataFrame.  With ``on_complete=fn.s(...)`` a write's tasks (or
each micro-batch's) form one batch whose callback runs once they all ended, so that
a pipeline's next stage starts from it.  Spark needs the PostgreSQL JDBC driver
(``spark.jars``, e.g. Debian's ``libpostgresql-jdbc-java`` at
/usr/share/java/postgresql.jar) and a TCP address.
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
from shardq.spark.read import COLUMNS, STATES, read_tasks
from shardq.spark.stream import stream_id, write_stream_tasks
from shardq.spark.write import WriteResult, prune_ledger, write_tasks

__all__ = [
    "COCKROACHDB_BATCH_SIZE",
    "COLUMNS",
    "JSON_OPTIONS",
    "POSTGRESQL_BATCH_SIZE",
    "SPARK_NAMESPACE",
    "STATES",
    "Target",
    "WriteResult",
    "jdbc_target",
    "libpq_url",
    "prune_ledger",
    "read_tasks",
    "stream_id",
    "task_id",
    "write_stream_tasks",
    "write_tasks",
    "writer_options",
]
