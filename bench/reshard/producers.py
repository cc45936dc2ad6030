"""Goal 3: how long producers wait on a lock while a large table is resharded 16 → 64.

Producer threads, each with a Client of its own whose sessions carry the application
name ``reshard-producer-I``, enqueue without end (even threads one task per
``enqueue``, odd ones ``enqueue_many`` of 100), pausing 10 ms between calls, and time
each call.  A second after they start, the table (its rows filled server-side
beforehand) is resharded by a Client of its own (``reshard``); a second after the
reshard ends they stop.  Meanwhile a sampler reads every 10 ms the producers' sessions
that wait on a lock (``pg_stat_activity.wait_event_type = 'Lock'`` joined to their
ungranted ``pg_locks`` row): how long the statement has run (``clock_timestamp() -
query_start``, an upper bound of its wait), the lock, and the sessions blocking it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg

import shardq
from bench import harness
from bench.reshard import common
from bench.suite import backlog

QUEUE = harness.QUEUE
APP = "reshard-producer"
BATCH = 100
PAUSE_S = 0.01
SAMPLE_S = 0.01
AROUND_S = 1.0  # producers run this long before and after the reshard
GOAL_S = 1.0
RESHARD_APP = "reshard"
# The producers' sessions waiting on a lock: the statement's time so far, the lock, who
# blocks it, and whether the wait is behind the reshard (a lock of shardq.tasks or one of
# its indexes, or a blocker that is the reshard's session).  A lock of object 0 of
# pg_database is the one NOTIFY takes at commit, which producers queue on among themselves.
WAITING = """
SELECT a.pid, extract(epoch FROM clock_timestamp() - a.query_start)::float8, a.query_start,
       l.mode,
       CASE WHEN l.locktype = 'relation' THEN l.relation::regclass::text
            WHEN l.locktype = 'object' AND l.classid = 'pg_database'::regclass
                 AND l.objid = 0 THEN 'NOTIFY''s commit lock'
            ELSE l.locktype END,
       coalesce(b.blockers, '-'),
       coalesce(b.reshard, false) OR (l.locktype = 'relation' AND l.relation IN (
           SELECT 'shardq.tasks'::regclass UNION ALL
           SELECT i.indexrelid FROM pg_index AS i WHERE i.indrelid = 'shardq.tasks'::regclass))
FROM pg_stat_activity AS a
JOIN pg_locks AS l ON l.pid = a.pid AND NOT l.granted
LEFT JOIN LATERAL (
    SELECT string_agg(DISTINCT coalesce(nullif(o.application_name, ''), 'pid ' || o.pid)
                      || ': ' || left(regexp_replace(regexp_replace(o.query,
                          '^(\\s*--[^\\n]*\\n)*\\s*', ''), '\\s+', ' ', 'g'), 40), '; ')
               AS blockers,
           bool_or(o.application_name = %(reshard)s) AS reshard
    FROM pg_stat_activity AS o WHERE o.pid = ANY(pg_blocking_pids(a.pid))) AS b ON true
WHERE a.application_name LIKE %(producers)s AND a.wait_event_type = 'Lock'
"""
Wait = tuple[float, float, str, str, str, bool]  # seconds, first seen at, mode, on, by, reshard


class LockSampler:
    """The producers' lock waits, sampled every 10 ms in a thread: each wait (a session's
    statement) with the longest time seen, when it was first seen (seconds since
    ``began``), its lock, its blockers and whether it is behind the reshard."""

    def __init__(self, url: str, began: float) -> None:
        self.url, self.began = url, began
        self.samples = self.waiting_samples = 0
        self.waits: dict[tuple[int, Any], Wait] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="lock-sampler")

    def _run(self) -> None:
        params = {"reshard": RESHARD_APP, "producers": APP + "%"}
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(SAMPLE_S):
                rows = conn.execute(WAITING, params).fetchall()
                at = time.perf_counter() - self.began
                self.samples += 1
                self.waiting_samples += bool(rows)
                for pid, seconds, started, mode, on, by, reshard in rows:
                    seen = self.waits.get((pid, started))
                    self.waits[(pid, started)] = (
                        max(float(seconds), seen[0] if seen else 0.0), seen[1] if seen else at,
                        str(mode), str(on), str(by), bool(reshard or (seen and seen[5])))

    def __enter__(self) -> LockSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def longest(self, n: int, behind_reshard: bool | None = None,
                window: tuple[float, float] | None = None) -> list[Wait]:
        """The ``n`` longest waits seen (behind the reshard or not; first seen within
        ``window``)."""
        lo, hi = window or (0.0, float("inf"))
        return sorted((w for w in self.waits.values() if lo <= w[1] <= hi and (
            behind_reshard is None or w[5] == behind_reshard)), reverse=True)[:n]


class Producers:
    """``count`` producer threads; each call's kind, start (seconds since ``began``) and
    duration."""

    def __init__(self, url: str, count: int, began: float) -> None:
        self.url, self.count, self.began = url, count, began
        self.calls: list[tuple[str, float, float]] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                         for i in range(count)]

    def _run(self, index: int) -> None:
        kind = "enqueue" if index % 2 == 0 else f"enqueue_many({BATCH})"
        try:
            with shardq.Client(common.named(self.url, f"{APP}-{index}"),
                               pool_max_size=1) as client:
                client.enqueue(QUEUE, {"warm": True})
                while not self._stop.is_set():
                    began = time.perf_counter()
                    if index % 2 == 0:
                        client.enqueue(QUEUE, {"n": 1})
                    else:
                        client.enqueue_many(QUEUE, [{"n": i} for i in range(BATCH)])
                    ended = time.perf_counter()
                    self.calls.append((kind, began - self.began, ended - began))
                    self._stop.wait(PAUSE_S)
        except BaseException as exc:
            self.errors.append(exc)

    def __enter__(self) -> Producers:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        if self.errors:
            raise self.errors[0]

    def latencies(self, kind: str | None, lo: float, hi: float) -> list[float]:
        """Seconds of the calls (of ``kind``, else all) that ran between ``lo`` and ``hi``."""
        return [s for k, t, s in self.calls if kind in (None, k) and t < hi and t + s > lo]


@dataclass
class Result:
    """What one reshard under producers measured (times in seconds since one origin)."""

    rows: int
    load: float
    producers: Producers
    sampler: LockSampler
    timeline: common.Timeline
    window: tuple[float, float]


def measure(admin: str, rows: int, producers: int) -> Result:
    """Reshard a table of ``rows`` tasks while ``producers`` threads enqueue."""
    with harness.Databases(admin, "sq_reshard") as dbs:
        url = dbs.migrated(common.FROM)
        backlog.top_up(url, rows)
        load, origin = common.load_1m(), time.perf_counter()
        with LockSampler(url, origin) as sampler, Producers(url, producers, origin) as made:
            time.sleep(AROUND_S)
            timeline = common.Timeline(url)
            with shardq.Client(common.named(url, RESHARD_APP), pool_max_size=2) as client:
                client.reshard(common.TO, on_step=timeline)
            window = (timeline.began - origin, time.perf_counter() - origin)
            timeline.close()
            time.sleep(AROUND_S)
    harness.log(f"producers: reshard of {rows:,} rows in {timeline.seconds:.1f} s, "
                f"{len(made.calls):,} calls, {len(sampler.waits)} lock waits seen")
    return Result(rows, load, made, sampler, timeline, window)


def _ms(values: list[float], pct: float | None = None) -> float:
    if not values:
        return float("nan")
    return 1000 * (max(values) if pct is None else harness.percentile(values, pct))


def section(r: Result) -> tuple[list[str], list[list[object]]]:
    """The report's section: call latencies before and during the reshard, lock waits."""
    lo, hi = r.window
    calls = []
    for kind in sorted({c[0] for c in r.producers.calls}):
        before, during = r.producers.latencies(kind, 0, lo), r.producers.latencies(kind, lo, hi)
        calls.append([kind, len(before), _ms(before, 99), _ms(before), len(during),
                      _ms(during, 50), _ms(during, 99), _ms(during)])
    longest_call = max(r.producers.latencies(None, lo, hi), default=0.0)
    behind = r.sampler.longest(1, True)
    longest_wait = behind[0][0] if behind else 0.0
    kinds = [[label, len(r.sampler.longest(10**9, flag, (lo, hi))),
              1000 * max((w[0] for w in r.sampler.longest(1, flag, (lo, hi))), default=0.0),
              1000 * max((w[0] for w in r.sampler.longest(1, flag, (0, lo))), default=0.0)]
             for label, flag in (("behind the reshard", True), ("others", False))]
    waits = [[w * 1000, f"{at - lo:+.2f}", "yes" if reshard else "no", mode, on, by]
             for w, at, mode, on, by, reshard in r.sampler.longest(8)]
    goals: list[list[object]] = [
        ["3. producers' lock wait", "longest sampled lock wait of a producer behind the "
         "reshard", f"{longest_wait * 1000:,.0f} ms", f"≤ {GOAL_S:g} s",
         common.verdict(longest_wait, GOAL_S, False)],
        ["3. producers' lock wait", "longest enqueue call during the reshard",
         f"{longest_call * 1000:,.0f} ms", f"≤ {GOAL_S:g} s",
         common.verdict(longest_call, GOAL_S, False)]]
    return [
        f"## 3. Producers' lock waits while {r.rows:,} rows are resharded", "",
        f"{r.producers.count} producer threads (a Client each; even ones `enqueue`, odd "
        f"ones `enqueue_many` of {BATCH}; 10 ms between calls) from {AROUND_S:g} s before "
        f"the reshard to {AROUND_S:g} s after it; load {r.load:.2f} at the start. Their "
        "sessions' lock waits sampled every 10 ms from `pg_stat_activity` and `pg_locks` "
        f"({r.sampler.samples:,} samples, {r.sampler.waiting_samples:,} with a producer "
        "waiting). A wait is behind the reshard when its lock is on `shardq.tasks` or an "
        "index of it, or the reshard's session blocks it.", "",
        harness.markdown_table(
            ["call", "calls before", "p99 ms before", "max ms before", "calls during",
             "p50 ms during", "p99 ms during", "max ms during"], calls), "",
        harness.markdown_table(["lock waits", "seen during", "longest ms during",
                                "longest ms before"], kinds), "",
        "The longest lock waits seen (the statement's time so far when last sampled; "
        "first seen in seconds from the reshard's start):", "",
        harness.markdown_table(["ms", "first seen", "behind the reshard", "lock", "on",
                                "blocked by"], waits) if waits else "(none)", "",
        common.goal_table(goals), "",
        *r.timeline.lines(f"The reshard ({r.rows:,} rows, producers enqueuing)")], goals
