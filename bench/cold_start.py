"""Cold start of the ``shardq`` command: wall time of whole fresh processes, medians of N.

Each run is a new Python process, as a shell runs the command: ``python -m shardq
--help``, ``python -m shardq stats`` against a migrated scratch database (connect,
one query, print), and ``python -c "import shardq"`` (what an application pays).
``--tree DIR`` (repeatable) times the package of another source tree too, such as an
export of an older commit (``git archive <commit> | tar -x -C DIR``); the trees take
turns within each repetition, so that drift on a shared machine hits them alike.

    python -m bench.cold_start [--runs 11] [--tree DIR ...] [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from bench import harness

ROOT = Path(__file__).resolve().parent.parent


def commands(dsn: str) -> dict[str, list[str]]:
    """The timed commands, by the name the report gives them."""
    return {
        "shardq --help": ["-m", "shardq", "--help"],
        "shardq stats": ["-m", "shardq", "stats", harness.QUEUE, "--dsn", dsn],
        "import shardq": ["-c", "import shardq"],
    }


def timed(tree: Path, argv: list[str]) -> float:
    """Seconds one fresh process of ``python argv`` takes, importing shardq from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    began = time.perf_counter()
    subprocess.run([sys.executable, *argv], cwd=tree, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    """Time every command in every tree, print a Markdown table and write it to results."""
    p = argparse.ArgumentParser(prog="python -m bench.cold_start", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=11, help="processes per command and tree")
    p.add_argument("--tree", type=Path, action="append", default=[],
                   help="another source tree to time beside this one")
    p.add_argument("--quick", action="store_true", help="3 runs (a harness check)")
    p.add_argument("--output", default=None, help="file name under bench/results "
                   "(default cold_start.md, or cold_start-quick.md with --quick)")
    harness.add_server_argument(p)
    args = p.parse_args(argv)
    runs = 3 if args.quick else args.runs
    trees = [ROOT, *(t.resolve() for t in args.tree)]
    with harness.server(args.dsn) as (admin, description), harness.Databases(admin) as dbs:
        dsn = dbs.migrated(16)
        todo = commands(dsn)
        seconds: dict[tuple[Path, str], list[float]] = {}
        for name, command in todo.items():
            for tree in trees:  # untimed: warm the OS's file cache and the bytecode caches
                timed(tree, command)
            for _ in range(runs):
                for tree in trees:
                    seconds.setdefault((tree, name), []).append(timed(tree, command))
        machine = harness.machine_lines(admin, description)
    rows = [[name, str(tree), f"{harness.median(seconds[tree, name]):.3f}",
             f"{min(seconds[tree, name]):.3f}", f"{max(seconds[tree, name]):.3f}"]
            for name in todo for tree in trees]
    table = harness.markdown_table(["command", "tree", "median s", "min s", "max s"], rows)
    text = "\n".join(["# Cold start of the shardq command", "",
                      f"`python -m bench.cold_start --runs {runs}"
                      + "".join(f" --tree {t}" for t in args.tree) + "`: wall time of "
                      f"{runs} fresh processes per command and tree, after one untimed run.",
                      "", *machine, "", table])
    print(text)
    harness.write_result(args.output or harness.result_name("cold_start", args.quick), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
