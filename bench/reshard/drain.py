"""Goal 1: a backlog of 16 buckets drained by ``shardq consume`` while ``reshard 16 → 64``
runs, beside the same backlog drained with no reshard (a second fresh database).

Each arm fills its database (the suite's :func:`bench.suite.backlog.fill`), starts the
suite's shardq worker (``shardq consume``, batch 100, 2 claimers, 4 handler threads per
process) with the queue paused, and times the drain from the queue's resume.  The tasks
done so far are read every 100 ms from ``shardq.throughput`` (each ack counts its tasks
there).  The reshard begins ``after_s`` into its arm's drain; the arm without one is
measured over the same seconds of its own drain.  The arms swap order from one
repetition to the next.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psycopg

import shardq
from bench import harness
from bench.reshard import common
from bench.suite import backlog, sys_shardq
from bench.suite.settings import SHARDQ

QUEUE = harness.QUEUE
DONE_SQL = "SELECT coalesce(sum(completed), 0) FROM shardq.throughput WHERE queue = %s"
SAMPLE_S = 0.1
GOAL = 0.8


class Progress:
    """Tasks acked since :meth:`start`, sampled every 100 ms in a thread until all are."""

    def __init__(self, url: str, tasks: int) -> None:
        self.url, self.tasks = url, tasks
        self.series: list[tuple[float, int]] = [(0.0, 0)]
        self.began = 0.0
        self.finished, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="progress")

    def start(self) -> None:
        """Start the clock and the sampling."""
        self.began = time.perf_counter()
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(SAMPLE_S):
                done = int(harness.scalar(conn, DONE_SQL, (QUEUE,)))
                self.series.append((time.perf_counter() - self.began, done))
                if done >= self.tasks:
                    self.finished.set()
                    return


@dataclass
class Drain:
    """One arm: its tasks done over time, and the reshard's window in its drain."""

    resharding: bool
    tasks: int
    load: float
    series: list[tuple[float, int]]
    timeline: common.Timeline | None = None
    window: tuple[float, float] = (0.0, 0.0)

    def done_at(self, t: float) -> float:
        """Tasks done ``t`` seconds into the drain (linear between samples)."""
        for (t0, d0), (t1, d1) in zip(self.series, self.series[1:], strict=False):
            if t0 <= t <= t1:
                return d0 + (d1 - d0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)
        return float(self.series[-1][1])

    def rate(self, lo: float, hi: float) -> float:
        """Tasks per second from ``lo`` to ``hi`` seconds into the drain."""
        return (self.done_at(hi) - self.done_at(lo)) / (hi - lo) if hi > lo else 0.0

    def stall(self, lo: float, hi: float) -> float:
        """The longest time between ``lo`` and ``hi`` in which no task was acked (to the
        100 ms of the samples)."""
        longest, flat_since, last = 0.0, 0.0, -1
        for t, done in self.series:
            if done != last:
                flat_since, last = t, done
            elif lo <= t <= hi:
                longest = max(longest, t - max(flat_since, lo))
        return longest

    @property
    def elapsed(self) -> float:
        """Seconds until every task was done."""
        return next((t for t, done in self.series if done >= self.tasks), self.series[-1][0])


def arm(admin: str, tasks: int, resharding: bool, after_s: float, processes: int) -> Drain:
    """Drain ``tasks`` of a fresh 16-bucket database, resharding it to 64 ``after_s`` in."""
    with harness.Databases(admin, "sq_reshard") as dbs:
        url = dbs.migrated(common.FROM)
        backlog.top_up(url, tasks)
        drain = Drain(resharding, tasks, common.load_1m(), [])
        spec = {**SHARDQ.consume, "processes": processes}
        with shardq.Client(url, pool_max_size=2) as client:
            client.pause(QUEUE, create=True)
            with sys_shardq.consuming(url, spec):
                progress = Progress(url, tasks)
                client.resume(QUEUE)
                progress.start()
                if resharding:
                    time.sleep(after_s)
                    drain.timeline = common.Timeline(url)
                    start = drain.timeline.began - progress.began
                    client.reshard(common.TO, on_step=drain.timeline)
                    drain.window = (start, time.perf_counter() - progress.began)
                    drain.timeline.close()
                finished = progress.finished.wait(120 + tasks / 100)
                progress.stop()
        if not finished:
            raise harness.RunnerError(f"the drain never ended: {progress.series[-1][1]:,} "
                                      f"of {tasks:,} tasks done")
    drain.series = progress.series
    return drain


def measure(admin: str, tasks: int, reps: int, after_s: float, processes: int
            ) -> list[tuple[Drain, Drain]]:
    """``reps`` pairs (with the reshard, without), the order swapped every repetition."""
    pairs = []
    for rep in range(reps):
        runs: dict[bool, Drain] = {}
        for resharding in (True, False) if rep % 2 == 0 else (False, True):
            runs[resharding] = arm(admin, tasks, resharding, after_s, processes)
            d = runs[resharding]
            harness.log(f"drain rep {rep + 1} {'with' if resharding else 'without'} a "
                        f"reshard: {tasks / d.elapsed:,.0f} tasks/s over {d.elapsed:.1f} s")
        pairs.append((runs[True], runs[False]))
    return pairs


def section(pairs: list[tuple[Drain, Drain]], processes: int
            ) -> tuple[list[str], list[list[object]]]:
    """The report's section: each pair's rates in the reshard's window and overall."""
    rows, ratios, dry = [], [], False
    for rep, (on, off) in enumerate(pairs):
        lo, end = on.window
        hi = min(end, on.elapsed, off.elapsed)  # while both arms still had tasks
        cut = hi < end - SAMPLE_S
        dry = dry or cut
        ratio = on.rate(lo, hi) / off.rate(lo, hi) if off.rate(lo, hi) else float("nan")
        ratios.append(ratio)
        rows.append([rep + 1, "with first" if rep % 2 == 0 else "without first",
                     f"{on.load:.2f} / {off.load:.2f}",
                     f"{on.rate(0, lo) / off.rate(0, lo):.2f}x" if off.rate(0, lo) else "n/a",
                     f"{lo:.1f} to {end:.1f}" + (f" (cut at {hi:.1f})" if cut else ""),
                     on.rate(lo, hi), off.rate(lo, hi), f"{ratio:.2f}x",
                     f"{on.stall(lo, hi):.1f} / {off.stall(lo, hi):.1f}",
                     on.tasks / on.elapsed, off.tasks / off.elapsed,
                     f"{off.elapsed / on.elapsed:.2f}x"])
    ratio = harness.median(ratios)
    goals: list[list[object]] = [[
        "1. drain during a reshard", "tasks/s in the reshard's window, with ÷ without "
        "(median over repetitions)", f"{ratio:.2f}x", f"≥ {GOAL}x",
        common.verdict(ratio, GOAL, True)]]
    n = pairs[0][0].tasks
    lines = [f"## 1. Drain while `reshard {common.FROM} → {common.TO}` runs", "",
             f"{n:,} tasks in {common.FROM} buckets, drained by `shardq consume --processes "
             f"{processes}` (batch 100, 2 claimers, 4 handler threads), once with a reshard "
             "begun a while into the drain and once without it (a second fresh database); "
             "tasks done read every 100 ms from `shardq.throughput`. The window is the "
             "reshard's, in seconds from the queue's resume; the arm without a reshard is "
             "measured over the same seconds of its own drain. A stall is the longest time "
             "in the window with no task acked.", "",
             harness.markdown_table(
                 ["rep", "order", "load at start (with / without)",
                  "ratio before the window", "window s", "with: tasks/s in window",
                  "without: tasks/s, same window", "ratio",
                  "longest stall s (with / without)", "with: whole drain tasks/s",
                  "without: whole drain tasks/s", "whole-drain ratio"], rows), "",
             common.goal_table(goals), ""]
    if dry:
        lines += ["Note: a drain ended before the reshard did; its window was cut where "
                  "the first arm ran out of tasks. Use more --drain-tasks.", ""]
    last = pairs[-1][0]
    assert last.timeline is not None
    left = n - last.done_at(last.window[0])
    return [*lines, *last.timeline.lines(f"The reshard of the last repetition ({left:,.0f} "
                                         "tasks left at its start, workers draining)")], goals
