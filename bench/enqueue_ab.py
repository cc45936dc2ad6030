"""Batched enqueue, shardq against PGQueuer, interleaved: A B, B A, A B ...

The suite's batched-enqueue figure comes from the set-up of its drain runs, minutes
apart between systems; on a shared machine whose speed drifts by 1.5x within minutes,
one pair can swing the ratio by a third.  Here the two systems take turns back to back,
each in a process of its own on a fresh database (the suite's own harness and enqueue
code: ``n`` tasks in ``enqueue_many`` / list-valued ``Queries.enqueue`` batches of
1,000), and each pair gives one ratio.

    python -m bench.enqueue_ab [--pairs 8] [--tasks 50000] [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
from typing import Any

from bench import harness

SYSTEMS = ("shardq", "pgqueuer")


def enqueue_rate(dbs: harness.Databases, system: str, n: int) -> float:
    """Tasks per second of one batched enqueue of ``n`` tasks into a fresh database."""
    url = harness.prepare(dbs, system)
    out: dict[str, Any] = harness.call({"system": system, "mode": "enqueue", "url": url,
                                        "n": n, "batch": 1000})
    dbs.close()
    return float(out["tasks"] / out["seconds"])


def main(argv: list[str] | None = None) -> int:
    """Interleave the two systems' enqueues; print each pair and the medians."""
    p = argparse.ArgumentParser(prog="python -m bench.enqueue_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--tasks", type=int, default=50_000, help="tasks per enqueue run")
    p.add_argument("--quick", action="store_true", help="1 pair of 1,000 tasks")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    if args.quick:
        args.pairs, args.tasks = 1, 1_000
    lines = ["# Batched enqueue: shardq against PGQueuer, interleaved", ""]
    rates: dict[str, list[float]] = {s: [] for s in SYSTEMS}
    ratios = []
    with harness.fresh_server(args.dsn) as (_, _, dbs):
        for pair in range(args.pairs):
            order = SYSTEMS if pair % 2 == 0 else SYSTEMS[::-1]
            rate = {system: enqueue_rate(dbs, system, args.tasks) for system in order}
            for system in SYSTEMS:
                rates[system].append(rate[system])
            ratios.append(rate["shardq"] / rate["pgqueuer"])
            lines.append(f"- pair {pair + 1}: shardq {rate['shardq']:,.0f}/s, pgqueuer "
                         f"{rate['pgqueuer']:,.0f}/s, {ratios[-1]:.2f}x")
            print(lines[-1], flush=True)
    lines.append(f"\nshardq ÷ pgqueuer: median {harness.median(ratios):.2f}x over "
                 f"{len(ratios)} pairs ({', '.join(f'{r:.2f}' for r in ratios)}); medians "
                 f"shardq {harness.median(rates['shardq']):,.0f}/s, pgqueuer "
                 f"{harness.median(rates['pgqueuer']):,.0f}/s")
    print(harness.write_result(harness.result_name("enqueue_ab", args.quick),
                               "\n".join(lines)).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
