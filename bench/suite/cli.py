"""``python -m bench``: run the suite's scenarios and write the report and plots.

    python -m bench [--quick]
        [--scenarios enqueue,drain,pickup,backlog,ablation,cost,fleet,processes,async,start,
                     limit,slots,flow,chords,durable,depth,rate]
        [--reps 3] [--drain 50000] [--churn-s 600] [--churn-rate 200] [--with-5m]
        [--slots-base DIR] [--async-base DIR] [--fixed-rate 500] [--rate-s 20] [--depth-window-s 10]
        [--resume | --report-only] [--dsn URL] [--out DIR]

``--quick`` runs every scenario small (two to three minutes on a busy 2-core box,
~50 s of CPU; fleet and processes add ≈ 40 s on a loaded box, depth and rate ≈ 2 minutes)
and asserts nothing about speed: it
checks that the harness works and writes ``report-quick.md``.  ``fleet`` (pgbench
claim+ack, 4 bucket counts x 8-128 connections) and ``processes`` (``shardq consume
--processes 1-8``, 1 and 16 buckets) take about 12 minutes each on a loaded 2-core box.
``async`` (enqueue from 100 coroutines against PGQueuer and the blocking Client, and the
event loop's stall) takes about 2 minutes.  ``start`` (a 200k backlog drained by one
``shardq consume`` process and one PGQueuer process, timed from the process's spawn)
takes about 5 minutes on a loaded box.  ``limit`` (the in-process drain beside the pgbench
ceiling, then claim + ack on today's schema and on candidate changes, with the WAL and
row versions each task costs) takes about 4 minutes.  ``slots`` (sleeping handlers, sync and
async, 1-256 handler slots in one ``shardq consume``) takes about 6 minutes, twice that
with ``--slots-base`` (an earlier tree's worker side by side).  ``flow`` (the
flow-control measurements, :mod:`bench.flow`) takes about 15 minutes, ``chords`` (chords
beside plain tasks, :mod:`bench.chords`) about 5, ``durable`` (durable tasks,
:mod:`bench.durable`) about 8.  ``depth`` (throughput with the queue held at 2,000 jobs,
1 ms handlers, 16 and 64 slots, five arms) takes about 11 minutes, ``rate`` (pickup
latency and CPU at 500 jobs/s and idle, four arms) about 12.  Every record notes the
1-minute load average when it was made; the report gives it at each scenario's start
and end.  ``--resume`` re-runs the
named scenarios and keeps the results file's records of the others; ``--report-only``
re-renders from that file.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench import harness
from bench.chords import run as chords
from bench.durable import run as durable
from bench.flow import run as flow
from bench.suite import (
    async_enqueue,
    backlog,
    depth,
    fleet,
    from_start,
    limit,
    pickup,
    plots,
    rate,
    report,
    slot_scaling,
    throughput,
)
from bench.suite.cpu import load_1m
from bench.suite.settings import Settings, quick_settings

OUT = harness.RESULTS_DIR / "suite"
SCENARIOS = ("enqueue", "drain", "pickup", "backlog", "ablation", "cost", "fleet", "processes",
             "async", "start", "limit", "slots", "flow", "chords", "durable", "depth", "rate")


class Records(list[dict[str, object]]):
    """The run's records, each given the machine's 1-minute load average when it is added
    (``load_1m``: how busy the box was while it was measured)."""

    def append(self, record: dict[str, object]) -> None:
        """Add ``record``, noting the load average unless it already says one."""
        record.setdefault("load_1m", load_1m())
        super().append(record)


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Settings]:
    """The command line and the settings it makes."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="every scenario, small (harness check)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help="comma-separated subset of " + ",".join(SCENARIOS))
    p.add_argument("--reps", type=int, help="repetitions (default 3; quick 1)")
    p.add_argument("--drain", type=int, help="tasks per drain run (default 50000)")
    p.add_argument("--pickup-s", type=float, help="seconds per pickup run (default 15)")
    p.add_argument("--loaded-rate", type=float, help="loaded producer rate (default 500/s)")
    p.add_argument("--churn-s", type=float, help="churn period per system (default 600)")
    p.add_argument("--churn-rate", type=float, help="churn producer rate (default 200/s)")
    p.add_argument("--with-5m", action="store_true", help="add the 5M-task backlog (slow)")
    p.add_argument("--fixed-rate", type=float, help="rate: producer rate (default 500/s)")
    p.add_argument("--rate-s", type=float, help="rate: seconds per run (default 20)")
    p.add_argument("--depth-window-s", type=float,
                   help="depth: seconds measured per run (default 10)")
    p.add_argument("--slots-base", type=Path,
                   help="slots: an exported earlier tree whose worker runs side by side")
    p.add_argument("--async-base", type=Path,
                   help="async: an exported earlier tree's shardq package, side by side")
    p.add_argument("--flow-base", type=Path,
                   help="flow: an exported earlier tree's shardq package, its binding limit "
                        "run side by side")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: re-render the report and plots from the results file")
    p.add_argument("--resume", action="store_true",
                   help="keep the results file's records of the scenarios not run now")
    p.add_argument("--out", type=Path, default=OUT, help=f"output directory (default {OUT})")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    settings = quick_settings() if args.quick else Settings()
    for attr, name in (("reps", "reps"), ("drain", "drain"), ("pickup_s", "pickup_s"),
                       ("loaded_rate", "loaded_rate"), ("churn_s", "churn_s"),
                       ("churn_rate", "churn_rate"), ("fixed_rate", "fixed_rate"),
                       ("rate_s", "rate_s"), ("depth_window_s", "depth_window_s")):
        value = getattr(args, attr)
        if value is not None:
            setattr(settings, name, value)
    settings.with_big = args.with_5m
    if args.slots_base is not None:
        settings.slots_base = str(args.slots_base)
    if args.async_base is not None:
        settings.async_base = str(args.async_base)
    if args.flow_base is not None:
        settings.flow_base = str(args.flow_base)
    chosen = tuple(s.strip() for s in args.scenarios.split(",") if s.strip())
    unknown = set(chosen) - set(SCENARIOS)
    if unknown or not chosen or settings.reps < 1:
        p.error(f"unknown scenarios {sorted(unknown)} (or none, or reps < 1)")
    settings.scenarios = chosen
    if settings.quick:  # numbers are not the point: shorter waits
        harness.SETTLE_S, pickup.IDLE_BEFORE_S = 0.3, 0.3
    return args, settings


def main(argv: list[str] | None = None) -> int:
    """Run the chosen scenarios, then write results.json, the PNG plots and the report."""
    args, settings = parse_args(argv)
    began = time.monotonic()
    records = Records()
    machine: list[str] = []
    wanted = settings.scenarios
    out: Path = args.out
    suffix = "-quick" if settings.quick else ""
    out.mkdir(parents=True, exist_ok=True)
    raw = out / f"results{suffix}.json"
    measured: dict[str, object] | None = None  # a stored run's command and commit
    if args.report_only:
        stored, measured = harness.load_records(raw)
        records += stored
        wanted = ()
    elif args.resume and raw.exists():
        rerun = {"enqueue": ("enqueue_single", "drain"), "drain": ("enqueue_single", "drain"),
                 "pickup": ("pickup",), "backlog": ("backlog",), "ablation": ("ablation",),
                 "cost": ("churn",), "fleet": ("fleet_ceiling",),
                 "processes": ("fleet_worker",), "async": (async_enqueue.SCENARIO,),
                 "start": ("start",), "limit": ("limit", "limit_candidate"),
                 "slots": (slot_scaling.SCENARIO,), "flow": (flow.SCENARIO,),
                 "chords": (chords.SCENARIO,), "durable": (durable.SCENARIO,),
                 "depth": (depth.SCENARIO,), "rate": (rate.SCENARIO,)}
        dropped = {kind for s in wanted for kind in rerun[s]}
        records += [r for r in harness.load_records(raw)[0] if r["scenario"] not in dropped
                    and not (r["scenario"] == "load" and (r["step"] == "suite" or any(
                        part in wanted for part in str(r["step"]).split("+"))))]
    steps: list[tuple[str, Callable[[], None]]] = [
        ("enqueue+drain", lambda: throughput.run(settings, args.dsn, records, machine)),
        ("pickup", lambda: pickup.run(settings, args.dsn, records)),
        ("backlog", lambda: backlog.run(settings, args.dsn, records)),
        ("ablation", lambda: backlog.run_ablation(settings, args.dsn, records)),
        ("cost", lambda: pickup.run_churn(settings, args.dsn, records)),
        ("fleet", lambda: fleet.run_ceiling(settings, args.dsn, records)),
        ("processes", lambda: fleet.run_workers(settings, args.dsn, records)),
        ("async", lambda: async_enqueue.run(settings, args.dsn, records)),
        ("start", lambda: from_start.run(settings, args.dsn, records)),
        ("limit", lambda: limit.run(settings, args.dsn, records)),
        ("slots", lambda: slot_scaling.run(settings, args.dsn, records)),
        ("flow", lambda: flow.run(settings, args.dsn, records)),
        ("chords", lambda: chords.run(settings, args.dsn, records)),
        ("durable", lambda: durable.run(settings, args.dsn, records)),
        ("depth", lambda: depth.run(settings, args.dsn, records)),
        ("rate", lambda: rate.run(settings, args.dsn, records)),
    ]
    suite_load = load_1m()
    commit = harness.current_commit()  # each scenario's records say what they measured
    failed: list[str] = []
    for name, step in steps:
        if not any(part in wanted for part in name.split("+")):
            continue
        began_load = load_1m()
        try:
            step()
        except Exception as exc:  # keep the other scenarios' results; exit non-zero
            harness.log(f"scenario {name} FAILED: {exc!r}")
            failed.append(f"{name}: {exc!r}"[:500])
        records.append({"scenario": "load", "step": name, "rep": 0, "start": began_load,
                        "end": load_1m(), "commit": commit,
                        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
        harness.dump_records(raw, records)
    if not args.report_only:
        records.append({"scenario": "load", "step": "suite", "rep": 0, "start": suite_load,
                        "end": load_1m()})
        harness.dump_records(raw, records)
    if not machine:
        with harness.server(args.dsn) as (admin, description):
            machine = harness.machine_lines(admin, description)
    drawn = plots.draw(records, settings, out / ("plots-quick" if settings.quick else "plots"))
    command = "python -m bench " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = report.render(records, settings, machine, command.strip(),
                         [p.relative_to(out) for p in drawn], time.monotonic() - began)
    if failed:
        text += "\n## Failed scenarios\n\n" + "\n".join(f"- {f}" for f in failed) + "\n"
    target = out / f"report{suffix}.md"
    target.write_text(harness.stamp(text, measured) + "\n", encoding="utf-8")
    harness.log(f"report written to {target} ({(time.monotonic() - began) / 60:.1f} min)")
    return 1 if failed else 0
