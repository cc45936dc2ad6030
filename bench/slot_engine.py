"""The worker's handler slots alone, without a database: tasks/s and CPU per task.

    python -m bench.slot_engine --tree DIR [--seconds 3] [--reps 3] [--quick]

Each run is a process of its own (``bench/slot_engine.py --child``) with a code tree's
``shardq`` first on ``sys.path``: this tree's, or ``DIR``'s (an export of an earlier
revision: ``git archive REV | tar -x -C DIR``), taking turns within each repetition.
A feeder thread keeps the prefetch buffer holding two rounds of slots, putting ready
contexts 100 at a time as a claimer would; the worker's slots (the class the worker
would pick for the handler) run a raw handler that sleeps 1 ms (``time.sleep`` or
``asyncio.sleep``); outcomes are counted and dropped.  Reported: tasks/s and the
process's CPU per task over the window, medians, and this ÷ the other tree.  What the
suite's slots scenario adds on top (claims, acks, heartbeats, the database on the same
cores) is left out, so that the slots' own cost shows.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

from bench import harness

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
KINDS = ("sync", "async")
CONCURRENCY = (1, 4, 16, 64, 256)
WARMUP_S = 0.5
BATCH = 100


def child(kind: str, concurrency: int, seconds: float) -> dict[str, float]:
    """One run in this process (the tree to measure first on ``sys.path``)."""
    import shardq
    from shardq.core.task import Task
    from shardq.handler import Context
    from shardq.worker import slots as slots_module
    from shardq.worker.buffer import Buffer
    from shardq.worker.metrics import Metrics

    app = shardq.App()
    if kind == "async":
        async def handler(payload: Any) -> None:
            await asyncio.sleep(0.001)
    else:
        def handler(payload: Any) -> None:  # type: ignore[misc]
            time.sleep(0.001)
    app.handler("bench")(handler)
    if hasattr(slots_module, "ThreadSlots"):  # this tree: the worker picks the kind
        from shardq.worker.coslots import LoopSlots

        kind_of: Any = LoopSlots if kind == "async" else slots_module.ThreadSlots
    else:  # earlier trees: one kind, threads
        kind_of = slots_module.Slots
    done = itertools.count()  # next() is atomic: slots report from many threads
    buffer = Buffer()
    slots = kind_of(app, buffer, concurrency=concurrency,
                    report=lambda context, outcome: next(done), taken=lambda: None,
                    metrics=Metrics())
    now = datetime.now(UTC)
    tasks = [Task(id=uuid4(), queue="bench", bucket=0, exec_time=now, lease_token=uuid4(),
                  payload={}, attempts=1, max_attempts=10, priority=0, enqueued_at=now)
             for _ in range(BATCH)]
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            if buffer.qsize() < 2 * concurrency:
                buffer.put_many([Context(task) for task in tasks])
            else:
                time.sleep(0.0005)

    threading.Thread(target=feed, daemon=True).start()
    slots.start()
    time.sleep(WARMUP_S)
    n0, cpu0, t0 = next(done), time.process_time(), time.perf_counter()
    time.sleep(seconds)
    n1, cpu1, t1 = next(done), time.process_time(), time.perf_counter()
    stop.set()
    slots.join(2.0)
    tasks_done = max(1, n1 - n0 - 1)
    return {"rate": tasks_done / (t1 - t0), "cpu_us": (cpu1 - cpu0) * 1e6 / tasks_done}


def run_child(tree: Path, kind: str, concurrency: int, seconds: float) -> dict[str, float]:
    """One run of ``tree``'s slots in a process of its own."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"}
    out = subprocess.run([sys.executable, str(HERE), "--child", kind, str(concurrency),
                          str(seconds)], env=env, cwd=tree, check=True, capture_output=True,
                         text=True, timeout=120)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    """Run both trees, alternating, and write ``bench/results/slot_engine[-quick].md``."""
    p = argparse.ArgumentParser(prog="python -m bench.slot_engine", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tree", type=Path, help="an exported earlier tree (required)")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="one short run at 1, 16, 256 slots")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        kind, concurrency, seconds = args.child
        print(json.dumps(child(kind, int(concurrency), float(seconds))), flush=True)
        return 0
    if args.tree is None:
        p.error("--tree is required")
    reps, seconds = (1, 0.5) if args.quick else (args.reps, args.seconds)
    grid = CONCURRENCY[::2] if args.quick else CONCURRENCY
    trees = [("this", ROOT), ("base", args.tree.resolve())]
    runs: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    for rep in range(reps):
        for kind in KINDS:
            for concurrency in grid:
                for name, tree in trees[rep % 2:] + trees[:rep % 2]:
                    out = run_child(tree, kind, concurrency, seconds)
                    runs.setdefault((name, kind, concurrency), []).append(out)
                    print(f"rep {rep + 1} {name} {kind} x{concurrency}: {out['rate']:,.0f} "
                          f"tasks/s, {out['cpu_us']:.1f} us CPU/task", file=sys.stderr)
    rows = []
    for kind in KINDS:
        for concurrency in grid:
            this, base = runs[("this", kind, concurrency)], runs[("base", kind, concurrency)]
            pairs = list(zip(this, base, strict=True))
            rows.append([kind, concurrency,
                         harness.median([r["rate"] for r in base]),
                         harness.median([r["rate"] for r in this]),
                         f"{harness.median([a['rate'] / b['rate'] for a, b in pairs]):.2f}x",
                         harness.median([r["cpu_us"] for r in base]),
                         harness.median([r["cpu_us"] for r in this]),
                         f"{harness.median([a['cpu_us'] / b['cpu_us'] for a, b in pairs]):.2f}x"])
    command = "python -m bench.slot_engine " + " ".join(argv if argv is not None else sys.argv[1:])
    text = "\n".join([
        "# Handler slots alone (no database): this tree against an earlier one", "",
        f"`{command}`: {reps} repetition(s) of {seconds:g} s, trees alternating; handlers "
        "sleep 1 ms; medians, ratios are medians of per-repetition ratios "
        "(see `bench/slot_engine.py`).", "",
        harness.markdown_table(["handler", "slots", "base tasks/s", "this tasks/s",
                               "this ÷ base", "base CPU µs/task", "this CPU µs/task",
                               "this ÷ base (CPU)"], rows), ""])
    path = harness.write_result(f"slot_engine{'-quick' if args.quick else ''}.md", text)
    print(text)
    print(f"written to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
