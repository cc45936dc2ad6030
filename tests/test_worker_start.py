"""A worker's start: the connections its parts use are open before its first claim."""

from __future__ import annotations

from uuid import UUID

import shardq
from shardq.core.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.helpers import query, wait_for

BACKENDS = ("SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()")


def test_a_new_worker_opens_a_connection_for_each_part_at_once(db: str) -> None:
    app = shardq.App(db)
    app.handler("started")(lambda payload: None)
    worker = Worker(app, ClientConfig(dsn=db),
                    WorkerConfig(claimers=3, janitors=1, listen=False))
    try:
        # Three claimers, the completer, the lease keeper, the janitor, its vacuum step
        # and the flows' resolver: eight connections, asked for together before anything
        # runs.  Grown on demand the pool would hold the one it opened with until the
        # parts start.
        parts = 8
        assert worker.client.db.pool.get_stats()["pool_min"] == parts
        wait_for(lambda: query(db, BACKENDS)[0][0] == parts, timeout=30,
                 what=f"{parts} connections to be open")
        worker.start()
        task = app.client.enqueue("started", {})
        gone = "SELECT 1 FROM shardq.tasks WHERE id = %s"
        wait_for(lambda: not query(db, gone, (UUID(int=task.int),)), what="the task to be done")
    finally:
        worker.stop(grace_s=5)
    # A backend outlives its closed socket for a moment: wait for the server to see it.
    wait_for(lambda: query(db, BACKENDS)[0][0] == 0, timeout=10,
             what="every connection of the stopped worker to end")
