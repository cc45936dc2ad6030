"""Scenario 10: one worker process's throughput as handler slots are added.

Handlers that sleep 1 ms or 10 ms, sync (``time.sleep``) and async (``asyncio.sleep``;
:mod:`bench.suite.sleepers.sleepers`), each run by one ``shardq consume --concurrency C``
process for C in ``slots_concurrency``.  The queue is held at ``slots_depth`` waiting
tasks: a producer thread reads how many the queue holds every :data:`TICK_S` and
inserts, server-side, what the worker took since; tasks done are those inserted less
those still in the table (an ack deletes its task).  The rate is taken over
``slots_window_s`` after ``slots_warmup_s`` from the worker's first "consuming" line.

With ``slots_base`` (an export of an earlier tree: ``git archive REV | tar -x -C DIR``)
every run is made by both trees, in turn, the order rotating per repetition: that
tree's ``shardq`` comes first on the worker's ``PYTHONPATH``.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import harness
from bench.harness import markdown_table
from bench.plotting import plt, save
from bench.suite.settings import Settings
from bench.suite.stats import fmt_ratio, med, paired_ratio, select

Record = dict[str, Any]
SCENARIO = "slots"
QUEUE = "bench"
SLEEPERS = Path(__file__).resolve().parent / "sleepers"
KINDS = ("sync", "async")
TICK_S = 0.05
BUCKETS = 16
GOAL_ASYNC_OVER_SYNC16 = 1.5

INSERT = ("INSERT INTO shardq.tasks (queue, payload, exec_time, enqueued_at) "
          "SELECT %(q)s, jsonb_build_object('n', g), t, t FROM generate_series(1, %(n)s) g, "
          "LATERAL (SELECT now() - interval '1 second' + g * interval '1 microsecond') AS s(t)")
COUNT = "SELECT count(*) FROM shardq.tasks WHERE queue = %s"


class Producer:
    """Keeps ``depth`` tasks in the queue from a thread; samples (time, tasks done)."""

    def __init__(self, url: str, depth: int) -> None:
        self.url, self.depth = url, depth
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="slots-producer")
        self._conn = psycopg.connect(url, autocommit=True)
        self._inserted = self._count()  # what an earlier run left counts as inserted
        self._top_up(self._inserted)

    def _count(self) -> int:
        row = self._conn.execute(COUNT, (QUEUE,)).fetchone()
        return int(row[0]) if row else 0

    def _top_up(self, present: int) -> None:
        if present < self.depth:
            self._conn.execute(INSERT, {"q": QUEUE, "n": self.depth - present})
            self._inserted += self.depth - present

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            present = self._count()
            self.samples.append((time.monotonic(), self._inserted - present))
            self._top_up(present)

    def __enter__(self) -> Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()

    def rate(self, start: float, end: float) -> tuple[float, int]:
        """(tasks/s, tasks) between the first samples at or after ``start`` and ``end``."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return 0.0, 0
        (t0, done0), (t1, done1) = inside[0], inside[-1]
        return (done1 - done0) / (t1 - t0), done1 - done0


def consume(url: str, handler: str, concurrency: int, tree: Path | None,
            settings: Settings) -> Record:
    """One run: a ``shardq consume`` process on the held queue; its rate and CPU."""
    env = {**os.environ, "SHARDQ_DSN": url, "PYTHONUNBUFFERED": "1"}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    command = [sys.executable, "-m", "shardq", "consume", f"sleepers:{handler}",
               f"--queue={QUEUE}", f"--concurrency={concurrency}", "--shutdown-grace-s=5",
               "--janitors=0"]
    with Producer(url, settings.slots_depth) as producer:
        daemon = subprocess.Popen(command, env=env, cwd=SLEEPERS, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        consuming = threading.Event()
        errors: list[str] = []

        def watch() -> None:
            assert daemon.stderr is not None
            for line in daemon.stderr:  # read to the end, or the daemon blocks on a full pipe
                errors.append(line)
                if "consuming" in line:
                    consuming.set()

        threading.Thread(target=watch, daemon=True).start()
        try:
            if not consuming.wait(60):
                raise harness.RunnerError(f"the worker never said it was consuming: "
                                          f"{''.join(errors)[-2000:]}")
            start = time.monotonic() + settings.slots_warmup_s
            time.sleep(settings.slots_warmup_s)
            cpu1 = _cpu_s(daemon.pid)
            time.sleep(settings.slots_window_s + 2 * TICK_S)
            cpu2 = _cpu_s(daemon.pid)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
    rate, tasks = producer.rate(start, start + settings.slots_window_s + 2 * TICK_S)
    return {"rate": rate, "tasks": tasks,
            "cpu_ms_per_1k": (cpu2 - cpu1) * 1e6 / tasks if tasks else 0.0}


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def handler_name(kind: str, sleep_ms: int) -> str:
    """The sleepers function for a kind and a sleep."""
    return f"{kind}_{sleep_ms}ms"


def run(settings: Settings, dsn: str | None, records: list[Record]) -> None:
    """Every tree x kind x sleep x concurrency, ``settings.reps`` times, on one server."""
    trees: list[tuple[str, Path | None]] = [("now", None)]
    if settings.slots_base:
        trees.append(("base", Path(settings.slots_base).resolve()))
    grid = [(s, c, k) for s in settings.slots_sleep_ms for c in settings.slots_concurrency
            for k in KINDS]
    with harness.fresh_server(dsn) as (_admin, _description, dbs):
        urls = {name: dbs.migrated(BUCKETS) for name, _ in trees}
        for rep in range(settings.reps):
            order = trees[rep % len(trees):] + trees[:rep % len(trees)]
            for sleep_ms, concurrency, kind in grid:
                for name, tree in order:
                    out = consume(urls[name], handler_name(kind, sleep_ms), concurrency, tree,
                                  settings)
                    records.append({"scenario": SCENARIO, "tree": name, "kind": kind,
                                    "sleep_ms": sleep_ms, "concurrency": concurrency,
                                    "rep": rep, **out})
                    harness.log(f"slots rep {rep + 1} {name} {kind} {sleep_ms} ms x "
                                f"{concurrency}: {out['rate']:,.0f} tasks/s")
                    with psycopg.connect(urls[name], autocommit=True) as conn:
                        conn.execute("VACUUM shardq.tasks")  # each run starts alike


def _rates(records: list[Record], tree: str, kind: str, sleep_ms: int,
           concurrency: tuple[int, ...]) -> list[float]:
    return [med(select(records, SCENARIO, tree=tree, kind=kind, sleep_ms=sleep_ms,
                       concurrency=c), "rate") for c in concurrency]


def targets(records: list[Record], settings: Settings) -> list[list[object]]:
    """Issue 25's slot goals on this tree's runs: (goal, measured, met?)."""
    out: list[list[object]] = []
    cs = settings.slots_concurrency

    def pick(kind: str, sleep_ms: int, c: int) -> list[Record]:
        return select(records, SCENARIO, tree="now", kind=kind, sleep_ms=sleep_ms,
                      concurrency=c)

    for sleep_ms in settings.slots_sleep_ms:
        for kind in KINDS:
            steps = [paired_ratio(pick(kind, sleep_ms, b), pick(kind, sleep_ms, a), "rate")
                     for a, b in itertools.pairwise(cs)]
            worst = min(steps, default=float("nan"))
            out.append([f"{kind} {sleep_ms} ms: never slower with more slots (worst step, "
                        "more ÷ fewer slots, ≥ 0.95 allowing the machine's noise)",
                        fmt_ratio(worst), "met" if worst >= 0.95 else "MISSED"])
        ratios = [paired_ratio(pick("async", sleep_ms, c), pick("sync", sleep_ms, c), "rate")
                  for c in cs]
        worst = min(ratios, default=float("nan"))
        out.append([f"{sleep_ms} ms: async ≥ sync at every slot count (worst async ÷ sync, "
                    "≥ 0.95 allowing the noise)", fmt_ratio(worst),
                    "met" if worst >= 0.95 else "MISSED"])
    if 1 in settings.slots_sleep_ms and 16 in cs:
        top = max(cs)
        ratio = paired_ratio(pick("async", 1, top), pick("sync", 1, 16), "rate")
        out.append([f"1 ms: async at {top} slots ≥ {GOAL_ASYNC_OVER_SYNC16}x sync at 16",
                    fmt_ratio(ratio), "met" if ratio >= GOAL_ASYNC_OVER_SYNC16 else "MISSED"])
    return out


def section(records: list[Record], settings: Settings) -> list[str]:
    """Section 10 of the report (nothing when the scenario did not run)."""
    rs = select(records, SCENARIO)
    if not rs:
        return []
    cs = settings.slots_concurrency
    trees = list(dict.fromkeys(r["tree"] for r in rs))
    rows: list[list[object]] = []
    for sleep_ms in settings.slots_sleep_ms:
        for kind in KINDS:
            for tree in trees:
                label = "this tree" if tree == "now" else f"base ({settings.slots_base})"
                rows.append([f"{sleep_ms} ms", kind, label,
                             *_rates(records, tree, kind, sleep_ms, cs)])
            if "base" in trees:
                rows.append([f"{sleep_ms} ms", kind, "this ÷ base", *(fmt_ratio(paired_ratio(
                    select(records, SCENARIO, tree="now", kind=kind, sleep_ms=sleep_ms,
                           concurrency=c),
                    select(records, SCENARIO, tree="base", kind=kind, sleep_ms=sleep_ms,
                           concurrency=c), "rate")) for c in cs)])
    reps = len({r["rep"] for r in rs})
    base = f" --slots-base {settings.slots_base}" if settings.slots_base else ""
    command = f"python -m bench --scenarios slots --resume --reps {reps}{base}"
    cpu_rows: list[list[object]] = []
    for sleep_ms in settings.slots_sleep_ms:
        for kind in KINDS:
            for tree in trees:
                cpu_rows.append([f"{sleep_ms} ms", kind, "this tree" if tree == "now" else "base",
                                 *(med(select(records, SCENARIO, tree=tree, kind=kind,
                                              sleep_ms=sleep_ms, concurrency=c), "cpu_ms_per_1k")
                                   for c in cs)])
    return ["## 12. Scaling with handler slots (one `shardq consume` process)", "",
            "Raw handlers that sleep (sync: `time.sleep`, async: `asyncio.sleep`), one "
            "`shardq consume --concurrency C` process (other settings default, no janitor), "
            f"the queue held at {settings.slots_depth:,} waiting tasks by a producer that "
            f"tops it up every {TICK_S * 1000:g} ms; tasks/s over {settings.slots_window_s:g} s "
            f"after {settings.slots_warmup_s:g} s of warm-up, medians over {reps} "
            f"repetition(s). Reproduce: `{command}`.", "",
            markdown_table(["handler", "kind", "tree", *(f"{c} slots" for c in cs)], rows), "",
            "The worker process's CPU time per 1,000 tasks over the same window (user + "
            "system, from `/proc`): what a task costs the worker whatever share of the "
            "cores it got.", "",
            markdown_table(["handler", "kind", "tree", *(f"{c} slots" for c in cs)], cpu_rows),
            "",
            "Goals:", "",
            markdown_table(["goal", "measured", ""], targets(records, settings)), ""]


def draw(records: list[Record], settings: Settings, out: Path) -> list[Path]:
    """tasks/s against slots, one panel per sleep (nothing when the scenario did not run)."""
    rs = select(records, SCENARIO)
    if not rs:
        return []
    trees = list(dict.fromkeys(r["tree"] for r in rs))
    sleeps = settings.slots_sleep_ms
    fig, axes = plt.subplots(1, len(sleeps), figsize=(5 * len(sleeps), 4), squeeze=False)
    cs = settings.slots_concurrency
    for ax, sleep_ms in zip(axes[0], sleeps, strict=True):
        for kind, color in zip(KINDS, ("#4477aa", "#ee6677"), strict=True):
            for tree in trees:
                ax.plot(cs, _rates(records, tree, kind, sleep_ms, cs), marker="o", color=color,
                        linestyle="-" if tree == "now" else "--",
                        label=f"{kind}{'' if tree == 'now' else ' (base)'}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(cs, [str(c) for c in cs])
        ax.set_xlabel("--concurrency (slots)")
        ax.set_ylabel("tasks/s")
        ax.set_title(f"Handlers sleeping {sleep_ms} ms, one process")
        ax.legend()
    return [save(fig, out / "slots.png")]
