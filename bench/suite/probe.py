"""What every system's runner shares: the handler probe (counts, latencies, CPU, RSS)
and the producers' pacing (a fixed rate, or a queue held at a depth).

A consumer registers a no-op handler that calls :meth:`Probe.hit`; the probe
records when each task started (and, when the payload carries its enqueue time
``t``, the pickup latency), and samples the process's RSS while it runs.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psutil
import psycopg

QUEUE = "bench"  # shardq queue / PGQueuer entrypoint / Procrastinate task name suffix
HOLD_TICK_S = 0.05  # how often a depth-holding producer counts the queue and tops it up
HOLD_BATCH = 500  # jobs per enqueue call of a depth-holding producer


class Probe:
    """Counts handled tasks until ``target``; records latencies, CPU time and peak RSS."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.latencies_ms: list[float] = []
        self.done = threading.Event()
        self.first = self.last = 0.0
        self.began_epoch = self.first_epoch = self.last_epoch = 0.0  # time.time() of each
        self._lock = threading.Lock()
        self._proc = psutil.Process()
        self._cpu0 = 0.0
        self.began = 0.0
        self.peak_rss = 0
        self.elsewhere_cpu_s = 0.0  # CPU of consumer processes other than this one
        self.cpu_at_target = 0.0  # this process's CPU seconds since it began, at the target
        self._sampling = threading.Event()

    def start(self) -> None:
        """Start the clock (the consumer is about to start) and the RSS sampler."""
        times = self._proc.cpu_times()
        self._cpu0 = times.user + times.system
        self.began = time.perf_counter()
        self.began_epoch = time.time()
        threading.Thread(target=self._sample, daemon=True, name="probe-rss").start()

    def _sample(self) -> None:
        while not self._sampling.is_set():
            self.peak_rss = max(self.peak_rss, self._proc.memory_info().rss)
            self._sampling.wait(0.1)

    def hit(self, payload: Any = None) -> None:
        """One task started: count it, and note its pickup latency if it carries ``t``."""
        now = time.perf_counter()
        wall = time.time()
        with self._lock:
            self.count += 1
            if self.count == 1:
                self.first, self.first_epoch = now, wall
            self.last, self.last_epoch = now, wall
            if isinstance(payload, dict) and "t" in payload:
                self.latencies_ms.append((wall - float(payload["t"])) * 1000.0)
            if self.count >= self.target and not self.done.is_set():
                times = self._proc.cpu_times()  # before the consumer stops, and exits
                self.cpu_at_target = times.user + times.system
                self.done.set()

    def handled_elsewhere(self, count: int, cpu_s: float, rss: int) -> None:
        """Tasks that consumer processes other than this one handled (counted as of now),
        with their CPU time and memory."""
        with self._lock:
            self.count, self.last = count, time.perf_counter()
            self.elsewhere_cpu_s, self.peak_rss = cpu_s, max(self.peak_rss, rss)
            if self.count >= self.target:
                self.done.set()

    def result(self) -> dict[str, Any]:
        """The run's numbers as a JSON-able dict (call once the consumer stopped)."""
        self._sampling.set()
        times = self._proc.cpu_times()
        cpu_now = times.user + times.system
        self.peak_rss = max(self.peak_rss, self._proc.memory_info().rss)
        return {
            "handled": self.count,
            "elapsed_s": (self.last - self.began) if self.count else 0.0,
            "cpu_s": cpu_now - self._cpu0 + self.elsewhere_cpu_s,
            "cpu_total_at_target_s": self.cpu_at_target or cpu_now,
            "peak_rss": self.peak_rss,
            "latencies_ms": self.latencies_ms,
            "ready_epoch": self.began_epoch, "first_epoch": self.first_epoch,
            "last_epoch": self.last_epoch,
        }


def paced(rate: float, seconds: float) -> list[float]:
    """The perf_counter offsets at which a producer at ``rate``/s for ``seconds`` sends."""
    count = max(1, int(rate * seconds))
    return [i / rate for i in range(count)]


def send_paced(rate: float, seconds: float, send: Callable[[], object]) -> dict[str, Any]:
    """Call ``send`` at ``rate`` per second for ``seconds``; returns what was sent and when."""
    offsets = paced(rate, seconds)
    began = time.perf_counter()
    for offset in offsets:
        pause = began + offset - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        send()
    return {"sent": len(offsets), "seconds": time.perf_counter() - began}


async def send_paced_async(rate: float, seconds: float,
                           send: Callable[[], Awaitable[object]]) -> dict[str, Any]:
    """:func:`send_paced` for async producers."""
    offsets = paced(rate, seconds)
    began = time.perf_counter()
    for offset in offsets:
        pause = began + offset - time.perf_counter()
        if pause > 0:
            await asyncio.sleep(pause)
        await send()
    return {"sent": len(offsets), "seconds": time.perf_counter() - began}


def hold_depth(url: str, depth: int, count_sql: str, enqueue: Callable[[int, int], object],
               ready: Callable[[], None]) -> dict[str, Any]:
    """Keep ``depth`` jobs waiting until SIGTERM; what the consumer did meanwhile.

    Every :data:`HOLD_TICK_S` the queue is counted (``count_sql``, with the queue name
    as its parameter: waiting and running jobs, the ones not finished) and topped up by
    ``enqueue(first, n)`` calls of at most :data:`HOLD_BATCH` jobs (``first`` numbers the
    batch's first job).  The queue is filled before ``ready()``.  Jobs finished by a
    moment are those enqueued less those still counted; the samples are
    ``(time.time(), finished, counted)``.
    """
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    samples: list[tuple[float, int, int]] = []
    enqueued = 0
    with psycopg.connect(url, autocommit=True) as conn:
        def count() -> int:
            row = conn.execute(count_sql, (QUEUE,)).fetchone()
            return int(row[0]) if row else 0

        def top_up(present: int) -> None:
            nonlocal enqueued
            while present < depth:
                n = min(HOLD_BATCH, depth - present)
                enqueue(enqueued, n)
                enqueued, present = enqueued + n, present + n

        top_up(count())
        ready()
        while not stopping:
            time.sleep(HOLD_TICK_S)
            present = count()
            samples.append((time.time(), enqueued - present, present))
            top_up(present)
    return {"enqueued": enqueued, "samples": samples}
