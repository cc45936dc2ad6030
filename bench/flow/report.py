"""The flow-control measurements' report (:mod:`bench.flow`): tables, goals and commands,
from stored records (no server): the suite's section and ``bench/results/flow.md``."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from bench.flow.run import ARMS, BINDING, RATE, SCENARIO, THIS_TREE
from bench.harness import markdown_table
from bench.suite.settings import Settings
from bench.suite.stats import fmt_ratio, med, paired_ratio, select

Record = dict[str, Any]
NOTES = Path(__file__).resolve().parent / "notes.md"  # the last full run's diagnosis
OVERHEAD_GOAL = 0.9
BINDING_TARGET = BINDING["max_running"] / BINDING["task_s"]
BINDING_TOLERANCE = 0.1
RATE_TOLERANCE = 0.1
FAIRNESS_GOAL_S = 2.0
BASE, NEVER = "no limits", "limits that never bind"


def _verdict(ok: bool, value: float) -> str:
    return "met" if ok and not math.isnan(value) else "MISSED"


def _command(kind: str, quick: bool, reps: int | None = None) -> str:
    flags = (" --quick" if quick else "") + (f" --reps {reps}" if reps else "")
    return f"`python -m bench.flow --only {kind}{flags}`"


def _overhead(records: list[Record], quick: bool) -> list[str]:
    rs = select(records, SCENARIO, kind="overhead")
    if not rs:
        return []
    base = select(records, SCENARIO, kind="overhead", arm=BASE)
    rows = []
    for arm, limits in ARMS.items():
        runs = select(records, SCENARIO, kind="overhead", arm=arm)
        shown = ", ".join(f"{k}={v}" for k, v in limits.items()) or "-"
        rows.append([arm, shown, med(runs, "rate"), ", ".join(f"{r['rate']:,.0f}" for r in runs),
                     fmt_ratio(paired_ratio(runs, base, "rate")), med(runs, "cpu_ms_per_1k")])
    reps = len({r["rep"] for r in rs})
    return [f"**1. Overhead.** {int(med(rs, 'tasks')):,} no-op tasks per drain by "
            "`shardq consume --processes 2 --batch 100 --claimers 2 --concurrency 4` (the "
            "suite's 2-process drain: queue paused while the processes start, clock from its "
            f"resume until the table is empty); {reps} repetition(s), the arms alternating in a "
            f"rotating order. Ratios: medians of per-repetition ratios. "
            f"Command: {_command('overhead', quick, reps)}.", "",
            markdown_table(["arm", "limits", "median tasks/s", "per rep", "÷ no limits",
                            "worker CPU ms / 1k tasks"], rows), ""]


def _binding(records: list[Record], quick: bool) -> list[str]:
    rs = select(records, SCENARIO, kind="binding")
    if not rs:
        return []
    now = [r for r in rs if not _of_base(r)]
    rows = [[r.get("arm", THIS_TREE), r.get("rep", 0) + 1, r["tasks"], r["elapsed_s"],
             r["rate"], r["steady_rate"], fmt_ratio(r["rate"] / BINDING_TARGET),
             _per_base(r, rs), r["max_running_seen"], r["slots_held_mean"],
             r["slots_held_max"], r["slot_s_per_task"] * 1000,
             r["handler_s_per_task"] * 1000] for r in rs]
    base = [r for r in rs if r not in now]
    command = _command("binding", quick)
    if base:
        where = str(base[0]["arm"]).removeprefix("base (").removesuffix(")")
        command = command[:-1] + f" --reps {len(now)} --base {where}`"
    beside = (f" The base tree ran beside it, alternating; '÷ base' is this "
              f"tree's rate over the base's in the same repetition (median "
              f"{fmt_ratio(paired_ratio(now, base, 'rate'))}).") if base else ""
    return [f"**2. Binding `max_running={BINDING['max_running']}`.** "
            f"`shardq consume --processes {BINDING['processes']} --concurrency "
            f"{BINDING['concurrency']}` ({BINDING['processes'] * BINDING['concurrency']} "
            f"handler slots) drains tasks that sleep {BINDING['task_s'] * 1000:g} ms; target "
            f"{BINDING['max_running']} ÷ {BINDING['task_s']:g} s = {BINDING_TARGET:g} tasks/s. "
            "Steady: handler starts between the first start's second and the last's, per "
            "second. Most running: the most recorded handlers open at one instant. Slots "
            "held: running tasks holding a slot, sampled every 20 ms from the database "
            "while any did. Slot ms per task: slots held ÷ tasks/s (Little's law), the time "
            "from a task's claim to its acknowledgement, of which its handler ran "
            f"'handler ms'. Command: {command}.{beside}", "",
            markdown_table(["tree", "rep", "tasks", "seconds", "tasks/s", "steady tasks/s",
                            f"÷ {BINDING_TARGET:g}", "÷ base", "most running",
                            "slots held (mean)", "slots held (max)", "slot ms / task",
                            "handler ms / task"], rows), ""]


def _of_base(r: Record) -> bool:
    """Whether binding run ``r`` was the base tree's (runs before there was one were
    this tree's)."""
    return bool(r.get("arm", THIS_TREE) != THIS_TREE)


def _per_base(r: Record, rs: list[Record]) -> str:
    """This tree's run ``r`` over the base tree's run of its repetition ("" for a base
    run, or without one)."""
    if _of_base(r):
        return ""
    base = [b for b in rs if _of_base(b) and b.get("rep") == r.get("rep")]
    return fmt_ratio(r["rate"] / base[0]["rate"]) if base and base[0]["rate"] else ""


def _rate_stats(counts: list[int]) -> tuple[int, int, float, int, int]:
    """min, max and mean of every second; min and max without the first (the burst)."""
    rest = counts[1:] or counts
    return min(counts), max(counts), sum(counts) / len(counts), min(rest), max(rest)


def _rate(records: list[Record], quick: bool) -> list[str]:
    rs = [r for r in select(records, SCENARIO, kind="rate") if r["per_second"]]
    if not rs:
        return []
    rows = [[label, len(counts), *_rate_stats(counts), counts[0]]
            for r in rs for label, counts in (("claims", r.get("claims_per_second")),
                                              ("handler starts", r["per_second"])) if counts]
    lists = [f"{label}: " + ", ".join(str(c) for c in counts)
             for r in rs for label, counts in (("Claims per second", r.get("claims_per_second")),
                                               ("Handler starts per second", r["per_second"]))
             if counts]
    return [f"**3. Rate `Rate({RATE.count}, {RATE.period_s:g})`** (burst "
            f"{RATE.burst_or_default}): the suite's 2-process worker runs a backlog that "
            "outlasts the measurement (queue paused while the processes start). Counted per "
            "whole second from the first: claims (each task's claim time, on the database's "
            "clock, from its lease) and handler starts (the worker's clock, recorded by the "
            "handler). The first second holds the burst: up to "
            f"{RATE.count + RATE.burst_or_default} by design. "
            f"Command: {_command('rate', quick)}.", "",
            markdown_table(["counted", "seconds", "min/s", "max/s", "mean/s",
                            "min/s after the first", "max/s after the first", "first second"],
                           rows), "", *(f"{line}\n" for line in lists)]


def _fairness(records: list[Record], quick: bool) -> list[str]:
    rs = select(records, SCENARIO, kind="fairness")
    if not rs:
        return []
    rows = [[r["group_a"], r["a_waiting_at_b"], r["group_b"], r["enqueue_b_s"] * 1000,
             r["b_first_s"], r["b_last_s"], r["a_waiting_after"]] for r in rs]
    return ["**4. Fairness.** Group A's tasks are enqueued (`enqueue_many(..., group='A')`, "
            "queue paused), the suite's 2-process worker starts and drains them; then group "
            "B enqueues its tasks in one `enqueue_many(..., group='B')`. Times from the start "
            f"of B's enqueue call. Command: {_command('fairness', quick)}.", "",
            markdown_table(["A tasks", "A waiting at B's enqueue", "B tasks",
                            "B's enqueue ms", "B's first start s", "B's last start s",
                            "A waiting then"], rows), ""]


def targets(records: list[Record]) -> list[list[object]]:
    """Issue 27's goals: (goal, measured, met?) for the measurements that ran."""
    out: list[list[object]] = []
    over = select(records, SCENARIO, kind="overhead")
    if over:
        ratio = paired_ratio(select(records, SCENARIO, kind="overhead", arm=NEVER),
                             select(records, SCENARIO, kind="overhead", arm=BASE), "rate")
        out.append([f"drain with limits that never bind ≥ {OVERHEAD_GOAL}x no limits",
                    fmt_ratio(ratio), _verdict(ratio >= OVERHEAD_GOAL, ratio)])
    for r in select(records, SCENARIO, kind="binding"):
        if _of_base(r):  # the base tree is not judged
            continue
        off = abs(r["rate"] / BINDING_TARGET - 1)
        out.append([f"binding max_running={BINDING['max_running']}: within "
                    f"{BINDING_TOLERANCE:.0%} of {BINDING_TARGET:g} tasks/s",
                    f"{r['rate']:.1f} tasks/s", _verdict(off <= BINDING_TOLERANCE, off)])
    for r in select(records, SCENARIO, kind="rate"):
        lo, hi = RATE.count * (1 - RATE_TOLERANCE), RATE.count * (1 + RATE_TOLERANCE)
        counted = "claims" if r.get("claims_per_second") else "handler starts"
        counts = r.get("claims_per_second") or r["per_second"] or [math.nan]
        out.append([f"rate {RATE.count}/s: the {counted} of every whole second within "
                    f"±{RATE_TOLERANCE:.0%}", f"{min(counts)}-{max(counts)} per second",
                    _verdict(lo <= min(counts) and max(counts) <= hi, float(min(counts)))])
    for r in select(records, SCENARIO, kind="fairness"):
        out.append([f"fairness: B's last task starts ≤ {FAIRNESS_GOAL_S:g} s after its enqueue",
                    f"{r['b_last_s']:.2f} s", _verdict(r["b_last_s"] <= FAIRNESS_GOAL_S,
                                                       r["b_last_s"])])
    return out


def body(records: list[Record], quick: bool, notes: bool = True) -> list[str]:
    """The measurements' tables and the goals (nothing when none ran), then the notes
    on the last full run (``notes``)."""
    lines = (_overhead(records, quick) + _binding(records, quick) + _rate(records, quick)
             + _fairness(records, quick))
    if not lines:
        return []
    lines += ["Goals:", "", markdown_table(["goal", "measured", ""],
                                                      targets(records)), ""]
    if notes and NOTES.exists() and not quick:
        lines += [NOTES.read_text(encoding="utf-8").strip(), ""]
    return lines


def section(records: list[Record], settings: Settings) -> list[str]:
    """The suite report's flow-control section (nothing when the scenario did not run)."""
    lines = body(records, settings.quick, notes=False)
    if not lines:
        return []
    if not settings.quick:
        lines += ["Why the missed goals were missed: `bench/results/flow.md`.", ""]
    servers = sorted({str(r["server"]) for r in select(records, SCENARIO) if "server" in r})
    where = f" Measured on {'; '.join(servers)}." if servers else ""
    return ["## 13. Flow control", "",
            "Run in the suite by `python -m bench --scenarios flow` (quick: `--quick`); each "
            "measurement alone by the command given with it (`python -m bench.flow` runs "
            f"them all and writes `bench/results/flow.md`).{where}", "", *lines]


def document(records: list[Record], machine: list[str], quick: bool, elapsed_s: float) -> str:
    """``bench/results/flow.md``: the machine, then :func:`body`."""
    title = "# Flow control" + (" (--quick: harness check, numbers meaningless)"
                                           if quick else "")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return "\n".join([title, "", *machine, f"- {elapsed_s / 60:.1f} min; every run on a fresh "
                      "database of one server (a fresh embedded one unless --dsn), worker "
                      "processes started by `shardq consume`; "
                      f"load average at the end {load} (1, 5, 15 min)", "",
                      *body(records, quick)])
