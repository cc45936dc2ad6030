"""From a Spark DataFrame to running tasks.

A pipeline computes overdue invoices with Spark and turns each one into a task of the
queue ``invoices`` with :func:`shardq.spark.write_tasks` (Spark's JDBC writer, no Python
per row); workers run them.  Needs ``pip install 'shardq[spark]'``, a Java runtime, the
PostgreSQL JDBC jar (Debian: ``apt-get install libpostgresql-jdbc-java``) and a database
reachable over TCP with shardq's schema (``shardq migrate --dsn ...``)::

    python -m examples.spark_pipeline --dsn postgresql://postgres@127.0.0.1:5432/app
    shardq consume examples.spark_handlers:handle --queue invoices --dsn ...

or ``--consume`` to drain the queue here with a Client loop instead of the daemon.
"""

from __future__ import annotations

import argparse
import os
import time

import shardq
from shardq.spark import write_tasks

JAR = os.environ.get("SHARDQ_JDBC_JAR", "/usr/share/java/postgresql.jar")


def overdue_invoices(spark: object, n: int) -> object:
    """A stand-in for the pipeline's real work: ``n`` invoices, every tenth one repeated."""
    from pyspark.sql import functions as F

    return spark.range(n).select(  # type: ignore[attr-defined]
        F.format_string("INV-%06d", F.col("id") % (n - n // 10)).alias("invoice"),
        F.format_string("customer-%d", F.col("id") % 997).alias("customer"),
        (F.col("id") % 5000 / 100).alias("amount"),
        F.lit("EUR").alias("currency"),
        (F.current_timestamp() - F.expr("INTERVAL 1 DAY")).alias("due_at"),
        F.when(F.col("id") % 50 == 0, 600).otherwise(0).alias("priority"),
    )


def main() -> None:
    """Write the tasks, then optionally consume them here."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("SHARDQ_DSN"), required=False)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--consume", action="store_true", help="drain the queue here")
    args = parser.parse_args()
    if not args.dsn:
        parser.error("give --dsn postgresql://user@host:port/db (or set SHARDQ_DSN)")

    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("shardq-example")
             .config("spark.jars", JAR).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    invoices = overdue_invoices(spark, args.rows)
    started = time.perf_counter()
    result = write_tasks(
        invoices, dsn=args.dsn, queue="invoices",
        payload=["invoice", "customer", "amount", "currency", "due_at"],
        run_at="due_at", priority="priority",
        mode="idempotent", id_columns=["invoice"],  # a re-run adds no second reminder
    )
    print(f"{result.fresh} new invoices, {result.tasks} tasks written "
          f"in {time.perf_counter() - started:.1f} s")
    spark.stop()

    if args.consume:
        from examples.spark_handlers import handle

        done = 0
        with shardq.Client(args.dsn) as client:
            while tasks := client.claim("invoices", limit=1000):
                for task in tasks:
                    handle(task.payload)
                client.ack_many(tasks)
                done += len(tasks)
        print(f"consumed {done} tasks")


if __name__ == "__main__":
    main()
