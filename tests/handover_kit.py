"""What the tests of the handover (an ack and its successors' claim in one transaction)
share: an observer of the transactions that claim and ack tasks, and a worker of
tests.apps.limited under a binding limit."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

import shardq
from tests.apps import limited
from tests.conftest import ROOT, Databases
from tests.daemons import Daemon

# An observer that owes nothing to shardq: a trigger logs, for each task, the
# transaction that claimed it and the one that deleted (acked) it.
OBSERVER = """
CREATE TABLE handover_log (task_id uuid NOT NULL, what text NOT NULL, xid xid8 NOT NULL);
CREATE FUNCTION handover_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO handover_log VALUES (OLD.id, 'acked', pg_current_xact_id());
    ELSIF NEW.status = 'locked' AND OLD.status <> 'locked' THEN
        INSERT INTO handover_log VALUES (NEW.id, 'claimed', pg_current_xact_id());
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER handover_log AFTER UPDATE OR DELETE ON shardq.tasks
    FOR EACH ROW EXECUTE FUNCTION handover_log();
"""


def observed(databases: Databases) -> str:
    """A fresh database of one bucket (one turn sees every waiting task), with the
    observer."""
    url = databases.create(bucket_count=1)
    with psycopg.connect(databases.direct(url), autocommit=True) as conn:
        conn.execute(OBSERVER)
    return url


def transaction(conn: psycopg.Connection[Any], task_id: Any, what: str) -> Any:
    """The transaction that ``what`` (claimed, acked) the task ``task_id`` last."""
    rows = conn.execute("SELECT xid::text FROM handover_log WHERE task_id = %s AND what = %s",
                        (task_id, what)).fetchall()
    return rows[-1][0] if rows else None


@contextmanager
def capped_worker(databases: Databases, url: str, tasks: int, seconds: float
                  ) -> Iterator[tuple[str, Daemon]]:
    """tests.apps.limited's ``capped`` queue on ``url`` under ``max_running=1``, with
    ``tasks`` runs of ``seconds`` enqueued, and one ``shardq consume`` of 8 handler slots
    on it (stopped at the end if still running); yields the database's direct URL and
    the daemon."""
    direct = databases.direct(url)
    with psycopg.connect(direct, autocommit=True) as conn:
        conn.execute(limited.SETUP)
    with shardq.Client(url) as c:
        c.set_limits("capped", max_running=1, create=True)
        limited.app.use_client(c)
        limited.capped.enqueue_many([(n, seconds) for n in range(tasks)])
    env = {**os.environ, "SHARDQ_DSN": url, "LIMITED_LOG_DSN": direct,
           "PYTHONPATH": str(ROOT)}
    daemon = Daemon(env, "tests.apps.limited:app", "--queue", "capped", "--concurrency", "8",
                    "--no-sample-stats")
    try:
        yield direct, daemon
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()
