"""Bulk insert from Spark: JDBC append and idempotent writes against psycopg COPY.

In one run, each configuration writes the same N tasks (payload
``{"n": ..., "text": ...}``, about 70 bytes of JSON) into a fresh, migrated database,
timed from the call to its return:

- ``copy``: ``Client.enqueue_many`` in one call (psycopg, binary COPY), payloads built
  in Python beforehand (not timed);
- ``spark append``: ``write_tasks(mode="append")``, plain rows straight into shardq.tasks;
- ``spark staged``: the same rows with a ``priority`` column, so through the unlogged
  staging table and the ``insert_rows`` merge;
- ``spark idempotent``: ``write_tasks(mode="idempotent", id_columns=["n"])``;
- ``spark idempotent re-run``: the same write again (every id already merged).

Then the JDBC batch size of the append path is swept.  Spark runs ``local[2]`` with the
PostgreSQL JDBC jar; the server must listen on TCP (``--dsn`` / ``SHARDQ_BENCH_DSN``,
else the embedded PostgreSQL restarted on 127.0.0.1)::

    python -m bench.spark.insert [--rows 1000000] [--batch-sizes 1000,2000,5000,10000,20000]
        [--sweep-rows N] [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import psycopg

import shardq
from bench import harness
from shardq.spark import POSTGRESQL_BATCH_SIZE, write_tasks

JAR = os.environ.get("SHARDQ_JDBC_JAR", "/usr/share/java/postgresql.jar")
QUEUE = "bench"


@contextlib.contextmanager
def tcp_server(dsn: str | None) -> Iterator[tuple[str, str]]:
    """(admin URL, description) of a server JDBC can reach."""
    configured = dsn or os.environ.get(harness.DSN_ENV)
    if configured:
        yield configured, "given server (--dsn / SHARDQ_BENCH_DSN)"
        return
    from tests.tcp_postgres import embedded_on_tcp

    with embedded_on_tcp() as url:
        yield url, "embedded PostgreSQL wheel on 127.0.0.1 (temporary data dir)"


def spark_session() -> Any:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("shardq-bench")
             .config("spark.jars", JAR).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def frame(spark: Any, rows: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(0, rows, 1, 2).select(
        F.col("id").alias("n"), F.lit("lorem ipsum dolor sit amet, consectetur").alias("text"),
        (F.col("id") % 3).cast("int").alias("priority"))


def count(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(harness.scalar(conn, "SELECT count(*) FROM shardq.tasks"))


def timed(url: str, write: Callable[[], object]) -> float:
    harness.checkpoint(url)
    began = time.perf_counter()
    write()
    return time.perf_counter() - began


def run(args: argparse.Namespace, dbs: harness.Databases, spark: Any) -> dict[str, Any]:
    """Every configuration once; returns seconds per configuration and per batch size."""
    df = frame(spark, args.rows)
    seconds: dict[str, float] = {}
    warm = dbs.migrated(16)
    write_tasks(frame(spark, 20_000), dsn=warm, queue=QUEUE, payload=["n", "text"])

    url = dbs.migrated(16)
    payloads = [{"n": i, "text": "lorem ipsum dolor sit amet, consectetur"}
                for i in range(args.rows)]
    with shardq.Client(url) as client:
        seconds["copy"] = timed(url, lambda: client.enqueue_many(QUEUE, payloads))
    payloads.clear()
    plain: dict[str, Any] = {"queue": QUEUE, "payload": ["n", "text"]}
    configs: list[tuple[str, dict[str, Any]]] = [
        ("spark append", plain),
        ("spark staged", {**plain, "priority": "priority"}),
        ("spark idempotent", {**plain, "mode": "idempotent", "id_columns": ["n"]}),
    ]
    for name, options in configs:
        url = dbs.migrated(16)
        seconds[name] = timed(url, partial(write_tasks, df, dsn=url, **options))
        assert count(url) == args.rows, name
        if name == "spark idempotent":
            seconds["spark idempotent re-run"] = timed(
                url, partial(write_tasks, df, dsn=url, **options))
            assert count(url) == args.rows
    sweep: dict[int, float] = {}
    sweep_df = frame(spark, args.sweep_rows)
    for size in args.batch_sizes:
        url = dbs.migrated(16)
        sweep[size] = timed(url, partial(write_tasks, sweep_df, dsn=url, batch_size=size,
                                         **plain))
        assert count(url) == args.sweep_rows
    return {"seconds": seconds, "sweep": sweep}


def report(args: argparse.Namespace, result: dict[str, Any], machine: list[str]) -> str:
    seconds, sweep = result["seconds"], result["sweep"]
    rate = {k: args.rows / v for k, v in seconds.items()}
    rows = [(name, round(s, 2), rate[name], rate[name] / rate["copy"],
             rate[name] / rate["spark append"]) for name, s in seconds.items()]
    sweep_rows = [(size, round(s, 2), args.sweep_rows / s) for size, s in sweep.items()]
    best = max(sweep, key=lambda k: args.sweep_rows / sweep[k])
    idem = seconds["spark idempotent"] / seconds["spark append"]
    note = (
        f"Writing {args.rows:,} tasks, Spark's JDBC append ran at {rate['spark append']:,.0f} "
        f"rows/s, {rate['spark append'] / rate['copy']:.2f}x psycopg COPY "
        f"({rate['copy']:,.0f} rows/s); through the staging table and merge "
        f"{rate['spark staged'] / rate['copy']:.2f}x COPY; idempotent mode "
        f"{rate['spark idempotent'] / rate['copy']:.2f}x COPY, i.e. it took {idem:.2f}x the "
        f"time of a plain append (the staging write, the ledger insert and the merge), and a "
        f"re-run that found every id merged took {seconds['spark idempotent re-run']:.1f} s. "
        f"Batch sizes: the fastest was {best:,} rows ({args.sweep_rows / sweep[best]:,.0f} "
        f"rows/s); the default is {POSTGRESQL_BATCH_SIZE:,}."
    )
    return "\n".join([
        f"# shardq: bulk insert from Spark ({args.rows:,} tasks)", "", *machine,
        f"- Spark local[2] (PySpark {spark_version()}), PostgreSQL JDBC jar {JAR}; "
        "reWriteBatchedInserts=true, stringtype=unspecified, one transaction per partition, "
        "2 partitions",
        "- each configuration: a fresh migrated database (16 buckets), CHECKPOINT, then the "
        "call timed to its return; one rep, configurations run one after another",
        "", harness.markdown_table(["configuration", "seconds", "rows/s", "÷ copy",
                                   "÷ spark append"], rows),
        "", f"JDBC batch size of the append path ({args.sweep_rows:,} rows each):", "",
        harness.markdown_table(["batchsize", "seconds", "rows/s"], sweep_rows),
        "", "## Conclusion", "", note, ""])


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.spark.insert", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, help="tasks per configuration (default 1000000)")
    p.add_argument("--sweep-rows", type=int, help="tasks per batch size (default: --rows)")
    p.add_argument("--batch-sizes", default="1000,2000,5000,10000,20000")
    p.add_argument("--quick", action="store_true", help="100k rows, 3 batch sizes")
    p.add_argument("--output", help="file name under bench/results (default spark_insert.md, "
                   "or spark_insert-quick.md with --quick)")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    args.rows = args.rows or (100_000 if args.quick else 1_000_000)
    args.sweep_rows = args.sweep_rows or args.rows
    if args.quick and args.batch_sizes == p.get_default("batch_sizes"):
        args.batch_sizes = "1000,5000,20000"
    args.batch_sizes = [int(s) for s in args.batch_sizes.split(",")]
    args.output = args.output or harness.result_name("spark_insert", args.quick)
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print/write its markdown report."""
    args = parse_args(argv)
    spark = spark_session()
    try:
        with tcp_server(args.dsn) as (admin, description), harness.Databases(admin) as dbs:
            result = run(args, dbs, spark)
            text = report(args, result, harness.machine_lines(admin, description))
    finally:
        spark.stop()
    print(text)
    print(f"written to {harness.write_result(args.output, text)}")


if __name__ == "__main__":
    main()
