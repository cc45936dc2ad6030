"""A reshard of a live queue: 16 → 64 → 8 buckets while two ``shardq consume`` processes
drain and a producer enqueues.  Every task runs, each id once, and no task is left in
any bucket; the workers follow each switch without a restart."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from uuid import UUID

import psycopg
import pytest

import shardq
from tests.apps import recorder
from tests.conftest import ROOT, Databases
from tests.daemons import Daemon
from tests.helpers import query, scalar, wait_for

pytestmark = pytest.mark.server


@pytest.fixture
def live(databases: Databases) -> Iterator[tuple[str, dict[str, str]]]:
    """A fresh schema of 16 buckets with recorder's table, the daemons' environment, and
    recorder.app enqueuing through a Client of it."""
    url = databases.create(bucket_count=16)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(recorder.SETUP)
    with shardq.Client(url) as client:
        recorder.app.use_client(client)
        yield url, {**os.environ, "SHARDQ_DSN": url, "PYTHONPATH": str(ROOT)}


class Producer(threading.Thread):
    """Enqueues batches of recorder tasks until stopped, keeping their ids."""

    def __init__(self) -> None:
        super().__init__(name="producer")
        self.ids: list[UUID] = []
        self.done = threading.Event()
        self.failures: list[BaseException] = []

    def run(self) -> None:
        n = 0
        try:
            while not self.done.is_set():
                self.ids.extend(recorder.record.enqueue_many([(n + i,) for i in range(20)]))
                n += 20
                time.sleep(0.02)
        except BaseException as exc:  # the test reports it
            self.failures.append(exc)


def test_a_live_queue_is_resharded_up_and_down_with_nothing_lost_or_run_twice(
        live: tuple[str, dict[str, str]]) -> None:
    url, env = live
    workers = [Daemon(env, "tests.apps.recorder:app", "--queue", "work", "--poll-max-ms",
                      "200", "--worker-name", f"w{i}") for i in range(2)]
    producer = Producer()
    try:
        wait_for(lambda: scalar(url, "SELECT count(*) FROM shardq.workers") == 2,
                 what="both workers to register")
        producer.start()
        steps: list[str] = []
        with shardq.Client(url) as client:
            for count in (64, 8):
                time.sleep(1)  # tasks flow before each reshard
                status = client.reshard(count, on_step=lambda s: steps.append(s.did))
                assert (status.bucket_count, status.phase) == (count, "done")
                # Both workers claim with the new layout: the switch waited for them.
                assert query(url, "SELECT DISTINCT generation FROM shardq.workers") == [
                    (status.generation,)]
            time.sleep(1)
        producer.done.set()
        producer.join()
        assert not producer.failures
        enqueued = set(producer.ids)
        assert len(enqueued) == len(producer.ids) > 200
        wait_for(lambda: scalar(url, "SELECT count(*) FROM runs") >= len(enqueued),
                 timeout=60, what="every task to run")
        ran = query(url, "SELECT task_id, count(*) FROM runs GROUP BY task_id")
        assert {r[0] for r in ran} == enqueued
        assert all(r[1] == 1 for r in ran)  # no failure, so none ran twice
        assert scalar(url, "SELECT count(*) FROM shardq.tasks") == 0  # none stranded
        assert "dropped the stored bucket column" in steps
        assert "dropped tasks_claim_64" in steps
    finally:
        producer.done.set()
        if producer.is_alive():
            producer.join()
        for worker in workers:
            if worker.proc.poll() is None:
                worker.signal()
        outputs = [worker.wait() for worker in workers]
    for code, out in outputs:
        assert code == 0, out
        assert "Traceback" not in out, out
        assert "ERROR" not in out, out
