"""Many producers and workers on a small key space, with workers dying mid-task.

Every handler run is logged (key, payload sequence numbers, start, end, whether it
finished).  From that log: no two runs of a key overlap, and every enqueue was run
or coalesced into a run that started after the enqueue began.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from uuid import UUID

import shardq

KEYS = 50
ENQUEUES = 20_000
PRODUCERS = 4
WORKERS = 16
KILL_RATE = 0.01  # a worker "dies": it drops its batch without acking anything


@dataclass
class Run:
    id: UUID
    key: str
    seq: int
    start: float
    end: float
    finished: bool


def test_exclusive_and_nothing_lost(dsn: str, client: shardq.Client) -> None:
    # seq -> (key, when the enqueue began, the id of the task it became or joined)
    enqueued: dict[int, tuple[str, float, UUID]] = {}
    runs: list[Run] = []
    abandoned: set[UUID] = set()  # claimed by a worker that died before starting them
    lock = threading.Lock()
    producing = threading.Event()
    producing.set()
    errors: list[BaseException] = []
    seq_counter = iter(range(ENQUEUES))

    def produce(c: shardq.Client) -> None:
        rng = random.Random()
        try:
            for seq in seq_counter:
                key = f"k{rng.randrange(KEYS)}"
                began = time.monotonic()
                task_id = c.enqueue("stress", {"seq": seq}, key=key)
                with lock:
                    enqueued[seq] = (key, began, task_id)
        except BaseException as exc:
            errors.append(exc)

    def drained(c: shardq.Client) -> bool:
        stats = c.stats("stress")
        return stats["available"] + stats["scheduled"] + stats["locked"] == 0

    def work(c: shardq.Client) -> None:
        rng = random.Random()
        bucket = rng.randrange(c.bucket_count)
        try:
            while True:
                bucket = (bucket + 1) % c.bucket_count  # one bucket per claim, round-robin
                tasks = c.claim_bucket("stress", bucket, limit=5, lease_s=1.0)
                if not tasks:
                    if bucket == 0 and not producing.is_set() and drained(c):
                        return
                    time.sleep(0.002)
                    continue
                for index, task in enumerate(tasks):
                    start = time.monotonic()
                    if rng.random() < KILL_RATE:
                        with lock:
                            runs.append(Run(task.id, task.key or "", task.payload["seq"], start,
                                            time.monotonic(), False))
                            abandoned.update(t.id for t in tasks[index + 1:])
                        break  # dies: the rest of the batch is never started or acked
                    time.sleep(rng.random() * 0.002)
                    end = time.monotonic()
                    c.ack(task)
                    with lock:
                        runs.append(Run(task.id, task.key or "", task.payload["seq"], start, end,
                                        True))
        except BaseException as exc:
            errors.append(exc)

    with shardq.Client(dsn, pool_max_size=WORKERS + PRODUCERS + 2, backoff_base_s=0.02,
                       backoff_cap_s=0.2, max_attempts=50) as shared:
        janitor = shardq.Janitor(shared, interval_s=0.1)
        janitor.start()
        producers = [threading.Thread(target=produce, args=(shared,)) for _ in range(PRODUCERS)]
        workers = [threading.Thread(target=work, args=(shared,)) for _ in range(WORKERS)]
        for t in producers + workers:
            t.start()
        for t in producers:
            t.join()
        producing.clear()
        for t in workers:
            t.join(timeout=300)
        janitor.stop()
    assert errors == []
    assert client.stats("stress") == {"available": 0, "scheduled": 0, "locked": 0, "dead": 0,
                                      "oldest_eligible_age_s": None}

    by_key: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_key[run.key].append(run)
    # 1. Exclusive: the runs of a key never overlap (a dropped run ends when it died).
    for key_runs in by_key.values():
        key_runs.sort(key=lambda r: r.start)
        for before, after in itertools.pairwise(key_runs):
            assert before.end <= after.start, (before, after)
    # 2. Nothing lost: every enqueue was followed by a finished run, started after the
    #    enqueue began, of the task it became or was coalesced into.  A task whose run
    #    died may have merged into its key's follow-up (which then carries the newest
    #    payload), so for those any later finished run of the key counts.
    died = {r.id for r in runs if not r.finished} | abandoned
    finished: dict[UUID, float] = {}
    for r in runs:
        if r.finished:
            finished[r.id] = max(finished.get(r.id, 0.0), r.start)
    last_start = {k: max(r.start for r in rs if r.finished) for k, rs in by_key.items()}
    for seq, (key, began, task_id) in enqueued.items():
        if task_id in died:
            assert last_start[key] >= began, f"enqueue {seq} of {key} was lost"
        else:
            assert finished.get(task_id, -1.0) >= began, f"enqueue {seq} of {key} was lost"
    assert sum(not r.finished for r in runs) > 0  # workers really died along the way
    coalesced = ENQUEUES - sum(r.finished for r in runs)
    assert coalesced > 0  # the small key space made enqueues coalesce


