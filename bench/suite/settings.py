"""The suite's knobs (full and ``--quick``) and the configurations it compares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Variant:
    """One system with one setting: how its consumer is configured."""

    name: str
    system: str  # shardq | pgqueuer | procrastinate | ceiling
    consume: dict[str, Any] = field(default_factory=dict)
    scale: float = 1.0  # fraction of the drain size it gets (Procrastinate is ~20x slower)
    note: str = ""


# The drain compares these; the first is "shardq" in every ratio.
SHARDQ = Variant("shardq", "shardq", {"batch": 100, "claimers": 2, "concurrency": 4},
                 note="worker daemon, batch 100, 2 claimers, 4 handler threads")
SHARDQ_DEFAULT = Variant("shardq-defaults", "shardq", {},
                         note="worker daemon defaults: batch 100, 2 claimers, 8 handler threads")
SHARDQ_2P = Variant("shardq-2proc", "shardq",
                    {"batch": 100, "claimers": 2, "concurrency": 4, "processes": 2},
                    note="`shardq consume --processes 2`, each process as 'shardq'; "
                         "done when the table is empty")
PGQ_10 = Variant("pgqueuer-b10", "pgqueuer", {"batch": 10},
                 note="QueueManager.run(batch_size=10) (its default)")
PGQ_100 = Variant("pgqueuer-b100", "pgqueuer", {"batch": 100},
                  note="QueueManager.run(batch_size=100)")
PROC = Variant("procrastinate", "procrastinate", {"concurrency": 10}, scale=0.1,
               note="run_worker_async(concurrency=10), async task, delete_jobs=successful")
CEILING = Variant("ceiling", "ceiling", {"batch": 100, "clients": 4},
                  note="pgbench -M prepared, 4 clients, shardq's claim(limit 100) + ack_many")
DRAIN_VARIANTS = (SHARDQ, SHARDQ_DEFAULT, SHARDQ_2P, PGQ_10, PGQ_100, PROC, CEILING)
PICKUP_VARIANTS = (SHARDQ_DEFAULT, PGQ_10, PROC)  # each system as users run it
COST_VARIANTS = (SHARDQ_DEFAULT, PGQ_10, PROC)
# The depth-target scenario: handlers that sleep 1 ms, each system's consumer with C slots
# (C from Settings.depth_concurrency); the first two are "shardq" in every ratio.
DEPTH_VARIANTS = (
    Variant("shardq-sync", "shardq", {"kind": "sync"},
            note="`shardq consume --concurrency C`, `time.sleep(0.001)` handler"),
    Variant("shardq-async", "shardq", {"kind": "async"},
            note="`shardq consume --concurrency C`, `asyncio.sleep(0.001)` handler"),
    Variant("pgqueuer", "pgqueuer", {"kind": "async"},
            note="`QueueManager.run(batch_size=C/2, max_concurrent_tasks=C)`, async"),
    Variant("procrastinate-async", "procrastinate", {"kind": "async"},
            note="`run_worker_async(concurrency=C)`, async task"),
    Variant("procrastinate-sync", "procrastinate", {"kind": "sync"},
            note="`run_worker_async(concurrency=C)`, sync task (run in a thread)"),
)
SHARDQ_ARMS = ("shardq-sync", "shardq-async")
# The fixed-rate scenario: each system's defaults but 16 handler slots, a no-op handler.
RATE_VARIANTS = (
    Variant("shardq-sync", "shardq", {"concurrency": 16},
            note="worker daemon, 16 handler threads, sync handler"),
    Variant("shardq-async", "shardq", {"concurrency": 16, "kind": "async"},
            note="worker daemon, 16 handler slots, async handler"),
    Variant("pgqueuer", "pgqueuer", {"concurrency": 16},
            note="QueueManager.run(batch_size=8, max_concurrent_tasks=16)"),
    Variant("procrastinate", "procrastinate", {"concurrency": 16},
            note="run_worker_async(concurrency=16), async task"),
)


@dataclass
class Settings:
    """Sizes and repetitions of every scenario."""

    quick: bool = False
    reps: int = 3
    enqueue_single: int = 3_000
    enqueue_batch: int = 1_000
    drain: int = 50_000
    pickup_s: float = 15.0
    idle_rate: float = 20.0
    loaded_rate: float = 500.0
    backlogs: tuple[int, ...] = (10_000, 1_000_000)
    big_backlog: int = 5_000_000
    with_big: bool = False
    in_flight: int = 10_000
    future: int = 1_000_000
    backlog_drain: int = 8_000
    claim_samples: int = 200
    ablation_buckets: tuple[int, ...] = (1, 4, 16, 64)
    ablation_claimers: tuple[int, ...] = (2, 8, 32)
    ablation_tasks: int = 30_000
    fleet_buckets: tuple[int, ...] = (1, 4, 16, 64)
    fleet_clients: tuple[int, ...] = (8, 32, 64, 128)
    fleet_tasks: int = 100_000  # 128 clients x 6 claims of 100 within its 80%
    worker_processes: tuple[int, ...] = (1, 2, 4, 8)
    worker_buckets: tuple[int, ...] = (1, 16)
    worker_tasks: int = 60_000
    churn_s: float = 600.0
    churn_rate: float = 200.0
    async_callers: int = 100  # concurrent coroutines (threads for the blocking Client)
    async_single_tasks: int = 5_000
    async_batches: tuple[int, ...] = (100, 1_000)
    async_batched_tasks: int = 100_000
    async_in_flight: int = 1_000
    async_stall_batch: int = 10_000  # one enqueue_many beside the in-flight single enqueues
    async_base: str = ""  # an exported earlier tree's shardq, run side by side (--async-base)
    start_tasks: int = 200_000  # the from-process-start drain's backlog
    start_quiet_wait_s: float = 240.0  # longest wait for a quiet machine before each run
    limit_tasks: int = 50_000  # drain ÷ ceiling, and the claim + ack candidates
    slots_concurrency: tuple[int, ...] = (1, 4, 16, 64, 256)
    slots_sleep_ms: tuple[int, ...] = (1, 10)
    slots_depth: int = 20_000  # waiting tasks the producer holds the queue at
    slots_warmup_s: float = 1.0
    slots_window_s: float = 3.0
    slots_base: str = ""  # an exported earlier tree, run side by side (--slots-base)
    flow_base: str = ""  # an exported earlier tree's shardq: binding limit side by side
    depth_target: int = 2_000  # jobs the producer keeps waiting
    depth_concurrency: tuple[int, ...] = (16, 64)
    depth_warmup_s: float = 3.0
    depth_window_s: float = 10.0
    fixed_rate: float = 500.0  # the fixed-rate scenario's producer (its idle case: idle_rate)
    rate_s: float = 20.0  # seconds per fixed-rate run
    scenarios: tuple[str, ...] = ("enqueue", "drain", "pickup", "backlog", "ablation", "cost",
                                  "fleet", "processes", "async", "start", "limit", "slots",
                                  "flow", "chords", "durable", "depth", "rate")
    extra: dict[str, Any] = field(default_factory=dict)


def quick_settings() -> Settings:
    """Every scenario, small: checks the harness end to end in under two minutes."""
    return Settings(
        quick=True, reps=1, enqueue_single=200, drain=3_000, pickup_s=1.5, loaded_rate=200.0,
        backlogs=(2_000, 20_000), in_flight=1_000, future=20_000, backlog_drain=1_000,
        claim_samples=20, ablation_buckets=(1, 64), ablation_claimers=(2, 32),
        ablation_tasks=2_000, fleet_buckets=(1, 16), fleet_clients=(8, 32), fleet_tasks=8_000,
        worker_processes=(2,), worker_buckets=(16,), worker_tasks=2_000, churn_s=3.0,
        churn_rate=100.0, async_single_tasks=200, async_batches=(100,),
        async_batched_tasks=10_000, start_tasks=5_000, start_quiet_wait_s=0.0, limit_tasks=3_000,
        slots_concurrency=(4, 64), slots_sleep_ms=(1,), slots_depth=2_000, slots_warmup_s=0.3,
        slots_window_s=0.7, depth_target=1_000, depth_concurrency=(16,), depth_warmup_s=0.5,
        depth_window_s=1.0, fixed_rate=200.0, rate_s=1.5)
