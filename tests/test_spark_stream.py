"""write_stream_tasks with a real local Spark: a stream over JSON files whose driver is
killed between a batch's write and its checkpoint commit, and whose executor task
fails mid-batch; every row ends up as exactly one task.  Skipped like tests/test_spark.py
when PySpark, Java or the JDBC jar is missing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import shardq
from shardq.core.errors import ConfigError
from shardq.loops.resolver import resolve
from shardq.spark import WriteResult, write_stream_tasks
from shardq.spark.merge import merge_query, new_stage_name
from tests.conftest import ROOT, Databases
from tests.helpers import claim_all, query
from tests.spark_env import JAR, quick_jvm, require_spark

require_spark()
F = pytest.importorskip("pyspark.sql.functions")

# The streaming driver the first test runs as a process of its own; with
# SHARDQ_TEST_KILL_AT_BATCH set it SIGKILLs itself (the Python driver and its JVM, its
# whole process group) right after that batch's tasks were committed, before Spark
# commits the batch to the checkpoint.  With SHARDQ_TEST_ON_COMPLETE set, each batch's
# tasks have a callback, done(counts, batch_id).
DRIVER = """
import os, signal, sys
from pyspark.sql import SparkSession
import shardq
from shardq.spark import write_stream_tasks

app = shardq.App()

@app.task(queue="stream_done")
def done(counts, batch_id):
    pass

dsn, source, checkpoint, jar = sys.argv[1:5]
spark = (SparkSession.builder.master("local[2]").config("spark.jars", jar)
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
rows = (spark.readStream.schema("n long, text string").option("maxFilesPerTrigger", 1)
        .json(source))
kill_at = os.environ.get("SHARDQ_TEST_KILL_AT_BATCH")
on_complete = (lambda batch_id: done.s(batch_id)) if os.environ.get(
    "SHARDQ_TEST_ON_COMPLETE") else None

def on_batch(batch_id, result):
    print(f"batch {batch_id}: staged {result.staged} tasks {result.tasks} "
          f"callback {result.callback_id}", flush=True)
    if kill_at is not None and batch_id == int(kill_at):
        os.killpg(os.getpgid(0), signal.SIGKILL)

query = write_stream_tasks(rows, dsn=dsn, queue="stream", payload=["n", "text"],
                           checkpoint_location=checkpoint, trigger={"availableNow": True},
                           on_batch=on_batch, on_complete=on_complete)
query.awaitTermination()
print("stopped", flush=True)
"""


def land(source: Path, name: str, numbers: range) -> None:
    """A JSON-lines file of rows ``numbers``, moved into ``source`` whole."""
    part = source.parent / f".{name}"
    part.write_text("".join(json.dumps({"n": n, "text": f"row {n}"}) + "\n" for n in numbers))
    part.rename(source / name)


def run_driver(tmp: Path, url: str, kill_at: int | None,
               on_complete: bool) -> subprocess.CompletedProcess[str]:
    script = tmp / "driver.py"
    script.write_text(DRIVER)
    env = quick_jvm({**os.environ, "PYTHONPATH": str(ROOT)})
    env.pop("SHARDQ_TEST_KILL_AT_BATCH", None)
    env.pop("SHARDQ_TEST_ON_COMPLETE", None)
    if kill_at is not None:
        env["SHARDQ_TEST_KILL_AT_BATCH"] = str(kill_at)
    if on_complete:
        env["SHARDQ_TEST_ON_COMPLETE"] = "1"
    return subprocess.run(
        [sys.executable, str(script), url, str(tmp / "in"), str(tmp / "checkpoint"), str(JAR)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=180,
        start_new_session=True)


@pytest.mark.parametrize("on_complete", [False, True], ids=["plain", "on_complete"])
def test_a_driver_killed_before_the_checkpoint_commit(tmp_path: Path, dbs: Databases,
                                                      on_complete: bool) -> None:
    """Every row becomes one task, and with on_complete every micro-batch has one
    callback, counting its own tasks: batch 1, run again, writes neither."""
    url = dbs.create()
    source = tmp_path / "in"
    source.mkdir()
    land(source, "a.json", range(0, 1000))
    land(source, "b.json", range(1000, 1500))

    killed = run_driver(tmp_path, url, kill_at=1, on_complete=on_complete)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert "batch 0: staged 1000 tasks 1000" in killed.stdout
    assert "batch 1: staged 500 tasks 500" in killed.stdout
    assert "stopped" not in killed.stdout
    commits = tmp_path / "checkpoint" / "commits"
    assert (commits / "0").is_file()
    assert not (commits / "1").exists()  # batch 1 was never committed
    assert (tmp_path / "checkpoint" / "offsets" / "1").is_file()
    assert query(url, "SELECT count(*) FROM shardq.tasks WHERE queue = 'stream'") == [(1500,)]

    land(source, "c.json", range(1500, 1700))
    restarted = run_driver(tmp_path, url, kill_at=None, on_complete=on_complete)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    # Spark ran batch 1 again (the same files): the ledger held it, nothing was inserted.
    assert "batch 1: staged 500 tasks 0 callback None" in restarted.stdout
    assert "batch 2: staged 200 tasks 200" in restarted.stdout
    assert "batch 0:" not in restarted.stdout
    payloads = [p for (p,) in query(url, "SELECT payload FROM shardq.tasks "
                                         "WHERE queue = 'stream'")]
    assert sorted(p["n"] for p in payloads) == list(range(1700))  # each row once
    assert all(p["text"] == f"row {p['n']}" for p in payloads)
    # The ledger keeps only the last batch's id.
    assert query(url, "SELECT count(*) FROM shardq.spark_ledger") == [(1,)]
    if on_complete:
        callbacks_count_their_batch(url)
    else:
        assert query(url, "SELECT count(*) FROM shardq.flows") == [(0,)]


def callbacks_count_their_batch(url: str) -> None:
    """One flow per micro-batch, named after it; once every task is done, each callback
    is released with its batch's counts and its batch id."""
    stream = "spark stream [0-9a-f-]{36} batch "
    flows = query(url, "SELECT name, nodes FROM shardq.flows ORDER BY name")
    assert [(re.sub(stream, "", name), nodes) for name, nodes in flows] == [
        ("0", 1001), ("1", 501), ("2", 201)]
    with shardq.Client(url) as client:
        while tasks := claim_all(client, "stream", most=1000):
            client.ack_many(tasks)
        resolve(client.statements)
        released = claim_all(client, "stream_done")
    got = sorted((t.payload["args"][1], t.payload["args"][0]["succeeded"]) for t in released)
    assert got == [(0, 1000), (1, 500), (2, 200)]


FAIL_AT = 3_000


def test_an_executor_task_failing_mid_batch(spark: Any, tmp_path: Path,
                                            dbs: Databases) -> None:
    """The write of the batch's one partition fails after 3,000 of its rows were
    committed to the staging table (batches of 500 committed alone); Spark tries the
    task again (spark.task.maxFailures = 2), and the merge counts each row once."""
    url = dbs.create()
    source = tmp_path / "in"
    source.mkdir()
    land(source, "a.json", range(5000))
    marker = tmp_path / "failed-once"

    def fail_once(n: int) -> str:  # runs in Spark's Python worker
        if n == FAIL_AT and not marker.exists():
            marker.touch()
            raise RuntimeError("injected failure of the first attempt")
        return json.dumps({"n": n})

    payload = F.udf(fail_once, "string", useArrow=False)
    rows = spark.readStream.schema("n long, text string").json(str(source))
    results: list[tuple[int, WriteResult]] = []
    stream = write_stream_tasks(
        rows.select("n", payload(F.col("n")).alias("json")), dsn=url, queue="retried",
        payload="json", checkpoint_location=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True}, batch_size=500,
        jdbc_options={"isolationLevel": "NONE"},
        on_batch=lambda batch_id, result: results.append((batch_id, result)))
    stream.awaitTermination(120)
    assert stream.exception() is None
    assert marker.exists()
    [(batch_id, result)] = results
    assert batch_id == 0
    assert result.staged is not None
    assert result.staged >= 5000 + FAIL_AT - 500  # the retry wrote its rows again
    assert (result.tasks, result.fresh) == (5000, 5000)
    counts = query(url, "SELECT count(*), count(DISTINCT payload) FROM shardq.tasks")
    assert counts == [(5000, 5000)]


def test_refusals(spark: Any, dbs: Databases) -> None:
    url = dbs.create()
    with pytest.raises(ConfigError, match="streaming DataFrame"):
        write_stream_tasks(spark.range(3), dsn=url, queue="q", payload=["id"],
                           checkpoint_location="/tmp/x")


def test_the_streaming_example(dbs: Databases) -> None:
    url = dbs.create()
    env = quick_jvm({**os.environ, "PYTHONPATH": str(ROOT), "SHARDQ_JDBC_JAR": str(JAR)})
    done = subprocess.run(
        [sys.executable, "-m", "examples.spark_streaming", "--dsn", url, "--files", "2",
         "--per-file", "50"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "96 orders done" in done.stdout  # orders 0..99; 0, 25, 50 and 75 are refused
    assert "|refused: negative amount -1|4    |" in done.stdout
    assert "4 dead letters" in done.stdout
    assert query(url, "SELECT count(*) FROM shardq.tasks WHERE status = 'dead'") == [(4,)]


def test_the_stream_merge_is_one_statement_over_insert_rows() -> None:
    pglast = pytest.importorskip("pglast", reason="pglast (PostgreSQL's parser) is not installed")
    text = merge_query(new_stage_name(), idempotent=True, stream=True).as_string(None)
    assert "INSERT INTO shardq.spark_ledger (id) VALUES (%(batch)s::uuid)" in text
    assert "INSERT INTO shardq.tasks AS t" in text
    assert "EXISTS (SELECT 1 FROM fresh)" in text
    assert len(pglast.parse_sql(text.replace("%(now)s", "NULL").replace("%(batch)s", "NULL"))) == 1


def test_natural_ids_skip_rows_seen_in_earlier_batches(spark: Any, tmp_path: Path,
                                                       dbs: Databases) -> None:
    url = dbs.create()
    source = tmp_path / "in"
    source.mkdir()
    land(source, "a.json", range(0, 300))
    land(source, "b.json", range(200, 500))  # rows 200..299 come again
    rows = (spark.readStream.schema("n long, text string").option("maxFilesPerTrigger", 1)
            .json(str(source)))
    results: list[tuple[int, WriteResult]] = []
    stream = write_stream_tasks(
        rows, dsn=url, queue="natural", payload=["n", "text"], id_columns=["n"],
        checkpoint_location=str(tmp_path / "checkpoint"), trigger={"availableNow": True},
        on_batch=lambda batch_id, result: results.append((batch_id, result)))
    stream.awaitTermination(120)
    assert stream.exception() is None
    assert [(b, r.staged, r.tasks) for b, r in results] == [(0, 300, 300), (1, 300, 200)]
    payloads = [p for (p,) in query(url, "SELECT payload FROM shardq.tasks")]
    assert sorted(p["n"] for p in payloads) == list(range(500))
    assert query(url, "SELECT count(*) FROM shardq.spark_ledger") == [(500,)]
