"""The suite's shardq drain, this tree against another, interleaved: A B A B ...

On a shared machine the load drifts between runs; taking turns within each repetition
makes the drift hit both trees alike, and the medians compare.  Each run is the
suite's drain of the 'shardq' variant (fresh database, N no-op tasks enqueued, the
worker daemon in a process of its own: batch 100, 2 claimers, 4 handler threads),
with the daemon's code taken from the tree being measured (``--tree``, e.g. an
export of an older commit: ``git archive <commit> | tar -x -C DIR``).

    python -m bench.drain_ab --tree DIR [--reps 5] [--drain 50000] [--processes 1]
        [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import harness

ROOT = Path(__file__).resolve().parent.parent


def call(tree: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one runner of ``tree`` (its shardq and its bench) and return its RESULT."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(tree)}
    env.pop("SHARDQ_DSN", None)
    proc = subprocess.Popen([sys.executable, "-m", "bench.suite.runner", json.dumps(spec)],
                            cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    return harness.finish(proc, 3600.0)


def drain(dbs: harness.Databases, tree: Path, n: int, processes: int) -> tuple[float, float]:
    """Tasks per second of one drain of ``n`` no-op tasks by ``tree``'s worker, and the
    worker's CPU microseconds per task (steadier than the rate on a shared machine)."""
    url = harness.prepare(dbs, "shardq")
    call(tree, {"system": "shardq", "mode": "enqueue", "url": url, "n": n, "batch": 1000})
    out = call(tree, {"system": "shardq", "mode": "consume", "url": url, "n": n,
                      "deadline_s": 60 + n / 100, "batch": 100, "claimers": 2,
                      "concurrency": 4, "processes": processes})
    rate = float(out["handled"] / out["elapsed_s"]) if out["elapsed_s"] else 0.0
    return rate, float(out["cpu_s"]) / max(1, int(out["handled"])) * 1e6


def main(argv: list[str] | None = None) -> int:
    """Interleave the drains, print each run and the medians."""
    p = argparse.ArgumentParser(prog="python -m bench.drain_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tree", type=Path, required=True, help="the other source tree")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--drain", type=int, default=50_000, help="tasks per drain")
    p.add_argument("--processes", type=int, default=1, help="worker processes per daemon")
    p.add_argument("--quick", action="store_true", help="1 repetition of 500 tasks")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    if args.quick:
        args.reps, args.drain = 1, 500
    lines = [f"# Drain: this tree against {args.tree}, interleaved", ""]
    trees = {"this tree": ROOT, str(args.tree): args.tree.resolve()}
    rates: dict[str, list[float]] = {name: [] for name in trees}
    cpus: dict[str, list[float]] = {name: [] for name in trees}
    with harness.server(args.dsn) as (admin, _), harness.Databases(admin) as dbs:
        for rep in range(args.reps):
            order = list(trees.items())
            for name, tree in order if rep % 2 == 0 else reversed(order):
                rate, cpu = drain(dbs, tree, args.drain, args.processes)
                rates[name].append(rate)
                cpus[name].append(cpu)
                lines.append(f"- rep {rep + 1} {name}: {rate:,.0f} tasks/s, worker CPU "
                             f"{cpu:.1f} us/task")
                print(lines[-1], flush=True)
    lines.append("")
    for name, values in rates.items():
        lines.append(f"- {name}: median {harness.median(values):,.0f} tasks/s over "
                     f"{len(values)} runs ({', '.join(f'{v:,.0f}' for v in values)}); worker "
                     f"CPU median {harness.median(cpus[name]):.1f} us/task")
    print(harness.write_result(harness.result_name("drain_ab", args.quick),
                               "\n".join(lines)).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
