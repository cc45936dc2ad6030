"""``python -m bench.durable``: the durable tasks' measurements (:mod:`bench.durable.run`)
and their report, ``bench/results/durable.md``:

    python -m bench.durable [--quick] [--only parked,wake,dbtime] [--reps 3] [--dsn URL]
        [--out FILE]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench import harness
from bench.durable import report
from bench.durable.run import KINDS, QUICK, Record, Sizes, measure


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.durable``: run, print and write the report."""
    p = argparse.ArgumentParser(prog="python -m bench.durable", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (harness check)")
    p.add_argument("--only", default=",".join(KINDS), help="comma-separated subset of "
                   + ",".join(KINDS))
    p.add_argument("--reps", type=int, default=None, help="repetitions (3; quick 1)")
    p.add_argument("--out", type=Path, default=None,
                   help="report file (default bench/results/durable.md, -quick with --quick)")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    kinds = tuple(k.strip() for k in args.only.split(",") if k.strip())
    if not kinds or set(kinds) - set(KINDS):
        p.error(f"--only takes {', '.join(KINDS)}")
    reps = args.reps or (1 if args.quick else 3)
    records: list[Record] = []
    began = time.monotonic()
    machine = measure(QUICK if args.quick else Sizes(), reps, args.dsn, records, kinds)
    text = report.document(records, machine, args.quick, time.monotonic() - began)
    print(text)
    out = args.out or harness.RESULTS_DIR / harness.result_name("durable", args.quick)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(harness.stamp(text) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
