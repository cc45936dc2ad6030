"""This checkout against an earlier revision of shardq, side by side: batched enqueue and
claim+ack throughput through the public API.

Each repetition runs both code trees, in alternating order, each in its own process
(``bench/versions/workload.py`` with that tree first on ``sys.path``) against
its own fresh database on one server, migrated by that tree's own migrations.  The
earlier revision is checked out with ``git worktree`` into a temporary directory.
Reported: per-repetition ratios (this ÷ base) and their medians.

    python -m bench.versions --base REV [--tasks 50000] [--threads 4] [--reps 5]
        [--out versions.md] [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import harness

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = Path(__file__).resolve().parent / "workload.py"
QUICK = {"tasks": 5_000, "reps": 1}


def checkout(rev: str, into: Path) -> Path:
    """A detached work tree of ``rev`` at ``into``."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(into), rev],
                   check=True, capture_output=True)
    return into


def remove(tree: Path) -> None:
    """Remove a work tree made by :func:`checkout`."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                   check=False, capture_output=True)


def run_tree(tree: Path, url: str, tasks: int, threads: int) -> dict[str, float]:
    """Migrate ``url`` and run the workload with ``tree``'s shardq; its JSON result."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(WORKLOAD), url, str(tasks), str(threads)],
        env=env, cwd=tree, check=True, capture_output=True, text=True, timeout=900)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and write the report to bench/results/."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base", required=True, help="the earlier revision (a commit or tag)")
    p.add_argument("--tasks", type=int, default=50_000)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", default=None, help="file name under bench/results "
                   "(default versions.md, or versions-quick.md with --quick)")
    p.add_argument("--quick", action="store_true", help="small, one repetition")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    if args.quick:
        args.tasks, args.reps = QUICK["tasks"], QUICK["reps"]
    base = checkout(args.base, Path(tempfile.mkdtemp(prefix="shardq-base-")) / "tree")
    trees = {"this": ROOT, "base": base}
    runs: dict[str, list[dict[str, float]]] = {"this": [], "base": []}
    try:
        with harness.server(args.dsn) as (admin, description), harness.Databases(admin) as dbs:
            for rep in range(args.reps):
                order = ["this", "base"] if rep % 2 == 0 else ["base", "this"]
                for name in order:
                    runs[name].append(run_tree(trees[name], dbs.create(), args.tasks,
                                               args.threads))
                    print(f"rep {rep + 1} {name}: {runs[name][-1]}", flush=True)
            lines = harness.machine_lines(admin, description)
    finally:
        remove(base)
    text = report(args, runs, lines)
    print(text)
    harness.write_result(args.out or harness.result_name("versions", args.quick),
                         text)
    return 0


def report(args: argparse.Namespace, runs: dict[str, list[dict[str, float]]],
           machine: list[str]) -> str:
    """The markdown report: medians per tree and the median of per-repetition ratios."""
    metrics = {"enqueue_per_s": "batched enqueue (enqueue_many of 1,000), tasks/s",
               "drain_per_s": f"claim(limit 100) + ack_many, {args.threads} threads, tasks/s"}
    rows = []
    for key, label in metrics.items():
        ratios = [t[key] / b[key] for t, b in zip(runs["this"], runs["base"], strict=True)]
        rows.append([label, harness.median([r[key] for r in runs["this"]]),
                     harness.median([r[key] for r in runs["base"]]),
                     f"{harness.median(ratios):.2f}x", ", ".join(f"{r:.2f}" for r in ratios)])
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()
    return "\n".join([
        f"# This checkout ({head or 'unknown commit'}) against {args.base}", "",
        f"- command: `python -m bench.versions --base {args.base} --tasks {args.tasks} "
        f"--threads {args.threads} --reps {args.reps}`",
        *machine, "",
        harness.markdown_table(["workload", "this", "base", "this ÷ base (median)",
                               "per repetition"], rows), ""])


if __name__ == "__main__":
    raise SystemExit(main())
