"""``python -m bench.reshard``: a live reshard's three goals, each measured side by side
in one run, and their report ``bench/results/reshard.md``:

1. ``drain``: the drain rate of a backlog of 16 buckets while ``reshard 16 → 64`` runs,
   over the rate of the same backlog with no reshard (:mod:`bench.reshard.drain`);
   goal ≥ 0.8x.
2. ``fleet``: claim + ack from many connections on a schema resharded 16 → 64 over one
   created with 64 buckets (:mod:`bench.reshard.fleet`); goal ≥ 0.9x.
3. ``producers``: the longest lock wait of producers while a large table is resharded
   (:mod:`bench.reshard.producers`); goal ≤ 1 s.

    python -m bench.reshard [--quick] [--only drain,fleet,producers] [--drain-tasks N]
        [--drain-reps N] [--processes N] [--clients N] [--fleet-tasks N] [--reps N]
        [--rows N] [--producers N] [--dsn URL]

The server needs ``max_connections`` above ``--clients`` (128): the embedded server is
started with 300; a given one (``--dsn``) is used as it is.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields, replace

import psycopg

from bench import harness
from bench.reshard import common, drain, fleet, producers
from bench.suite import fleet as suite_fleet

KINDS = ("drain", "fleet", "producers")


@dataclass(frozen=True)
class Sizes:
    """The sizes of one run (``--quick``: :data:`QUICK`)."""

    drain_tasks: int = 2_000_000
    drain_reps: int = 2
    reshard_after_s: float = 10.0
    processes: int = 2
    clients: int = 128
    fleet_tasks: int = 100_000
    reps: int = 5
    rows: int = 10_000_000
    producers: int = 4


QUICK = Sizes(drain_tasks=50_000, drain_reps=1, reshard_after_s=0.3, clients=8,
              fleet_tasks=8_000, reps=2, rows=100_000)


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Sizes, tuple[str, ...]]:
    """The command line; the sizes (``--quick``'s, then the flags given); the goals run."""
    p = argparse.ArgumentParser(prog="python -m bench.reshard", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (harness check)")
    p.add_argument("--only", default=",".join(KINDS),
                   help="comma-separated subset of " + ",".join(KINDS))
    helps = {"drain_tasks": "tasks per drain", "drain_reps": "drain pairs",
             "reshard_after_s": "seconds into the drain the reshard begins",
             "processes": "`shardq consume --processes` of the drain",
             "clients": "claim + ack connections", "fleet_tasks": "backlog of a claim run",
             "reps": "claim + ack repetitions", "rows": "rows of the table resharded under "
             "producers", "producers": "producer threads"}
    for f in fields(Sizes):
        kind = float if isinstance(f.default, float) else int
        p.add_argument("--" + f.name.replace("_", "-"), type=kind, default=None,
                       help=f"{helps[f.name]} ({f.default}; quick {getattr(QUICK, f.name)})")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    kinds = tuple(k.strip() for k in args.only.split(",") if k.strip())
    if not kinds or set(kinds) - set(KINDS):
        p.error(f"--only takes {', '.join(KINDS)}")
    sizes = QUICK if args.quick else Sizes()
    given = {f.name: getattr(args, f.name) for f in fields(Sizes)
             if getattr(args, f.name) is not None}
    return args, replace(sizes, **given), kinds


def check_connections(admin: str, clients: int) -> None:
    """Refuse a server whose ``max_connections`` would refuse pgbench's clients."""
    with psycopg.connect(admin, autocommit=True) as conn:
        limit = int(harness.scalar(conn, "SHOW max_connections"))
    if limit < clients + 20:
        raise SystemExit(f"the server's max_connections is {limit}: {clients} claim + ack "
                         "connections need 20 more (or pass --clients, or drop --dsn for "
                         f"an embedded server with {suite_fleet.MAX_CONNECTIONS})")


def main(argv: list[str] | None = None) -> int:
    """Run the goals asked for; print and write the report."""
    args, s, kinds = parse_args(argv)
    began = time.monotonic()
    sections: list[list[str]] = []
    goals: list[list[object]] = []
    with harness.server(args.dsn, suite_fleet.MAX_CONNECTIONS) as (admin, description):
        if "fleet" in kinds:
            check_connections(admin, s.clients)
        machine = harness.machine_lines(admin, description)
        load = common.load_1m()
        if "drain" in kinds:
            pairs = drain.measure(admin, s.drain_tasks, s.drain_reps, s.reshard_after_s,
                                  s.processes)
            sections.append(common.with_goals(goals, *drain.section(pairs, s.processes)))
        if "fleet" in kinds:
            runs, timeline = fleet.measure(admin, s.clients, s.fleet_tasks, s.reps)
            sections.append(common.with_goals(
                goals, *fleet.section(runs, timeline, s.clients, s.fleet_tasks)))
        if "producers" in kinds:
            result = producers.measure(admin, s.rows, s.producers)
            sections.append(common.with_goals(goals, *producers.section(result)))
    text = "\n".join([
        "# Live resharding: the drain, claims after it, producers' lock waits", "",
        *machine,
        f"- 1-minute load average {load:.2f} at the start, {common.load_1m():.2f} at the end "
        f"({time.monotonic() - began:,.0f} s); each run's load is in its table",
        f"- sizes: {', '.join(f'{f.name}={getattr(s, f.name):,}' for f in fields(Sizes))}",
        "", common.goal_table(goals), "", *(line for lines in sections for line in lines)])
    print(harness.write_result(harness.result_name("reshard", args.quick), text).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
