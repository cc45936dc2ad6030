"""What OpenTelemetry tracing costs a worker's drain: off, on with no tracer provider, on
with the SDK.

Three arms, taking turns in each repetition (A B C A B C ...) so that the load of a
shared machine hits them alike, each a drain of ``--drain`` no-op tasks by an
in-process worker (batch 100, 2 claimers, 4 handler threads, no janitor) on a fresh
database per repetition:

- ``off``: shardq not instrumented (also what a process without ``shardq[otel]`` runs);
- ``no provider``: ``ShardqInstrumentor().instrument()`` with no tracer provider
  configured, OpenTelemetry's API alone (its spans record nothing);
- ``sdk``: instrumented with the SDK's ``TracerProvider`` and a batch span processor
  whose exporter drops the spans (the cost of recording them, without any I/O); the
  tasks are enqueued under a producer span, so each handler span has a parent and
  each claim and settle span links to it.  (The other arms' producers are not traced:
  a producer traced by an SDK hands its trace to the worker's handlers, traced or not.)

Each arm's tasks are enqueued (untimed) with the arm's instrumentation on.  The figures
are the drain's tasks per second and the worker process's CPU microseconds per task
(steadier than the rate on a shared machine), medians over the repetitions.

The hooks are also timed alone, in CPU microseconds per call in a loop (no database):
what a handler run (``process``), a claim (``received``) and a settle statement cost
in each arm, the first as a worker's slot calls it (the read of the hook slot
included).  On a machine too busy for the drains to compare, these say how much of a
task's CPU time tracing takes.

    python -m bench.otel_cost [--drain 20000] [--reps 5] [--quick] [--dsn URL]
"""

from __future__ import annotations

import argparse
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import NoOpTracer, Tracer

import shardq
from bench import harness
from shardq.contrib.opentelemetry import ShardqInstrumentor
from shardq.core import tracing
from shardq.core.config import ClientConfig
from shardq.core.task import Task
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker

QUEUE = "otel-cost"
ARMS = ("off", "no provider", "sdk")
DRAIN_TIMEOUT_S = 600
STATEMENT_TIMEOUT_S = 300.0


class Dropped(SpanExporter):
    """An exporter that drops every span: the SDK's cost without an exporter's I/O."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Accept the spans and do nothing with them."""
        return SpanExportResult.SUCCESS


def drain(url: str, n: int, producer: Tracer) -> tuple[float, float]:
    """Tasks per second of one drain of ``n`` no-op tasks (enqueued in a span of
    ``producer``), and the CPU microseconds per task."""
    app = shardq.App(url)
    done = itertools.count(1)
    finished = threading.Event()

    @app.task(queue=QUEUE)
    def noop(i: int) -> None:
        if next(done) == n:
            finished.set()

    with shardq.Client(url) as client:
        app.use_client(client)
        with producer.start_as_current_span("request"):
            for first in range(0, n, 1000):
                noop.enqueue_many([(i,) for i in range(first, min(n, first + 1000))])
        # A long statement timeout: on a loaded machine a statement cut at the default
        # deadline loses its acks, and with no janitor the drain would never end.
        worker = Worker(app, ClientConfig(dsn=url, statement_timeout_s=STATEMENT_TIMEOUT_S),
                        WorkerConfig(
                            janitors=0, listen=False, batch=100, claimers=2, concurrency=4))
        with psycopg.connect(url, autocommit=True) as conn:
            began, cpu = time.perf_counter(), time.process_time()
            worker.start()
            if not finished.wait(DRAIN_TIMEOUT_S):
                raise RuntimeError(f"the drain did not finish in {DRAIN_TIMEOUT_S}s")
            while harness.scalar(conn, "SELECT count(*) FROM shardq.tasks WHERE queue = %s",
                                (QUEUE,)):
                time.sleep(0.005)  # the last acks
            elapsed, used = time.perf_counter() - began, time.process_time() - cpu
        worker.stop(grace_s=10)
    return n / elapsed, used / n * 1e6


def hook_costs(arm: str, sdk: TracerProvider, calls: int) -> tuple[float, float, float]:
    """CPU microseconds per call of the handler-run, claim and settle hooks in ``arm``
    (a claim and a settle of one batch of 100 tasks enqueued under a trace in ``sdk``)."""
    if arm != "off":
        ShardqInstrumentor().instrument(**({"tracer_provider": sdk} if arm == "sdk" else {}))
    try:
        parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" if arm == "sdk" \
            else None
        now = datetime.now(UTC)
        task = Task(uuid.uuid4(), QUEUE, 0, now, uuid.uuid4(), [0], 1, 10, 0, now,
                    trace_context=parent)
        batch = [task] * 100

        def run() -> None:
            tracer = tracing.tracer
            span = None if tracer is None else tracer.process(task)
            if span is not None:
                with span:
                    pass

        def claim() -> None:
            tracer = tracing.tracer
            if tracer is not None:
                tracer.received(QUEUE, batch, time.time_ns())

        def settle() -> None:
            tracer = tracing.tracer
            span = None if tracer is None else tracer.settle("ack", batch)
            if span is not None:
                with span:
                    pass

        return (per_call(run, calls), per_call(claim, calls // 10),
                per_call(settle, calls // 10))
    finally:
        if arm != "off":
            ShardqInstrumentor().uninstrument()


def per_call(call: Callable[[], None], n: int) -> float:
    """CPU microseconds per call of ``call``, less the loop's own."""
    began = time.process_time()
    for _ in range(n):
        call()
    spent = time.process_time() - began
    began = time.process_time()
    for _ in range(n):
        pass
    return (spent - (time.process_time() - began)) / n * 1e6


def run_arm(arm: str, url: str, n: int, sdk: TracerProvider) -> tuple[float, float]:
    """One drain with ``arm``'s instrumentation."""
    producer = sdk.get_tracer("producer") if arm == "sdk" else NoOpTracer()
    if arm == "off":
        return drain(url, n, producer)
    ShardqInstrumentor().instrument(**({"tracer_provider": sdk} if arm == "sdk" else {}))
    try:
        return drain(url, n, producer)
    finally:
        ShardqInstrumentor().uninstrument()


def main(argv: list[str] | None = None) -> int:
    """Run the arms in turns and write bench/results/otel_cost[-quick].md."""
    parser = argparse.ArgumentParser(prog="python -m bench.otel_cost",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--drain", type=int, default=20_000, help="tasks per drain")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one short repetition")
    harness.add_server_argument(parser)
    args = parser.parse_args(argv)
    n, reps = (2000, 1) if args.quick else (args.drain, args.reps)
    sdk = TracerProvider()
    sdk.add_span_processor(BatchSpanProcessor(Dropped()))
    runs: dict[str, list[tuple[float, float]]] = {arm: [] for arm in ARMS}
    with harness.server(args.dsn) as (admin, described), harness.Databases(admin) as dbs:
        run_arm("off", dbs.migrated(16), min(n, 2000), sdk)  # warm up: caches, imports
        for rep in range(reps):
            url = dbs.migrated(16)  # one fresh database per repetition
            for arm in ARMS:
                rate, cpu = run_arm(arm, url, n, sdk)
                runs[arm].append((rate, cpu))
                print(f"rep {rep + 1} {arm}: {rate:,.0f} tasks/s, {cpu:.1f} µs CPU/task",
                      flush=True)
        lines = ["# OpenTelemetry tracing: the cost on a worker's drain", "",
                 *harness.machine_lines(admin, described), "",
                 f"{reps} repetition(s) of a drain of {n:,} no-op tasks per arm, arms taking "
                 "turns; an in-process worker (batch 100, 2 claimers, 4 handler threads). "
                 "Medians; ratios against `off`.", ""]
        hooks = {arm: [hook_costs(arm, sdk, 2000 if args.quick else 50_000)
                       for _ in range(reps)] for arm in ARMS}
    sdk.shutdown()
    base_rate = harness.median([r for r, _ in runs["off"]])
    base_cpu = harness.median([c for _, c in runs["off"]])
    rows: list[list[Any]] = []
    for arm in ARMS:
        rate = harness.median([r for r, _ in runs[arm]])
        cpu = harness.median([c for _, c in runs[arm]])
        rows.append([arm, f"{rate:,.0f}", f"{base_rate / rate:.3f}", f"{cpu:.1f}",
                     f"{cpu / base_cpu:.3f}"])
    lines.append(harness.markdown_table(
        ["arm", "tasks/s", "time vs off", "CPU µs/task", "CPU vs off"], rows))
    lines += ["", "The hooks alone, CPU µs per call (medians); a claim and a settle of 100 "
              "tasks:", ""]
    hook_rows = []
    for arm in ARMS:
        run, claim, settle = (harness.median([h[i] for h in hooks[arm]]) for i in range(3))
        per_task = run + (claim + settle) / 100
        hook_rows.append([arm, f"{run:.2f}", f"{claim:.2f}", f"{settle:.2f}",
                          f"{per_task:.2f}", f"{per_task / base_cpu:.2%}"])
    lines.append(harness.markdown_table(
        ["arm", "handler run", "claim", "settle", "per task", "of off's CPU/task"],
        hook_rows))
    lines += ["", "Command: `python -m bench.otel_cost"
              + (" --quick" if args.quick else f" --drain {n} --reps {reps}") + "`"]
    path = harness.write_result(harness.result_name("otel_cost", args.quick),
                               "\n".join(lines))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
