"""The durable tasks' report (:mod:`bench.durable`): tables, goals and commands, from the
runs' records: ``bench/results/durable.md``."""

from __future__ import annotations

import math
from typing import Any

from bench.durable.run import SCENARIO, WORKER
from bench.harness import markdown_table, median, percentile

Record = dict[str, Any]
PARKED_GOAL = 0.95  # the live queue's claim rate with 100k parked ≥ this times without
WAKE_GOAL_S = 1.0  # p99 from the due time or the emit to the handler's resumption
DBTIME_GOAL = 2.0  # a 10-step durable task's database time ≤ this times 10 chained tasks'


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _worker() -> str:
    flags = " ".join(f"--{k} {v}" for k, v in WORKER.items() if k != "handler")
    return f"`shardq consume {WORKER['handler']} {flags}`"


def _runs(records: list[Record], kind: str, arm: str | None = None) -> list[Record]:
    return [r for r in records if r.get("scenario") == SCENARIO and r["kind"] == kind
            and (arm is None or r["arm"] == arm)]


def _paired(records: list[Record], kind: str, arm: str, base: str, field: str) -> float:
    """The median over repetitions of ``arm``'s ``field`` over ``base``'s."""
    ours = {r["rep"]: r[field] for r in _runs(records, kind, arm)}
    theirs = {r["rep"]: r[field] for r in _runs(records, kind, base)}
    ratios = [ours[k] / theirs[k] for k in ours if theirs.get(k)]
    return median(ratios) if ratios else math.nan


def _parked(records: list[Record], flag: str) -> list[str]:
    runs = _runs(records, "parked")
    if not runs:
        return []
    rows = [[arm, f"{r0['parked']:,}", f"{median([r['rate'] for r in rs]):,.0f}",
             ", ".join(f"{r['rate']:,.0f}" for r in rs)]
            for arm in ("none parked", "parked")
            for rs in [_runs(records, "parked", arm)] for r0 in rs[:1]]
    ratio = _paired(records, "parked", "parked", "none parked", "rate")
    return ["## 1. A live queue beside parked tasks", "",
            "Claims of 100 and their acks (one client) until a backlog of the live queue "
            "is drained, in a database where tasks of the same queue are parked (half on a "
            "day's sleep, half on an event nobody emits, each parked by a worker running "
            "its handler) and in one with none; the arms in turns. Command: "
            f"`python -m bench.durable --only parked{flag}`.", "",
            markdown_table(["arm", "parked", "median claims/s", "per rep"], rows), "",
            f"Goal: the claim rate with the tasks parked ≥ {PARKED_GOAL}x of none parked: "
            f"**{ratio:.2f}x, {_verdict(ratio >= PARKED_GOAL)}** (median of per-repetition "
            "ratios).", ""]


def _wake(records: list[Record], flag: str) -> list[str]:
    runs = _runs(records, "wake")
    if not runs:
        return []
    rows, ok = [], True
    for r in runs:
        late = r["late_s"]
        p99 = percentile(late, 99)
        ok = ok and p99 <= WAKE_GOAL_S
        rows.append([r["arm"], f"{r['tasks']:,}",
                     f"{r['emitted_s']:.2f}" if "emitted_s" in r else "-",
                     f"{percentile(late, 50) * 1000:.0f}", f"{p99 * 1000:.0f}",
                     f"{max(late) * 1000:.0f}",
                     ", ".join(f"{k} {v}" for k, v in r.get("reruns", {}).items()) or "none",
                     _verdict(p99 <= WAKE_GOAL_S)])
    return ["## 2. Wake-up latency", "",
            "How late a handler resumed, on the machine's clock: after its sleep's due time "
            "(due times spread over a few seconds), or after the emit call that woke it "
            "began (a burst: every waiter's event emitted within about a second, in batches "
            "of 1,000 with `emit_events`; or one `emit_event` every 20 ms). Workers: "
            f"{_worker()}. Command: `python -m bench.durable --only wake{flag}`.", "",
            markdown_table(["wake-up by", "tasks", "emitted in s", "p50 ms", "p99 ms",
                            "max ms", "runs made again", f"p99 ≤ {WAKE_GOAL_S:g} s"], rows), "",
            f"Goal: p99 ≤ {WAKE_GOAL_S:g} s in each: **{_verdict(ok)}**.", ""]


def _dbtime(records: list[Record], flag: str) -> list[str]:
    runs = _runs(records, "dbtime")
    if not runs:
        return []
    rows = []
    for arm in ("chains of 10", "10-step durable"):
        rs = _runs(records, "dbtime", arm)
        per = [r["cpu_ms"] / r["tasks"] for r in rs]
        rows.append([arm, f"{rs[0]['tasks']:,}", f"{median(per):.2f}",
                     ", ".join(f"{p:.2f}" for p in per),
                     f"{median([r['db_ms'] / r['tasks'] for r in rs]):.2f}",
                     f"{median([r['elapsed_s'] for r in rs]):.1f}"])
    ratio = _paired(records, "dbtime", "10-step durable", "chains of 10", "cpu_ms")
    latency = _paired(records, "dbtime", "10-step durable", "chains of 10", "db_ms")
    return ["## 3. Database time of ten steps", "",
            "Durable tasks of 10 steps (each a checkpoint) against as many `shardq.chain`s "
            "of 10 plain tasks, each drained by the same workers in a fresh database. The "
            "database's time is the CPU time of the server's processes over the drain (the "
            "workers' start and stop included). The backends' statement time "
            "(`pg_stat_database.active_time`) is shown beside it: a sum of latencies, in "
            "which 64 slots' checkpoints sent at once on 2 cores count each other's waits "
            f"for the CPU ({latency:.2f}x here). Workers: {_worker()}. Command: "
            f"`python -m bench.durable --only dbtime{flag}`.", "",
            markdown_table(["arm", "tasks or chains", "median server CPU ms each", "per rep",
                            "statement ms each", "median drain s"], rows), "",
            f"Goal: ≤ {DBTIME_GOAL:g}x the chains' database time: **{ratio:.2f}x, "
            f"{_verdict(ratio <= DBTIME_GOAL)}** (median of per-repetition ratios).", ""]


def body(records: list[Record], quick: bool) -> list[str]:
    """The three measurements' tables and goals (nothing for those that did not run)."""
    flag = " --quick" if quick else ""
    return _parked(records, flag) + _wake(records, flag) + _dbtime(records, flag)


def section(records: list[Record], settings: Any) -> list[str]:
    """The suite report's durable tasks section (nothing when the scenario did not run)."""
    lines = body(records, settings.quick)
    if not lines:
        return []
    lines = [line.replace("## ", "### ", 1) if line.startswith("## ") else line
             for line in lines]
    return ["## 15. Durable tasks", "",
            "Run in the suite by `python -m bench --scenarios durable` (quick: `--quick`); "
            "each measurement alone by the command given with it (`python -m bench.durable` "
            "runs them all and writes `bench/results/durable.md`).", "", *lines]


def document(records: list[Record], machine: list[str], quick: bool, seconds: float) -> str:
    """The whole report."""
    parts = ["# Durable tasks", "", *machine, "",
             f"Measured in {seconds / 60:.1f} min" + (" (quick sizes: a harness check, "
                                                      "not a measurement)" if quick else "")
             + ".", ""]
    return "\n".join(parts + body(records, quick))
