"""What a failover test runs and counts: producers, ``shardq consume`` workers, the runs.

:class:`Producers` are threads that enqueue numbered tasks of
:mod:`tests.apps.failover` in small batches at a steady pace through their own
Client, each keeping the numbers of the batches whose ``enqueue_many`` returned (and
the failures: a call that raised may or may not have written its batch).
:class:`Runs` reads what the handlers logged outside the cluster and turns it into the
figures (runs per task, tasks run twice and why, when the rate came back).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import psycopg

import shardq
from tests.apps import failover

WORK = {"task": failover.work.name, "kwargs": {}}


@dataclass
class Enqueued:
    """One producer's record: batches that returned (their numbers, when) and failures."""

    numbers: set[int] = field(default_factory=set)
    returned_at: list[float] = field(default_factory=list)
    failures: list[tuple[float, str]] = field(default_factory=list)


class Producers:
    """``threads`` producers, each enqueuing ``batch`` tasks every ``every_s``."""

    def __init__(self, dsn: str, *, threads: int = 2, batch: int = 10,
                 every_s: float = 0.05) -> None:
        self.batch, self.every_s = batch, every_s
        self.clients = [shardq.Client(dsn, connect_timeout_s=2, statement_timeout_s=5)
                        for _ in range(threads)]
        self.records = [Enqueued() for _ in range(threads)]
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, args=(c, r), daemon=True)
                         for c, r in zip(self.clients, self.records, strict=True)]

    def start(self) -> Producers:
        """Start the producing threads."""
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        """Stop producing (once the batches in flight returned or failed); idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        for t in self._threads:
            t.join(60)
        for c in self.clients:
            c.close()

    def _produce(self, client: shardq.Client, record: Enqueued) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                numbers = [next(self._numbers) for _ in range(self.batch)]
            try:
                client.enqueue_many(failover.QUEUE, [{**WORK, "args": [n]} for n in numbers])
            except shardq.ShardqError as exc:
                record.failures.append((time.time(), f"{type(exc).__name__}: {exc}"[:200]))
            else:
                record.numbers.update(numbers)
                record.returned_at.append(time.time())
            due = max(due + self.every_s, time.monotonic())
            self._stop.wait(due - time.monotonic())

    @property
    def numbers(self) -> set[int]:
        """Every number whose enqueue returned."""
        return set().union(*(r.numbers for r in self.records))

    @property
    def returned_at(self) -> list[float]:
        return sorted(itertools.chain.from_iterable(r.returned_at for r in self.records))

    @property
    def failures(self) -> list[tuple[float, str]]:
        return sorted(itertools.chain.from_iterable(r.failures for r in self.records))


@dataclass(frozen=True)
class Run:
    """One logged run."""

    task_id: str
    queue: str
    n: int
    slot: str | None
    attempt: int
    pid: int
    at: float
    enqueued_at: float


class Runs:
    """The runs logged in ``log_dsn``'s ``failover_runs``."""

    def __init__(self, log_dsn: str) -> None:
        self.log_dsn = log_dsn

    def all(self, queue: str | None = None) -> list[Run]:
        with psycopg.connect(self.log_dsn) as conn:
            rows = conn.execute("SELECT task_id::text, queue, n, slot, attempt, pid, at, "
                                "enqueued_at FROM failover_runs WHERE queue = coalesce(%s, queue) "
                                "ORDER BY at", (queue,)).fetchall()
        return [Run(*row) for row in rows]

    def count(self, queue: str = failover.QUEUE) -> int:
        with psycopg.connect(self.log_dsn) as conn:
            row = conn.execute("SELECT count(*) FROM failover_runs WHERE queue = %s",
                               (queue,)).fetchone()
        return int(row[0]) if row else 0

    def clear(self) -> None:
        with psycopg.connect(self.log_dsn, autocommit=True) as conn:
            conn.execute("TRUNCATE failover_runs")


def twice(runs: list[Run]) -> dict[int, list[Run]]:
    """The tasks (by number) that ran more than once, with their runs."""
    by_n: dict[int, list[Run]] = defaultdict(list)
    for run in runs:
        by_n[run.n].append(run)
    return {n: rs for n, rs in by_n.items() if len(rs) > 1}


LEASE_RAN_OUT = "claimed again after its lease ran out (its ack was lost)"
WRITTEN_TWICE = "written again by an enqueue retried after it had run and been acked"
CLAIM_LOST = "claimed twice under one attempt number (a claim's commit was lost)"


def why_twice(runs: list[Run]) -> str:
    """Why one task ran twice, from its runs.  A row written again has a later
    ``enqueued_at`` (each attempt of an enqueue reads the server's clock); a task claimed
    again counts a later attempt; the same row claimed twice under one attempt number
    means the first claim's commit was lost (acknowledged, then not on the new primary)."""
    if len({r.enqueued_at for r in runs}) > 1:
        return WRITTEN_TWICE
    attempts = [r.attempt for r in runs]
    if len(set(attempts)) == len(attempts):
        return LEASE_RAN_OUT
    return CLAIM_LOST


def rate_back_s(runs: list[Run], fault_at: float, before_s: float = 5.0,
                share: float = 0.9) -> tuple[float, float]:
    """The steady rate (runs a second over the ``before_s`` before the fault), and the
    seconds from the fault to the end of the first whole second after it in which at
    least ``share`` of that rate ran again."""
    steady = sum(1 for r in runs if fault_at - before_s <= r.at < fault_at) / before_s
    per_second = Counter(int((r.at - fault_at) * 10) for r in runs if r.at >= fault_at)
    # Sliding one-second windows in tenths of a second.
    last = max(per_second, default=0)
    for start in range(last + 1):
        if sum(per_second[t] for t in range(start, start + 10)) >= share * steady:
            return steady, (start + 10) / 10
    return steady, float("inf")


def longest_gap_s(times: list[float], since: float, until: float) -> float:
    """The longest pause between successive ``times`` within [since, until]."""
    inside = [t for t in sorted(times) if since <= t <= until]
    edges = [since, *inside, until]
    return max(b - a for a, b in itertools.pairwise(edges))


def ticks(runs: list[Run]) -> dict[str, set[str]]:
    """The periodic slots that ran, each with the tasks that ran for it."""
    slots: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        if run.slot is not None:
            slots[run.slot].add(run.task_id)
    return slots


def summary(**figures: Any) -> str:
    """One line of figures for the test's output."""
    return " | ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in figures.items())
