"""From files landing in a folder to running tasks, and the dead letters back into Spark.

A Structured Streaming query reads order files (JSON lines) as they land and makes each
order one task of the queue ``orders`` with :func:`shardq.spark.write_stream_tasks`
(once per row, across retries and restarts from the checkpoint); a worker runs them
here, and orders it cannot take die at once; then a batch job reads the dead letters
back with :func:`shardq.spark.read_tasks`.  Needs ``pip install 'shardq[spark]'``, a
Java runtime, the PostgreSQL JDBC jar (``SHARDQ_JDBC_JAR``, default Debian's
/usr/share/java/postgresql.jar) and a database on TCP with shardq's schema::

    python -m examples.spark_streaming --dsn postgresql://postgres@127.0.0.1:5432/app
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import shardq
from shardq.spark import read_tasks, write_stream_tasks

JAR = os.environ.get("SHARDQ_JDBC_JAR", "/usr/share/java/postgresql.jar")


def land_orders(folder: Path, files: int, per_file: int) -> None:
    """Drop ``files`` files of orders into ``folder``, one a second (every 25th order
    has a negative amount, which the worker refuses)."""
    for f in range(files):
        rows = [{"order": f * per_file + i, "amount": -1 if (f * per_file + i) % 25 == 0
                 else 10 + i % 90} for i in range(per_file)]
        part = folder.parent / f".orders-{f}.json"
        part.write_text("".join(json.dumps(r) + "\n" for r in rows))
        part.rename(folder / f"orders-{f}.json")  # whole files only: the stream lists them
        time.sleep(1)


def work(dsn: str, stop: threading.Event) -> int:
    """Run the orders' tasks until ``stop`` is set and the queue is empty; return how
    many succeeded."""
    done = 0
    with shardq.Client(dsn) as client:
        while True:
            tasks = client.claim("orders", limit=100)
            if not tasks:
                if stop.is_set():
                    return done
                time.sleep(0.2)
                continue
            for task in tasks:
                if task.payload["amount"] < 0:
                    client.nack(task, f"refused: negative amount {task.payload['amount']}",
                                dead=True)
                else:
                    client.ack(task)
                    done += 1


def main() -> None:
    """Stream the files in, work the tasks, then read the dead letters back."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("SHARDQ_DSN"))
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--per-file", type=int, default=200)
    args = parser.parse_args()
    if not args.dsn:
        parser.error("give --dsn postgresql://user@host:port/db (or set SHARDQ_DSN)")

    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("shardq-streaming")
             .config("spark.jars", JAR).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="shardq-streaming-"))
    landing = root / "landing"
    landing.mkdir()
    orders = spark.readStream.schema("order long, amount long").json(str(landing))
    query = write_stream_tasks(
        orders, dsn=args.dsn, queue="orders", payload=["order", "amount"],
        checkpoint_location=str(root / "checkpoint"), trigger={"processingTime": "1 second"},
        on_batch=lambda batch_id, result: print(f"batch {batch_id}: {result.tasks} tasks"))

    stop = threading.Event()
    succeeded: list[int] = []
    worker = threading.Thread(target=lambda: succeeded.append(work(args.dsn, stop)))
    worker.start()
    land_orders(landing, args.files, args.per_file)
    query.processAllAvailable()  # every landed file is in tasks now
    query.stop()
    stop.set()
    worker.join()
    print(f"{succeeded[0]} orders done")

    dead: Any = read_tasks(spark, dsn=args.dsn, queue="orders", states=["dead"])
    dead.groupBy("last_error").count().orderBy("last_error").show(truncate=False)
    print(f"{dead.count()} dead letters")
    spark.stop()


if __name__ == "__main__":
    main()
