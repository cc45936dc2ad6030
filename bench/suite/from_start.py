"""Scenario 10: the drain from the worker process's start, as an autoscaler sees it.

A backlog of ``start_tasks`` no-op tasks is enqueued (each system's batch API) and
CHECKPOINTed; then one consumer process is started and the clock runs from just
before it is spawned until its handler started the last task.  Imports, connecting,
preparing statements and any ramp-up are inside the figure, as they are for a worker
that an autoscaler starts because a backlog is waiting.

- shardq: ``python -m shardq consume bench.suite.start_app:counted --queue bench``
  with its defaults; the handler (a module that imports nothing heavy) counts the
  tasks it started and, at the last, prints ``DRAINED <epoch>`` on stderr (and
  ``FIRST <epoch>`` at the first).  The worker logs
  ``consuming ...`` when it is ready, which gives the start-up time.
- PGQueuer: the suite's runner (``QueueManager.run(batch_size=100)``) in a process of
  its own, whose probe reports the wall-clock times of the first and the last task.

Both processes are started the same way (``subprocess`` from the harness) and both
end their clock at the last task's handler start; the systems alternate, rotating
the order from one repetition to the next, on one PostgreSQL.

A figure from a busy machine says little (other work takes the cores the two systems
share with their database, unevenly): before each run the scenario waits, up to
``start_quiet_wait_s`` (none in a quick run), for the 1-minute load average to fall to
:data:`QUIET_LOAD_1M`.
Each run is reported with the load it began at, and a repetition in which either run
began above it is refused: listed, but left out of the medians and the ratio.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from bench import harness
from bench.harness import markdown_table
from bench.suite import start_app
from bench.suite.cpu import load_1m
from bench.suite.probe import QUEUE
from bench.suite.settings import PGQ_100, Settings, Variant
from bench.suite.stats import fmt_ratio, med, paired_ratio, select

Record = dict[str, Any]
SHARDQ_CONSUME = Variant("shardq-consume", "shardq", note="`shardq consume`, its defaults")
QUIET_LOAD_1M = 1.0  # half the cores of the 2-core box the suite was written on
START_VARIANTS = (SHARDQ_CONSUME, PGQ_100)


def _shardq(url: str, n: int, deadline_s: float) -> Record:
    """One ``shardq consume`` process from its spawn to its last task's start."""
    command = [sys.executable, "-m", "shardq", "consume", f"{start_app.__name__}:counted",
               f"--queue={QUEUE}", "--shutdown-grace-s=5"]
    env = {**os.environ, "SHARDQ_DSN": url, start_app.TARGET_ENV: str(n), "PYTHONUNBUFFERED": "1"}
    marks: dict[str, float] = {}
    drained = threading.Event()
    spawned = time.time()
    daemon = subprocess.Popen(command, env=env, cwd=harness.ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)

    def watch() -> None:
        assert daemon.stderr is not None
        for line in daemon.stderr:  # read to the end, or the daemon blocks on a full pipe
            now = time.time()
            word, _, value = line.strip().partition(" ")
            if word in ("FIRST", "TENTH", "DRAINED"):
                marks[word] = float(value)
            elif "consuming" in line and "ready" not in marks:
                marks["ready"] = now
            if word == "DRAINED":
                drained.set()

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    try:
        if not drained.wait(deadline_s):
            raise harness.RunnerError(f"shardq consume did not drain {n} tasks in {deadline_s} s")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
    out = _record(n, spawned, marks["FIRST"], marks["DRAINED"], marks.get("ready"))
    # No ramp-up: the first tenth goes as fast as the other nine tenths.
    tenth = marks["TENTH"]
    out["first_tenth_vs_rest"] = ((n // 10) / (tenth - marks["FIRST"])) / (
        (n - n // 10) / (marks["DRAINED"] - tenth))
    return out


def _per_rep(record: Record, refused: set[int]) -> str:
    """One run's rate and the load average it began at; struck through if refused."""
    load = record.get("load_start")
    text = f"{record['rate']:,.0f}" + (f" (load {load:.2f})" if load is not None else "")
    return f"~~{text}~~" if record["rep"] in refused else text


def _pgqueuer(url: str, n: int, deadline_s: float) -> Record:
    """One PGQueuer consumer process (the suite's runner) from its spawn to its last task."""
    spawned = time.time()
    proc = harness.spawn({"system": "pgqueuer", "mode": "consume", "url": url, "n": n,
                          "deadline_s": deadline_s, **PGQ_100.consume})
    out = harness.finish(proc, deadline_s + 60)
    if out["handled"] < n:
        raise harness.RunnerError(f"PGQueuer handled {out['handled']} of {n} tasks")
    return _record(n, spawned, out["first_epoch"], out["last_epoch"], out.get("ready_epoch"))


def _record(n: int, spawned: float, first: float, last: float, ready: float | None) -> Record:
    return {"tasks": n, "seconds": last - spawned, "rate": n / (last - spawned),
            "first_task_s": first - spawned,
            "ready_s": (ready - spawned) if ready else float("nan"),
            "rate_after_first": n / (last - first) if last > first else float("nan")}


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """The from-process-start drain, shardq consume against PGQueuer batch 100."""
    n = settings.start_tasks
    deadline_s = 120 + n / 100  # PGQueuer drained 500 tasks/s on a loaded 2-core box
    with harness.fresh_server(dsn) as (_admin, _description, dbs):
        for rep in range(settings.reps):
            k = rep % len(START_VARIANTS)
            for variant in START_VARIANTS[k:] + START_VARIANTS[:k]:
                url = harness.prepare(dbs, variant.system)
                harness.call({"system": variant.system, "mode": "enqueue", "url": url, "n": n,
                              "batch": settings.enqueue_batch})
                harness.checkpoint(url)
                load = _quiet(settings.start_quiet_wait_s)
                run_one = _shardq if variant.system == "shardq" else _pgqueuer
                out = run_one(url, n, deadline_s)
                records.append({"scenario": "start", "variant": variant.name, "rep": rep,
                                "load_start": load, "quiet": load <= QUIET_LOAD_1M, **out})
                harness.log(f"from start rep {rep + 1} {variant.name}: {out['rate']:,.0f} "
                            f"tasks/s ({out['seconds']:.2f} s; first task at "
                            f"{out['first_task_s']:.2f} s; load {load:.2f} at its start)")
                dbs.close()


def _quiet(wait_s: float) -> float:
    """Wait (up to ``wait_s``) for the load average to fall to QUIET_LOAD_1M; the load
    average the run begins at."""
    deadline = time.monotonic() + wait_s
    while load_1m() > QUIET_LOAD_1M and time.monotonic() < deadline:
        time.sleep(5)
    return load_1m()


def _refused_reps(records: list[Record]) -> set[int]:
    """Repetitions in which a run began on a busy machine (records older than the load
    check count as quiet)."""
    return {r["rep"] for r in records if not r.get("quiet", True)}


def ratio(records: list[Record]) -> float:
    """shardq consume ÷ PGQueuer b100 from the process's start, over the repetitions run
    on a quiet machine (median of the per-repetition ratios)."""
    refused = _refused_reps(select(records, "start"))
    runs = [[r for r in select(records, "start", variant=v.name) if r["rep"] not in refused]
            for v in START_VARIANTS]
    return paired_ratio(runs[0], runs[1], "rate")


def section(records: list[Record], settings: Settings) -> list[str]:
    """The report's section: each system's rate from its process's start, side by side,
    from the repetitions run on a quiet machine."""
    every = select(records, "start", variant=START_VARIANTS[0].name)
    if not every:
        return []
    refused = _refused_reps(select(records, "start"))
    base = [r for r in every if r["rep"] not in refused]
    rows = []
    for v in START_VARIANTS:
        runs = select(records, "start", variant=v.name)
        rs = [r for r in runs if r["rep"] not in refused]
        rows.append([v.name, v.note, med(rs, "tasks"), med(rs, "rate"),
                     ", ".join(_per_rep(r, refused) for r in runs), med(rs, "seconds"),
                     med(rs, "ready_s"), med(rs, "first_task_s"), med(rs, "rate_after_first"),
                     med(rs, "first_tenth_vs_rest") if v.system == "shardq" else "-",
                     fmt_ratio(paired_ratio(base, rs, "rate"))])
    return ["## 10. Drain from the worker process's start", "",
            f"A backlog of {settings.start_tasks:,} no-op tasks, then one consumer process is "
            "started; the clock runs from just before the process is spawned until its handler "
            "started the last task (imports, connecting and any ramp-up included). A ramp-up "
            "shows as the rate through the first tenth of the backlog below the rate through "
            "the rest. "
            "'ready': the process said it consumes (shardq's `consuming` log line; PGQueuer's "
            "runner just before `QueueManager.run`). Each run waited for the 1-minute load "
            f"average to fall to {QUIET_LOAD_1M:g} (at most {settings.start_quiet_wait_s:g} s); "
            "'per rep' gives "
            "each run's rate and the load it began at, and a repetition in which either run "
            "began above it is refused (struck through, out of the medians and the ratio"
            f"{': ' + str(len(refused)) + ' of ' + str(len(every)) if refused else ''}). "
            f"Command: `python -m bench --scenarios start --reps {settings.reps}`.", "",
            markdown_table(["variant", "setting", "tasks", "median tasks/s", "per rep",
                            "seconds", "ready s", "first task s",
                            "tasks/s after the first", "first tenth's rate ÷ the rest's",
                            "shardq ÷ it"], rows), ""]
