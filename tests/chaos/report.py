"""Run every chaos scenario once and write ``bench/results/chaos.md``.

    python -m tests.chaos.report             # every scenario, the long ones too
    python -m tests.chaos.report --quick     # only those the normal test run has
    python -m tests.chaos.report NAME ...    # only these (the file then has only them)

Each scenario gets a fresh database on one throwaway PostgreSQL and a fresh proxy.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench.harness import stamp
from tests.chaos.harness import ROOT, Figures, Stage
from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy
from tests.chaos.scenarios import SCENARIOS, Scenario

OUT = ROOT / "bench" / "results" / "chaos.md"
HANGS = ROOT / "bench" / "results" / "chaos-hangs.txt"  # stacks of daemons that hung
COLUMNS = ("scenario", "fault", "result", "enqueued", "distinct run", "duplicates", "lost",
           "stuck", "dead", "ids on two rows", "broken invariants and notes")


def run_one(scenario: Scenario, pg: ThrowawayPostgres, log_pg: ThrowawayPostgres,
            workdir: Path) -> tuple[Figures, list[str]]:
    """One scenario on a fresh database and proxy (an error becomes a failed row); its
    figures and the stack dumps of daemons that hung."""
    if not pg.running:
        pg.start()
    started = time.monotonic()
    with Proxy(("127.0.0.1", pg.port)) as proxy:
        stage = Stage(pg, proxy, workdir, log_pg)
        try:
            figures = scenario.run(stage)
        except Exception as exc:  # a broken scenario still gets its row
            figures = Figures(scenario.name, "?", violations=[f"scenario error: {exc!r}"])
        finally:
            stage.close()
    figures.seconds = time.monotonic() - started
    return figures, [f"# {scenario.name}\n{dump}" for dump in stage.dumps]


def row(s: Scenario, f: Figures) -> str:
    result = "pass" if f.passed else "**fail**"
    text = "; ".join([*f.violations, *f.notes, f"{f.seconds:.0f} s"])
    cells = [s.name + (" (long)" if s.long else ""), f.fault, result, f.enqueued,
             f.distinct_run, f.duplicates, f.lost, f.stuck, f.dead, f.two_rows, text]
    return "| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |"


def header(pg: ThrowawayPostgres) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    with psycopg.connect(pg.url(), autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    return "\n".join([
        "# Chaos scenarios",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {commit} on "
        f"{platform.machine()} ({platform.python_version()}, embedded PostgreSQL "
        f"{version[0] if version else '?'}), by `python -m tests.chaos.report`.",
        "",
        "Each scenario enqueues numbered tasks, runs real `shardq consume` daemons (through "
        "the fault proxy unless noted) whose handler logs every run to `chaos_runs` over a "
        "direct connection to a second PostgreSQL (so faults of the first do not stop the "
        "handlers from finishing), applies one fault, waits (bounded) for the queue to drain and "
        "counts. *distinct run*: enqueued tasks that ran; *duplicates*: extra successful "
        "runs of one task (by its payload number, so a task written twice counts too); "
        "*lost*: enqueued, never run, and not in the table; *stuck*: still locked at the "
        "end; *ids on two rows*: most ids seen on two rows of `shardq.tasks` at once. "
        "Invariants: 0 lost, 0 stuck, 0 ids on two rows, drained in time, only the expected "
        "dead, and duplicates only of tasks that ran and were not acked when a process died.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the long scenarios")
    parser.add_argument("names", nargs="*", help="run only these scenarios")
    args = parser.parse_args()
    chosen = [s for s in SCENARIOS if (not args.names or s.name in args.names)
              and not (args.quick and s.long)]
    pg, log_pg = ThrowawayPostgres(), ThrowawayPostgres()
    lines: list[str] = []
    dumps: list[str] = []
    try:
        top = header(pg)
        with tempfile.TemporaryDirectory(prefix="shardq-chaos-") as workdir:
            for s in chosen:
                f, hung = run_one(s, pg, log_pg, Path(workdir))
                lines.append(row(s, f))
                dumps += hung
                print(lines[-1], flush=True)
    finally:
        pg.close()
        log_pg.close()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(stamp(top + "\n" + "\n".join(lines) + "\n"))
    print(f"wrote {OUT}")
    if dumps:
        HANGS.write_text(stamp("\n\n".join(dumps)))
        print(f"wrote {HANGS}")


if __name__ == "__main__":
    main()
