"""The hot path's two statements with and without the history, interleaved in one
process on one database: the claim (which now writes the worker's id) and the ack
(which now returns three more columns and records the attempts of tasks claimed
before: none here, every task succeeds at once).

The base statements are the files of the base revision (``git show REV:sql/...``)
composed with this tree's unchanged fragments, so the two differ only by the history.
Each round claims a batch of ``CLAIM`` tasks and acks it with one variant, then with
the other, alternating which goes first; reported are the median milliseconds of each
statement per variant.  Used by :mod:`bench.history`.
"""

from __future__ import annotations

import io
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench import harness
from shardq.core import migrate, sqlfiles

ROOT = Path(__file__).resolve().parents[2]
CLAIM = 100
QUEUE = "bench"


def _fragment(name: str) -> sql.Composed:
    return sqlfiles.query(name, "postgresql", "bucket", CLAIM, fragment=True)


def _base_text(rev: str, name: str) -> str:
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:sql/{name}.sql"],
                          check=True, capture_output=True, text=True).stdout
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def statements(rev: str) -> dict[str, dict[str, sql.Composed]]:
    """The claim and the ack, as shipped (``this``) and as at ``rev`` (``base``)."""
    claim = sqlfiles.text("claim", "postgresql")
    parts = {"claim_where": _fragment("claim_where"), "limit": sql.Literal(CLAIM),
             "claim_returning": _fragment("claim_returning")}
    return {
        "this": {"claim": sqlfiles.query("claim", "postgresql", "bucket", CLAIM),
                 "ack": sqlfiles.query("ack_many", "postgresql", "bucket")},
        "base": {"claim": sql.SQL(claim).format(
                     claim_set=sql.SQL(_base_text(rev, "claim_set")), **parts),
                 "ack": sql.SQL(_base_text(rev, "ack_many")).format(
                     locate=_fragment("locate"), throughput_add=_fragment("throughput_add"))},
    }


def measure(dbs: harness.Databases, rev: str, rounds: int) -> dict[str, dict[str, float]]:
    """Median ms of each statement per variant over ``rounds`` interleaved rounds."""
    url = dbs.create()
    migrate.upgrade(url, output=io.StringIO())
    harness.fill_backlog(url, rounds * 2 * CLAIM + CLAIM, QUEUE)
    variants = statements(rev)
    times: dict[str, dict[str, list[float]]] = {v: {"claim": [], "ack": []} for v in variants}
    worker = uuid.uuid4()
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        conn.execute("INSERT INTO shardq.workers VALUES (%s, 'bench', 'localhost', 1, "
                     "'{bench}', now(), now())", (worker,))
        bucket = 0
        for r in range(rounds):
            for name in (["this", "base"] if r % 2 == 0 else ["base", "this"]):
                params: dict[str, Any] = {
                    "bucket": bucket, "queue": QUEUE, "now": None, "lease_s": 30.0,
                    "token": uuid.uuid4(), "worker_id": worker,
                    "generation": 0}  # the migrations' layout (this tree's claims check it)
                while True:
                    began = time.perf_counter()
                    rows = conn.execute(variants[name]["claim"], params).fetchall()
                    took = time.perf_counter() - began
                    if rows:
                        break
                    bucket = (bucket + 1) % 16
                    params["bucket"] = bucket
                times[name]["claim"].append(took * 1000)
                located = {"ids": [row[0] for row in rows],
                           "tokens": [params["token"]] * len(rows)}
                began = time.perf_counter()
                conn.execute(variants[name]["ack"], {**located, "now": None,
                                                     "attempts_kept": 20})
                times[name]["ack"].append((time.perf_counter() - began) * 1000)
    return {name: {k: harness.median(v) for k, v in by.items()} for name, by in times.items()}

