"""What the per-attempt history costs: drain rate and WAL per task, this tree against
one without the history (``--base``, default e32bcbf), side by side.

Each repetition runs both trees in alternating order, each in its own process
(``bench/history/workload.py`` with that tree on ``PYTHONPATH``) against its own fresh
database on one server (the embedded PostgreSQL by default, with autovacuum off and
no timed checkpoints: WAL is counted server-wide, so a quiet server of its own counts
only the workload's), migrated by that tree's migrations.  Two workloads: ``once``
(every task succeeds at its first attempt: the hot path, where an ack records nothing)
and ``retry`` (every task fails once, then succeeds: two attempts recorded per task).
The base tree is exported with ``git archive`` into a temporary directory.  Reported:
each run, the medians, and the medians of the ratios and differences of the runs of
one repetition.

    python -m bench.history [--base e32bcbf] [--tasks 20000] [--threads 2]
        [--reps 3] [--dsn URL]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from bench import harness
from bench.history import statements as history_statements

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = Path(__file__).resolve().parent / "workload.py"
MODES = ("once", "retry")


def export(rev: str, into: Path) -> Path:
    """The source tree of ``rev`` at ``into`` (``git archive``)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def quiet_wal(admin: str) -> None:
    """Keep the server's own writes out of the WAL counted: no autovacuum, and no timed
    checkpoint (whose full-page images would land in one tree's run and not the
    other's).  Only on the server the benchmark started itself."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET autovacuum = off")
        conn.execute("ALTER SYSTEM SET checkpoint_timeout = '1h'")
        conn.execute("ALTER SYSTEM SET max_wal_size = '8GB'")
        conn.execute("SELECT pg_reload_conf()")


def run_tree(tree: Path, url: str, tasks: int, threads: int, mode: str) -> dict[str, Any]:
    """The workload's JSON result with ``tree``'s shardq on a fresh database ``url``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(WORKLOAD), url, str(tasks), str(threads), mode],
                         env=env, cwd=tree, check=True, capture_output=True, text=True,
                         timeout=900)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if not result["shardq"].startswith(str(tree)):
        raise RuntimeError(f"the workload ran {result['shardq']}, not the tree {tree}")
    return result


def summary_row(mode: str, this: list[dict[str, Any]], base: list[dict[str, Any]]
                ) -> list[object]:
    """One workload's medians, and the median of the ratios of the runs taken side by
    side (the same repetition), which the machine's drift affects least."""
    def med(runs: list[dict[str, Any]], key: str) -> float:
        return harness.median([r[key] for r in runs])

    ratios = [t["drain_per_s"] / b["drain_per_s"] for t, b in zip(this, base, strict=True)]
    extra = [t["wal_per_task"] - b["wal_per_task"] for t, b in zip(this, base, strict=True)]
    return [mode, f"{med(this, 'drain_per_s'):,.0f}", f"{med(base, 'drain_per_s'):,.0f}",
            f"{harness.median(ratios):.3f}", f"{med(this, 'wal_per_task'):,.0f}",
            f"{med(base, 'wal_per_task'):,.0f}", f"{harness.median(extra):+,.0f}"]


def main(argv: list[str] | None = None) -> int:
    """Alternate the trees, print and write the report."""
    p = argparse.ArgumentParser(prog="python -m bench.history", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default="e32bcbf", help="the revision without the history "
                   "(the statements compared are its SQL files: only this one fits)")
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=200,
                   help="interleaved claim+ack rounds of the statements' comparison")
    p.add_argument("--out", default="history_cost.md")
    harness.add_server_argument(p)
    p.add_argument("--quick", action="store_true",
                   help="1 repetition of 500 tasks on 1 thread, 10 rounds")
    args = p.parse_args(argv)
    if args.quick:
        args.tasks, args.threads, args.reps, args.rounds = 500, 1, 1, 10
        args.out = "history_cost-quick.md" if args.out == p.get_default("out") else args.out
    trees = {"this": ROOT}
    runs: list[list[object]] = []
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="shardq-base-") as tmp, \
            harness.server(args.dsn) as (admin, described), harness.Databases(admin) as dbs:
        trees["base"] = export(args.base, Path(tmp))
        if not (args.dsn or os.environ.get(harness.DSN_ENV)):
            quiet_wal(admin)
        for rep in range(args.reps):
            order = ["this", "base"] if rep % 2 == 0 else ["base", "this"]
            for mode in MODES:
                for name in order:
                    got = run_tree(trees[name], dbs.create(), args.tasks, args.threads, mode)
                    results.setdefault((mode, name), []).append(got)
                    runs.append([rep + 1, mode, name, f"{got['drain_per_s']:,.0f}",
                                 f"{got['wal_per_task']:,.0f}"])
                    print(*runs[-1], flush=True)
        statements = history_statements.measure(dbs, args.base, args.rounds)
        machine = harness.machine_lines(admin, described)
    rows = [summary_row(mode, results[(mode, "this")], results[(mode, "base")])
            for mode in MODES]
    given = argv if argv is not None else sys.argv[1:]
    command = "python -m bench.history " + " ".join(given)
    text = "\n".join([
        "# Per-attempt history: cost per task", "",
        f"`{command.strip()}`: this tree against {args.base}, {args.tasks:,} tasks per run, "
        f"{args.threads} threads of claim(limit=100) + ack_many (`retry`: nack_many on the "
        f"first claim), {args.reps} repetitions alternating the trees.  "
        "`once`: every task succeeds at its first attempt (the ack records nothing); "
        "`retry`: every task fails once, then succeeds (two attempts recorded).  WAL is "
        "the server's, from a CHECKPOINT before the drain to its end, per task; on the "
        "server the benchmark starts, autovacuum is off and checkpoints are not timed, so "
        "that it counts the workload's statements alone.", "",
        *machine, "",
        "## Medians", "",
        harness.markdown_table(["workload", "drain/s this", "drain/s base",
                               "drain ratio (median of reps)", "WAL B/task this",
                               "WAL B/task base", "WAL difference (median of reps)"], rows),
        "", "## The hot path's statements", "",
        f"The claim (with the worker's id) and the ack of {history_statements.CLAIM} tasks "
        f"that succeed at once, as shipped and as at {args.base}, interleaved over "
        f"{args.rounds} rounds on one connection (`bench/history/statements.py`): median "
        "ms per statement.", "",
        harness.markdown_table(
            ["statement", "this ms", "base ms", "ratio"],
            [[k, f"{statements['this'][k]:.3f}", f"{statements['base'][k]:.3f}",
              f"{statements['this'][k] / statements['base'][k]:.3f}"] for k in ("claim", "ack")]),
        "", "## Runs", "",
        harness.markdown_table(["rep", "workload", "tree", "drain/s", "WAL B/task"], runs), ""])
    path = harness.write_result(args.out, text)
    print(text)
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
