"""The chords measurements' report (:mod:`bench.chords`): tables, goals and commands, from
stored records (no server): the suite's section and ``bench/results/chords.md``."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from bench.chords.run import ARMS, KEPT, SCENARIO, WORKER
from bench.harness import markdown_table, percentile
from bench.suite.settings import Settings
from bench.suite.stats import fmt_ratio, med, paired_ratio, select

Record = dict[str, Any]
NOTES = Path(__file__).resolve().parent / "notes.md"  # the last full run's diagnosis
DRAIN_GOAL = 0.8  # a chord's drain ≥ this times plain tasks'
FAN_IN_GOAL_S = 1.0  # p99 from the last member's ack to the callback's start
ENQUEUE_GOAL = 1.5  # a chord's enqueue ≤ this times enqueue_many's time
TASKS, CHORD = ARMS


def _verdict(ok: bool, value: float) -> str:
    return "met" if ok and not math.isnan(value) else "MISSED"


def _command(kind: str, quick: bool, reps: int | None = None) -> str:
    flags = (" --quick" if quick else "") + (f" --reps {reps}" if reps else "")
    return f"`python -m bench.chords --only {kind}{flags}`"


def _worker(spec: dict[str, Any]) -> str:
    return "`shardq consume " + " ".join(f"--{k} {v}" for k, v in spec.items()) + "`"


def _drain(records: list[Record], quick: bool) -> list[str]:
    rs = select(records, SCENARIO, kind="drain")
    if not rs:
        return []
    base = select(records, SCENARIO, kind="drain", arm=TASKS)
    rows = []
    for arm in (TASKS, KEPT, CHORD):
        runs = select(records, SCENARIO, kind="drain", arm=arm)
        rows.append([arm, med(runs, "tasks"), med(runs, "rate"),
                     ", ".join(f"{r['rate']:,.0f}" for r in runs),
                     fmt_ratio(paired_ratio(runs, base, "rate")), med(runs, "cpu_ms_per_1k"),
                     med(runs, "tail_s") if arm == CHORD else "-"])
    reps = len({r["rep"] for r in rs})
    return [f"**1. Drain.** A chord of {int(med(base, 'tasks')):,} no-op members and a no-op "
            f"callback, against as many plain no-op tasks (one `enqueue_many`), and as many "
            "that keep their result (None) as a chord's members do; each drained by "
            f"{_worker(WORKER)} (the suite's 2-process drain: queue paused while the "
            "processes start, clock from its resume until the table is empty, the chord's "
            "callback run and acked); flows' resolver every 0.1 s (`flow_interval_s`) in each "
            f"process. {reps} repetition(s), the arms in a rotating order. Ratios: medians of "
            "per-repetition ratios. Callback tail: from the last member's ack to the end. "
            f"Command: {_command('drain', quick, reps)}.", "",
            markdown_table(["arm", "tasks", "median tasks/s", "per rep", "÷ plain tasks",
                            "worker CPU ms / 1k tasks", "callback tail s"], rows), ""]


def _ms(values: list[float], pct: float) -> float:
    return percentile(values, pct) * 1000


def _fan_in(records: list[Record], quick: bool) -> list[str]:
    rs = select(records, SCENARIO, kind="fanin")
    if not rs:
        return []
    rows = [[r["chords"], r["members"], r["processes"],
             *(_ms(r["latency_s"], p) for p in (50, 90, 99, 100)),
             _ms(r["to_claim_s"], 50), _ms(r["to_claim_s"], 99),
             _ms(r["claim_to_start_s"], 50), _ms(r["claim_to_start_s"], 99)] for r in rs]
    r = rs[0]
    return [f"**2. Fan-in latency.** {r['chords']} chords of {r['members']} no-op members, "
            f"one enqueued every {r['every_s'] * 1000:g} ms, into "
            f"{_worker({**WORKER, 'processes': r['processes']})}; for each chord, from its "
            "last member's ack (the `finished_at` of its result: the ack statement's start, "
            "just before its commit; the database's clock) to its callback's start (the "
            "handler's clock: one machine), split at the callback's claim (the database's "
            f"clock, from its lease). Command: {_command('fanin', quick)}.", "",
            markdown_table(["chords", "members", "processes", "p50 ms", "p90 ms", "p99 ms",
                            "max ms", "ack → claim p50 ms", "ack → claim p99 ms",
                            "claim → start p50 ms", "claim → start p99 ms"], rows), ""]


def _enqueue(records: list[Record], quick: bool) -> list[str]:
    rs = select(records, SCENARIO, kind="enqueue")
    if not rs:
        return []
    base = select(records, SCENARIO, kind="enqueue", arm=TASKS)
    rows = []
    for arm in ARMS:
        runs = select(records, SCENARIO, kind="enqueue", arm=arm)
        rows.append([arm, med(runs, "tasks"), med(runs, "seconds"),
                     ", ".join(f"{r['seconds']:.2f}" for r in runs), med(runs, "rate"),
                     fmt_ratio(paired_ratio(runs, base, "seconds")), med(runs, "build_s"),
                     med(runs, "plan_s") if arm == CHORD else "-"])
    reps = len({r["rep"] for r in rs})
    return [f"**3. Enqueue.** `client.enqueue_flow(chord([noop.s(i) for i in range(n)], "
            "gather.s()))` against `noop.enqueue_many([(i,) for i in range(n)])`, each into a "
            "fresh database from a warm client, timed from building the signatures or the "
            f"calls to the call's return; {reps} repetition(s), the arms alternating. Build: "
            "the signatures or the calls. Plan: the chord's plan made again, alone (its "
            "layout, rows and checks in Python, no statement). "
            f"Command: {_command('enqueue', quick, reps)}.", "",
            markdown_table(["arm", "tasks", "median s", "per rep", "median tasks/s",
                            "time ÷ enqueue_many's", "build s", "plan s"], rows), ""]


def targets(records: list[Record]) -> list[list[object]]:
    """The goals: (goal, measured, met?) for the measurements that ran."""
    out: list[list[object]] = []
    if select(records, SCENARIO, kind="drain"):
        ratio = paired_ratio(select(records, SCENARIO, kind="drain", arm=CHORD),
                             select(records, SCENARIO, kind="drain", arm=TASKS), "rate")
        out.append([f"drain of a chord ≥ {DRAIN_GOAL}x plain tasks'", fmt_ratio(ratio),
                    _verdict(ratio >= DRAIN_GOAL, ratio)])
    for r in select(records, SCENARIO, kind="fanin"):
        p99 = percentile(r["latency_s"], 99)
        out.append([f"fan-in p99 ≤ {FAN_IN_GOAL_S:g} s", f"{p99:.3f} s",
                    _verdict(p99 <= FAN_IN_GOAL_S, p99)])
    if select(records, SCENARIO, kind="enqueue"):
        ratio = paired_ratio(select(records, SCENARIO, kind="enqueue", arm=CHORD),
                             select(records, SCENARIO, kind="enqueue", arm=TASKS), "seconds")
        out.append([f"enqueue of a chord ≤ {ENQUEUE_GOAL}x enqueue_many's time",
                    fmt_ratio(ratio), _verdict(ratio <= ENQUEUE_GOAL, ratio)])
    return out


def body(records: list[Record], quick: bool, notes: bool = True) -> list[str]:
    """The measurements' tables and the goals (nothing when none ran), then the notes
    on the last full run (``notes``)."""
    lines = _drain(records, quick) + _fan_in(records, quick) + _enqueue(records, quick)
    if not lines:
        return []
    lines += ["Goals:", "", markdown_table(["goal", "measured", ""], targets(records)), ""]
    if notes and NOTES.exists() and not quick:
        lines += [NOTES.read_text(encoding="utf-8").strip(), ""]
    return lines


def section(records: list[Record], settings: Settings) -> list[str]:
    """The suite report's chords section (nothing when the scenario did not run)."""
    lines = body(records, settings.quick, notes=False)
    if not lines:
        return []
    if not settings.quick:
        lines += ["What the missed goals cost, and why: `bench/results/chords.md`.", ""]
    servers = sorted({str(r["server"]) for r in select(records, SCENARIO) if "server" in r})
    where = f" Measured on {'; '.join(servers)}." if servers else ""
    return ["## 14. Chords", "",
            "Run in the suite by `python -m bench --scenarios chords` (quick: `--quick`); each "
            "measurement alone by the command given with it (`python -m bench.chords` runs "
            f"them all and writes `bench/results/chords.md`).{where}", "", *lines]


def document(records: list[Record], machine: list[str], quick: bool, elapsed_s: float) -> str:
    """``bench/results/chords.md``: the machine, then :func:`body`."""
    title = "# Chords" + (" (--quick: harness check, numbers meaningless)" if quick else "")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return "\n".join([title, "", *machine, f"- {elapsed_s / 60:.1f} min; every run on a fresh "
                      "database of one server (a fresh embedded one unless --dsn), worker "
                      "processes started by `shardq consume`; "
                      f"load average at the end {load} (1, 5, 15 min)", "",
                      *body(records, quick)])
