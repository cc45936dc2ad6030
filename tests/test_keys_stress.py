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
from collections.abc import Iterator
from dataclasses import dataclass, field
from uuid import UUID

import pytest

import shardq

pytestmark = pytest.mark.server

KEYS = 50
ENQUEUES = 6_000
PRODUCERS = 4
WORKERS = 16
KILL_RATE = 0.01  # a worker "dies": it drops its batch without acking anything


@dataclass
class Run:
    """One handler run: of which task, key and enqueue, when, and whether it finished."""

    id: UUID
    key: str
    seq: int
    start: float
    end: float
    finished: bool


@dataclass
class Log:
    """What producers and workers record, under ``lock``."""

    # seq -> (key, when the enqueue began, the id of the task it became or joined)
    enqueued: dict[int, tuple[str, float, UUID]] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    abandoned: set[UUID] = field(default_factory=set)  # claimed by a worker that died first
    errors: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    producing: threading.Event = field(default_factory=threading.Event)


def produce(c: shardq.Client, log: Log, seqs: Iterator[int]) -> None:
    """Enqueue the sequence numbers left in ``seqs``, each under a random key."""
    rng = random.Random()
    try:
        for seq in seqs:
            key = f"k{rng.randrange(KEYS)}"
            began = time.monotonic()
            task_id = c.enqueue("stress", {"seq": seq}, key=key)
            with log.lock:
                log.enqueued[seq] = (key, began, task_id)
    except BaseException as exc:
        log.errors.append(exc)


def drained(c: shardq.Client) -> bool:
    """Whether no task of the queue is left, in any state but dead."""
    stats = c.stats("stress")
    left: int = stats["available"] + stats["scheduled"] + stats["locked"]
    return left == 0


def run_batch(c: shardq.Client, log: Log, tasks: list[shardq.Task],
              rng: random.Random) -> None:
    """Run and ack a claimed batch, unless the worker "dies" on the way."""
    for index, task in enumerate(tasks):
        start = time.monotonic()
        if rng.random() < KILL_RATE:
            with log.lock:
                log.runs.append(Run(task.id, task.key or "", task.payload["seq"], start,
                                    time.monotonic(), False))
                log.abandoned.update(t.id for t in tasks[index + 1:])
            return  # dies: the rest of the batch is never started or acked
        time.sleep(rng.random() * 0.002)
        end = time.monotonic()
        c.ack(task)
        with log.lock:
            log.runs.append(Run(task.id, task.key or "", task.payload["seq"], start, end, True))


def work(c: shardq.Client, log: Log) -> None:
    """Claim one bucket at a time, round-robin, until production ended and all is done."""
    rng = random.Random()
    bucket = rng.randrange(c.bucket_count)
    try:
        while True:
            bucket = (bucket + 1) % c.bucket_count
            tasks = c.claim_bucket("stress", bucket, limit=5, lease_s=2.0)
            if tasks:
                run_batch(c, log, tasks, rng)
            elif bucket == 0 and not log.producing.is_set() and drained(c):
                return
            else:
                time.sleep(0.002)
    except BaseException as exc:
        log.errors.append(exc)


def assert_exclusive(by_key: dict[str, list[Run]]) -> None:
    """The runs of a key never overlap (a dropped run ends when it died)."""
    for key_runs in by_key.values():
        key_runs.sort(key=lambda r: r.start)
        for before, after in itertools.pairwise(key_runs):
            assert before.end <= after.start, (before, after)


def assert_nothing_lost(log: Log, by_key: dict[str, list[Run]]) -> None:
    """Every enqueue was followed by a finished run, started after the enqueue began, of
    the task it became or was coalesced into.  A task whose run died may have merged
    into its key's follow-up (which then carries the newest payload), so for those any
    later finished run of the key counts."""
    died = {r.id for r in log.runs if not r.finished} | log.abandoned
    finished: dict[UUID, float] = {}
    for r in log.runs:
        if r.finished:
            finished[r.id] = max(finished.get(r.id, 0.0), r.start)
    last_start = {k: max(r.start for r in rs if r.finished) for k, rs in by_key.items()}
    for seq, (key, began, task_id) in log.enqueued.items():
        if task_id in died:
            assert last_start[key] >= began, f"enqueue {seq} of {key} was lost"
        else:
            assert finished.get(task_id, -1.0) >= began, f"enqueue {seq} of {key} was lost"


@pytest.mark.slow
def test_exclusive_and_nothing_lost(dsn: str, client: shardq.Client) -> None:
    log = Log()
    log.producing.set()
    seqs = iter(range(ENQUEUES))
    with shardq.Client(dsn, pool_max_size=WORKERS + PRODUCERS + 2, backoff_base_s=0.02,
                       backoff_cap_s=0.2, max_attempts=50) as shared:
        janitor = shardq.Janitor(shared, interval_s=0.1)
        janitor.start()
        producers = [threading.Thread(target=produce, args=(shared, log, seqs))
                     for _ in range(PRODUCERS)]
        workers = [threading.Thread(target=work, args=(shared, log)) for _ in range(WORKERS)]
        for t in producers + workers:
            t.start()
        for t in producers:
            t.join()
        log.producing.clear()
        for t in workers:
            t.join(timeout=300)
        janitor.stop()
    assert log.errors == []
    stats = client.stats("stress")
    assert {k: stats[k] for k in ("available", "scheduled", "locked", "dead",
                                  "oldest_eligible_age_s")} == \
        {"available": 0, "scheduled": 0, "locked": 0, "dead": 0, "oldest_eligible_age_s": None}

    by_key: dict[str, list[Run]] = defaultdict(list)
    for run in log.runs:
        by_key[run.key].append(run)
    assert_exclusive(by_key)
    assert_nothing_lost(log, by_key)
    assert sum(not r.finished for r in log.runs) > 0  # workers really died along the way
    coalesced = ENQUEUES - sum(r.finished for r in log.runs)
    assert coalesced > 0  # the small key space made enqueues coalesce
