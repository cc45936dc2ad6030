"""``python -m bench.flow``: the flow-control measurements (:mod:`bench.flow.run`) and
their report, ``bench/results/flow.md``:

    python -m bench.flow [--quick] [--only overhead,binding,rate,fairness] [--reps 5]
        [--base DIR] [--dsn URL] [--out FILE] [--records FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench import harness
from bench.flow import report
from bench.flow.run import KINDS, QUICK, Record, Sizes, measure


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.flow``: run, print and write the report."""
    p = argparse.ArgumentParser(prog="python -m bench.flow", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (harness check)")
    p.add_argument("--only", default=",".join(KINDS), help="comma-separated subset of "
                   + ",".join(KINDS))
    p.add_argument("--reps", type=int, default=None, help="overhead repetitions (5; quick 1)")
    p.add_argument("--base", type=Path, default=None,
                   help="binding: also run an earlier tree (an export of its shardq and sql: "
                        "`git archive REV shardq sql | tar -x -C DIR`), alternating, --reps "
                        "runs each")
    p.add_argument("--out", type=Path, default=None,
                   help="report file (default bench/results/flow.md, -quick with --quick)")
    p.add_argument("--records", type=Path, default=None,
                   help="also write the runs' records here (JSON: the suite's results.json "
                        "takes them, then `python -m bench --report-only`)")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    kinds = tuple(k.strip() for k in args.only.split(",") if k.strip())
    if not kinds or set(kinds) - set(KINDS):
        p.error(f"--only takes {', '.join(KINDS)}")
    reps = args.reps or (1 if args.quick else 5)
    records: list[Record] = []
    began = time.monotonic()
    machine = measure(QUICK if args.quick else Sizes(), reps, args.dsn, records, kinds,
                      args.base)
    text = report.document(records, machine, args.quick, time.monotonic() - began)
    print(text)
    out = args.out or harness.RESULTS_DIR / harness.result_name("flow", args.quick)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(harness.stamp(text) + "\n", encoding="utf-8")
    if args.records:
        args.records.write_text(json.dumps(records, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
