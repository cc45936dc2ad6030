"""Flow control measured with ``shardq consume`` worker processes.

1. Overhead: the suite's 2-process drain of no-op tasks with no limits, with limits
   so high they never bind (``max_running=1_000_000`` and ``rate=Rate(10_000_000, 1)``)
   and with that ``max_running`` alone, alternating within each repetition.
2. Binding ``max_running=8``: 3 worker processes of 16 handler slots, 50 ms tasks;
   throughput against 8 ÷ 0.05 s = 160 tasks/s.
3. ``rate=Rate(50, 1)``: handler starts of every whole second against 50.
4. Fairness: group A's backlog drains; group B enqueues 100 tasks; the time until
   B's last task starts.

Every run has a fresh database; the worker processes are started, timed and stopped
as the suite's ``processes`` scenario does (:mod:`bench.suite.sys_shardq`).  Measured
handlers record their start and end (machine clock) in files beside the run
(:func:`bench.flow.app.records_dir`).
The suite runs this as its ``flow`` section (:func:`run`, :func:`bench.flow.report.section`);
alone (``python -m bench.flow``, :mod:`bench.flow.__main__`) it writes ``bench/results/flow.md``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

import shardq
from bench import harness
from bench.flow.app import records_dir
from bench.flow.observe import SlotSampler, max_overlap, per_second, recorded, starts
from bench.suite import backlog, sys_shardq
from bench.suite.settings import SHARDQ_2P, Settings

Record = dict[str, Any]
SCENARIO = "flow"
QUEUE = harness.QUEUE
HANDLER = "bench.flow.app:task"
WORKER = SHARDQ_2P.consume  # the suite's drain: 2 processes, batch 100, 2 claimers, 4 slots
ARMS: dict[str, dict[str, Any]] = {
    "no limits": {},
    "limits that never bind": {"max_running": 1_000_000, "rate": shardq.Rate(10_000_000, 1)},
    "max_running only": {"max_running": 1_000_000},
}
BINDING = {"max_running": 8, "processes": 3, "concurrency": 16, "task_s": 0.05}
RATE = shardq.Rate(50, 1)
THIS_TREE = "this tree"
"""The binding runs' arm of the tree being measured (beside a ``base`` one)."""
KINDS = ("overhead", "binding", "rate", "fairness")


@dataclass(frozen=True)
class Sizes:
    """How big each measurement is."""

    drain: int = 30_000  # no-op tasks per overhead drain
    binding_tasks: int = 3_200  # 20 s at 160 tasks/s
    rate_s: int = 60  # whole seconds of rate-limited starts
    group_a: int = 100_000
    group_b: int = 100
    warm_s: float = 2.0  # A drains this long before B enqueues


QUICK = Sizes(drain=1_000, binding_tasks=160, rate_s=3, group_a=2_000, warm_s=0.5)

def _database(dbs: harness.Databases, limits: dict[str, Any]) -> str:
    """A fresh database with the bench queue's ``limits``."""
    url = harness.prepare(dbs, "shardq")
    if limits:
        with shardq.Client(url, pool_max_size=1) as client:
            client.set_limits(QUEUE, **limits, create=True)
    return url


def _enqueue(url: str, payload: dict[str, Any], n: int, group: str | None = None) -> None:
    with shardq.Client(url, pool_max_size=1) as client:
        for first in range(0, n, 5_000):
            client.enqueue_many(QUEUE, [payload] * min(5_000, n - first), group=group)


def _drain(url: str, n: int, worker: dict[str, Any], tree: Path | None = None) -> Record:
    """The suite's timed ``shardq consume`` run (queue paused while the processes start,
    clock from its resume to an empty table) with this module's handler (``tree``: an
    earlier tree's shardq, see :func:`bench.harness.spawn`)."""
    out = harness.call({"system": "shardq", "mode": "consume", "url": url, "n": n,
                        "deadline_s": 120 + n / 20, "cli": True, **worker,
                        "handler": HANDLER}, timeout=600 + n / 10, tree=tree)
    return {"tasks": out["handled"], "elapsed_s": out["elapsed_s"],
            "rate": out["handled"] / out["elapsed_s"] if out["elapsed_s"] else 0.0}


def overhead(dbs: harness.Databases, sizes: Sizes, reps: int, records: list[Record]) -> None:
    """Measurement 1: the arms side by side, in a rotating order per repetition."""
    arms = list(ARMS)
    for rep in range(reps):
        k = rep % len(arms)
        for arm in arms[k:] + arms[:k]:
            url = _database(dbs, ARMS[arm])
            backlog.top_up(url, sizes.drain)
            out = backlog.drain_rate(url, sizes.drain, WORKER)
            records.append({"scenario": SCENARIO, "kind": "overhead", "arm": arm, "rep": rep,
                            **out})
            harness.log(f"flow overhead rep {rep + 1} {arm}: {out['rate']:,.0f} tasks/s")
            dbs.close()


def binding(dbs: harness.Databases, sizes: Sizes, records: list[Record],
            base: Path | None = None, reps: int = 1) -> None:
    """Measurement 2: a binding max_running under more handler slots than it allows;
    with ``base`` (an export of an earlier tree's ``shardq`` and ``sql``), ``reps`` runs
    of each tree, alternating in a rotating order."""
    trees: list[tuple[str, Path | None]] = [(THIS_TREE, None)]
    if base is not None:
        trees.append((f"base ({base})", base.resolve()))
    for rep in range(reps if base is not None else 1):
        k = rep % len(trees)
        for arm, tree in trees[k:] + trees[:k]:
            _binding_run(dbs, sizes, records, arm, rep, tree)


def _binding_run(dbs: harness.Databases, sizes: Sizes, records: list[Record], arm: str,
                 rep: int, tree: Path | None) -> None:
    url = _database(dbs, {"max_running": BINDING["max_running"]})
    _enqueue(url, {"s": BINDING["task_s"], "rec": True}, sizes.binding_tasks)
    with SlotSampler(url) as sampler:
        out = _drain(url, sizes.binding_tasks, {"processes": BINDING["processes"],
                                                "concurrency": BINDING["concurrency"]}, tree)
    spans = starts(url)
    if not spans:
        raise harness.RunnerError(f"no handler started: {out}")
    first, last = spans[0][0], spans[-1][0]
    # Steady state: leave out each end's second (processes waking, the last tasks).
    inner = [a for a, _ in spans if first + 1.0 <= a < last - 1.0]
    steady = len(inner) / (last - first - 2.0) if last - first > 4.0 else float("nan")
    busy = sampler.busy()
    # Slot time per task: how long a task held its slot, claim to acknowledgement, on
    # average (Little's law over the drain); the handler's own part of it.
    held = sum(busy) / len(busy) if busy else float("nan")
    handler_s = sum(b - a for a, b in spans) / len(spans)
    records.append({"scenario": SCENARIO, "kind": "binding", "arm": arm, "rep": rep, **out,
                    "steady_rate": steady,
                    "max_running_seen": max_overlap(spans), "slots_held_mean": held,
                    "slots_held_max": max(busy, default=0),
                    "slot_s_per_task": held / out["rate"] if out["rate"] else float("nan"),
                    "handler_s_per_task": handler_s})
    harness.log(f"flow binding ({arm}): {out['rate']:.1f} tasks/s (steady {steady:.1f}), at most "
                f"{max_overlap(spans)} running; slots held {held:.2f} on average, "
                f"handler {handler_s * 1000:.0f} ms of {held / out['rate'] * 1000:.0f} ms "
                "slot time per task")
    shutil.rmtree(records_dir(url), ignore_errors=True)
    dbs.close()


def rate(dbs: harness.Databases, sizes: Sizes, records: list[Record]) -> None:
    """Measurement 3: a queue rate over ``sizes.rate_s`` whole seconds, the backlog
    ample throughout (a draining queue's last buckets would run dry unevenly)."""
    url = _database(dbs, {"rate": RATE})
    with shardq.Client(url, pool_max_size=1) as client:
        client.pause(QUEUE, create=True)
    _enqueue(url, {"rec": True}, RATE.count * (sizes.rate_s + 10))
    with _workers(url, {**WORKER, "handler": HANDLER}):
        time.sleep(sizes.rate_s + 2.0)
    counts = per_second([a for a, _ in starts(url)])[:sizes.rate_s]
    ends = sorted(float(r[3]) for r in recorded(url))
    claims = per_second(ends)[:sizes.rate_s]
    records.append({"scenario": SCENARIO, "kind": "rate", "per_second": counts,
                    "claims_per_second": claims})
    harness.log(f"flow rate: handler starts per second {counts}; claims {claims}")
    shutil.rmtree(records_dir(url), ignore_errors=True)
    dbs.close()


@contextmanager
def _workers(url: str, spec: dict[str, Any]) -> Iterator[None]:
    """``shardq consume`` as the suite starts it, the paused queue resumed once every
    worker process consumes; stopped when the block ends."""
    daemon, consuming = sys_shardq.start_cli(url, spec)
    try:
        if not consuming.wait(120):
            raise harness.RunnerError("the workers never started consuming")
        with shardq.Client(url, pool_max_size=1) as client:
            client.resume(QUEUE)
        yield
    finally:
        sys_shardq.stop_cli(daemon)


def fairness(dbs: harness.Databases, sizes: Sizes, records: list[Record]) -> None:
    """Measurement 4: B's 100 tasks arrive while A's backlog drains."""
    url = _database(dbs, {})
    with shardq.Client(url, pool_max_size=1) as client:
        client.pause(QUEUE, create=True)
    _enqueue(url, {"g": "A"}, sizes.group_a, group="A")
    with (_workers(url, {**WORKER, "handler": HANDLER}),
          shardq.Client(url, pool_max_size=1) as client,
          psycopg.connect(url, autocommit=True) as conn):
        def left_a() -> int:
            return int(harness.scalar(conn, "SELECT count(*) FROM shardq.tasks "
                                           "WHERE queue = %s AND task_group = 'A'", (QUEUE,)))

        time.sleep(sizes.warm_s)
        a_at_b = left_a()
        sent = time.time()
        client.enqueue_many(QUEUE, [{"g": "B", "rec": True}] * sizes.group_b, group="B")
        committed = time.time()
        deadline = time.monotonic() + 120
        while len(b := starts(url, "B")) < sizes.group_b and time.monotonic() < deadline:
            time.sleep(0.05)
        a_after = left_a()
    if len(b) < sizes.group_b:
        raise harness.RunnerError(f"only {len(b)} of B's {sizes.group_b} tasks started")
    records.append({"scenario": SCENARIO, "kind": "fairness", "group_a": sizes.group_a,
                    "group_b": sizes.group_b, "a_waiting_at_b": a_at_b,
                    "a_waiting_after": a_after, "enqueue_b_s": committed - sent,
                    "b_first_s": b[0][0] - sent, "b_last_s": b[-1][0] - sent})
    harness.log(f"flow fairness: B's last start {b[-1][0] - sent:.2f} s after its enqueue; "
                f"A waiting {a_at_b:,} then {a_after:,}")
    shutil.rmtree(records_dir(url), ignore_errors=True)
    dbs.close()


def measure(sizes: Sizes, reps: int, dsn: str | None, records: list[Record],
            kinds: tuple[str, ...] = KINDS, base: Path | None = None) -> list[str]:
    """Run the measurements of ``kinds`` on one fresh server (the binding one beside the
    tree ``base`` too, if given); its description lines."""
    with harness.fresh_server(dsn) as (admin, description, dbs):
        machine = harness.machine_lines(admin, description)
        steps = {"overhead": lambda: overhead(dbs, sizes, reps, records),
                 "binding": lambda: binding(dbs, sizes, records, base, reps),
                 "rate": lambda: rate(dbs, sizes, records),
                 "fairness": lambda: fairness(dbs, sizes, records)}
        first = len(records)
        for kind in kinds:
            steps[kind]()
        for record in records[first:]:  # the server line, for the suite's report
            record["server"] = machine[-1].removeprefix("- ")
    return machine


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """The suite's ``flow`` scenario (``--quick``: :data:`QUICK` sizes)."""
    measure(QUICK if settings.quick else Sizes(), settings.reps, dsn, records,
            base=Path(settings.flow_base) if settings.flow_base else None)
