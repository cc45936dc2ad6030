"""Chords measured with ``shardq consume`` worker processes, side by side with plain tasks.

1. Drain: a chord of 100,000 no-op members and a callback against 100,000 plain no-op
   tasks (one ``enqueue_many``), and against 100,000 that keep their result as a
   chord's members do (what that part costs), drained by the same workers (the suite's
   2-process drain), the arms in a rotating order within each repetition.
2. Fan-in latency: 200 chords of 20 no-op members, one every 50 ms, into 4 worker
   processes; for each chord, the time from its last member's ack to its callback's
   start.
3. Enqueue: writing a chord of 100,000 members (``enqueue_flow``) against
   ``enqueue_many`` of 100,000 tasks, each from its signatures or its calls built.

Every run has a fresh database; the worker processes are started and stopped as the
suite's ``processes`` scenario does (:mod:`bench.suite.sys_shardq`).  The suite runs
this as its ``chords`` section (:func:`run`, :func:`bench.chords.report.section`); alone
(``python -m bench.chords``) it writes ``bench/results/chords.md``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from typing import Any

import psycopg

import shardq
from bench import harness
from bench.chords import app
from bench.suite import sys_shardq
from bench.suite.settings import SHARDQ_2P, Settings
from shardq.ops import graphs

Record = dict[str, Any]
SCENARIO = "chords"
HANDLER = "bench.chords.app:app"
WORKER = SHARDQ_2P.consume  # the suite's drain: 2 processes, batch 100, 2 claimers, 4 slots
FAN_IN_WORKER = {**WORKER, "processes": 4}
KINDS = ("drain", "fanin", "enqueue")
ARMS = ("tasks", "chord")  # plain tasks first: every ratio is the chord's ÷ theirs
KEPT = "tasks keeping results"  # the drain's third arm: what keeping the results costs


@dataclass(frozen=True)
class Sizes:
    """How big each measurement is."""

    drain: int = 100_000  # members of the drained chord, and plain tasks
    chords: int = 200  # chords of the fan-in measurement
    members: int = 20  # members of each
    every_s: float = 0.05  # one chord enqueued every this many seconds
    fan_in_processes: int = 4
    enqueue: int = 100_000  # members of the enqueued chord, and plain tasks


QUICK = Sizes(drain=1_000, chords=10, members=5, every_s=0.05, fan_in_processes=2,
              enqueue=1_000)


def _enqueue_arm(url: str, arm: str, n: int) -> dict[str, float]:
    """Write ``n`` no-op tasks (``tasks``) or a chord of ``n`` no-op members (``chord``)
    into the empty database ``url``; the seconds it took, in all and to build the calls
    or the signatures."""
    with shardq.Client(url, pool_max_size=2) as client:
        app.app.use_client(client)  # the task function enqueues through this Client
        client.enqueue("warmup", {})  # connection and statement warm-up, untimed
        began = time.perf_counter()
        if arm != "chord":
            calls = [(i,) for i in range(n)]
            built = time.perf_counter()
            (app.kept if arm == KEPT else app.noop).enqueue_many(calls)
        else:
            canvas = shardq.chord([app.noop.s(i) for i in range(n)], app.gather.s())
            built = time.perf_counter()
            client.enqueue_flow(canvas)
        ended = time.perf_counter()
        out = {"seconds": ended - began, "build_s": built - began}
        if arm == "chord":  # the plan's Python part alone (layout, rows), for the notes
            again = time.perf_counter()
            graphs.enqueue(client.statements, canvas, None, keep_result_s=None, name=None)
            out["plan_s"] = time.perf_counter() - again
    return out


def enqueue(dbs: harness.Databases, sizes: Sizes, reps: int, records: list[Record]) -> None:
    """Measurement 3: the two arms' enqueue, alternating within each repetition."""
    for rep in range(reps):
        for arm in ARMS if rep % 2 == 0 else ARMS[::-1]:
            url = harness.prepare(dbs, "shardq")
            out = _enqueue_arm(url, arm, sizes.enqueue)
            records.append({"scenario": SCENARIO, "kind": "enqueue", "arm": arm, "rep": rep,
                            "tasks": sizes.enqueue, "rate": sizes.enqueue / out["seconds"],
                            **out})
            harness.log(f"chords enqueue rep {rep + 1} {arm}: {out['seconds']:.2f} s")
            dbs.close()


def _members_done(url: str) -> float:
    """When the last member of the database's one flow was acked (its result's
    ``finished_at``: the ack statement's start), as epoch seconds (nan: no flow)."""
    with psycopg.connect(url, autocommit=True) as conn:
        value = harness.scalar(conn, "SELECT extract(epoch FROM max(r.finished_at))::float8 "
                                     "FROM shardq.results AS r JOIN shardq.flows AS f "
                                     "ON f.id = r.flow_id WHERE r.id <> f.result_id")
    return float("nan") if value is None else float(value)


def drain(dbs: harness.Databases, sizes: Sizes, reps: int, records: list[Record]) -> None:
    """Measurement 1: the suite's timed ``shardq consume`` run (queue paused while the
    processes start, clock from its resume until the table is empty) on each arm's
    backlog, the arms in a rotating order within each repetition."""
    arms = [ARMS[0], KEPT, ARMS[1]]
    for rep in range(reps):
        k = rep % len(arms)
        for arm in arms[k:] + arms[:k]:
            url = harness.prepare(dbs, "shardq")
            _enqueue_arm(url, arm, sizes.drain)
            out = harness.call({"system": "shardq", "mode": "consume", "url": url,
                                "n": sizes.drain, "deadline_s": 120 + sizes.drain / 20,
                                "cli": True, **WORKER, "handler": HANDLER},
                               timeout=600 + sizes.drain / 10)
            record = {"scenario": SCENARIO, "kind": "drain", "arm": arm, "rep": rep,
                      "tasks": out["handled"], "elapsed_s": out["elapsed_s"],
                      "rate": out["handled"] / out["elapsed_s"] if out["elapsed_s"] else 0.0,
                      "cpu_ms_per_1k": out["cpu_s"] / max(1, out["handled"]) * 1e6}
            if arm == "chord":  # the callback's part: from the last member's ack to the end
                ended = out["ready_epoch"] + out["elapsed_s"]
                record["tail_s"] = ended - _members_done(url)
            records.append(record)
            harness.log(f"chords drain rep {rep + 1} {arm}: {record['rate']:,.0f} tasks/s")
            dbs.close()


def _callbacks(url: str) -> dict[int, tuple[float, float, int]]:
    """The callbacks recorded so far: chord number -> (start, claim, results taken)."""
    found: dict[int, tuple[float, float, int]] = {}
    folder = app.records_dir(url)
    for path in folder.glob("*.tsv") if folder.exists() else ():
        for line in path.read_text().splitlines():
            chord, started, claimed, taken = line.split("\t")
            found[int(chord)] = (float(started), float(claimed), int(taken))
    return found


def fan_in(dbs: harness.Databases, sizes: Sizes, records: list[Record]) -> None:
    """Measurement 2: chords enqueued at a steady pace into idle workers."""
    url = harness.prepare(dbs, "shardq")
    spec = {**FAN_IN_WORKER, "processes": sizes.fan_in_processes, "handler": HANDLER}
    ids: list[Any] = []
    with sys_shardq.consuming(url, spec), shardq.Client(url, pool_max_size=1) as client:
        began = time.perf_counter()
        for k in range(sizes.chords):
            pause = began + k * sizes.every_s - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            canvas = shardq.chord([app.noop.s(i) for i in range(sizes.members)],
                                  app.fan_in.s(k))
            ids.append(client.enqueue_flow(canvas).id)
        deadline = time.monotonic() + 120
        while len(_callbacks(url)) < sizes.chords and time.monotonic() < deadline:
            time.sleep(0.1)
    called = _callbacks(url)
    with psycopg.connect(url, autocommit=True) as conn:
        acked: dict[Any, float] = dict(conn.execute(
            "SELECT r.flow_id, extract(epoch FROM max(r.finished_at))::float8 "
            "FROM shardq.results AS r JOIN shardq.flows AS f ON f.id = r.flow_id "
            "WHERE r.id <> f.result_id GROUP BY r.flow_id").fetchall())
    if len(called) < sizes.chords or any(c[2] != sizes.members for c in called.values()):
        raise harness.RunnerError(f"{len(called)} of {sizes.chords} callbacks ran, with "
                                  f"{sorted({c[2] for c in called.values()})} results")
    last = [acked[ids[k]] for k in range(sizes.chords)]
    records.append({
        "scenario": SCENARIO, "kind": "fanin", "chords": sizes.chords,
        "members": sizes.members, "every_s": sizes.every_s,
        "processes": sizes.fan_in_processes,
        "latency_s": [called[k][0] - last[k] for k in range(sizes.chords)],
        "to_claim_s": [called[k][1] - last[k] for k in range(sizes.chords)],
        "claim_to_start_s": [called[k][0] - called[k][1] for k in range(sizes.chords)]})
    latencies = records[-1]["latency_s"]
    harness.log(f"chords fan-in: p50 {harness.percentile(latencies, 50) * 1000:.0f} ms, "
                f"p99 {harness.percentile(latencies, 99) * 1000:.0f} ms")
    shutil.rmtree(app.records_dir(url), ignore_errors=True)
    dbs.close()


def measure(sizes: Sizes, reps: int, dsn: str | None, records: list[Record],
            kinds: tuple[str, ...] = KINDS) -> list[str]:
    """Run the measurements of ``kinds`` on one fresh server; its description lines."""
    with harness.fresh_server(dsn) as (admin, description, dbs):
        machine = harness.machine_lines(admin, description)
        steps = {"drain": lambda: drain(dbs, sizes, reps, records),
                 "fanin": lambda: fan_in(dbs, sizes, records),
                 "enqueue": lambda: enqueue(dbs, sizes, reps, records)}
        first = len(records)
        for kind in kinds:
            steps[kind]()
        for record in records[first:]:  # the server line, for the suite's report
            record["server"] = machine[-1].removeprefix("- ")
    return machine


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """The suite's ``chords`` scenario (``--quick``: :data:`QUICK` sizes)."""
    measure(QUICK if settings.quick else Sizes(), settings.reps, dsn, records)
