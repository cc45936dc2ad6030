"""Settings of the worker daemon (the CLI flags and SHARDQ_* variables come from here)."""

from __future__ import annotations

from dataclasses import dataclass

from shardq.core.config import DAY_S, MAX_PORT, check_settings, setting
from shardq.core.errors import ConfigError
from shardq.core.validate import MAX_CLAIM, QUEUE_NAME

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class WorkerConfig:
    """How ``shardq consume`` claims and runs tasks."""

    queue: tuple[str, ...] = setting((), "queue to consume (default: all the app's queues)")
    concurrency: int = setting(8, "handlers running at once (per process)", low=1, high=4096)
    processes: int = setting(1, "worker processes, each with its own claimers and handlers",
                             low=1, high=256)
    claimers: int = setting(2, "claiming threads (scale out with more worker processes)",
                            low=1, high=64, tuning=True)
    batch: int = setting(100, "most tasks one claim takes", low=1, high=MAX_CLAIM,
                         tuning=True)
    prefetch_max_s: float = setting(
        1.0, "longest a claimed task waits in the prefetch buffer before it is given back "
             "(the buffer holds what the free slots take in about a quarter of it)",
        low=0.01, high=DAY_S, tuning=True)
    poll_max_ms: int = setting(1000, "longest a bucket goes unvisited when all were empty",
                               low=1, high=HOUR_MS, tuning=True)
    coalesce_ms: float = setting(
        2.0, "how long a claimer woken by an enqueue notification waits for more before it "
             "claims (the buckets they name in one statement; 0: at once)",
        low=0.0, high=1000.0, tuning=True)
    janitors: int = setting(1, "janitor threads in this process (0: none)", low=0, high=16,
                            tuning=True)
    metrics_port: int = setting(0, "serve Prometheus metrics on this port (0: off)",
                                low=0, high=MAX_PORT)
    metrics_host: str = setting("127.0.0.1", "address the metrics endpoint listens on",
                                tuning=True)
    log_format: str = setting("text", "log lines as 'text' or 'json'")
    worker_name: str | None = setting(
        None, "the name this worker goes by in the workers list and the tasks' attempts "
        "(default host:pid)")
    shutdown_grace_s: float = setting(30.0, "how long running handlers may finish on shutdown",
                                      low=0.001, high=DAY_S)
    ack_batch: int = setting(200, "acks and nacks written in one statement at most",
                             low=1, high=MAX_CLAIM, tuning=True)
    ack_flush_ms: int = setting(5, "longest an ack or nack waits to be written",
                                low=1, high=60_000, tuning=True)
    listen: bool = setting(True, "LISTEN for enqueue notifications (PostgreSQL; --no-listen "
                                 "behind a transaction pooler)", tuning=True)
    sample_stats: bool = setting(True, "sample the queues' figures into the metrics (with "
                                       "--processes, the first process only)", tuning=True)
    slo_s: float = setting(0.0, "process-by budget per task for the metrics' SLO forecasts "
                                "(0: none)", low=0.0, high=DAY_S)
    # At most a minute: a missed="skip" schedule runs only a slot seen within a minute of
    # its time (shardq.maths.cadence.ON_TIME_S, not imported: croniter would slow `--help`), so
    # checking less often could skip every slot.
    periodic_interval_s: float = setting(1.0, "how often the app's periodic schedules are "
                                              "checked for a due slot", low=0.1, high=60.0,
                                         tuning=True)

    def __post_init__(self) -> None:
        check_settings(self)
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"log_format must be 'text' or 'json', got {self.log_format!r}")
        for name in self.queue:
            if not QUEUE_NAME.fullmatch(name):
                raise ConfigError(f"--queue {name!r} is not a queue name: use 1-128 letters, "
                                  "digits, '_', '.', ':' or '-', starting with a letter or digit")
        if self.metrics_port and self.metrics_port + self.processes - 1 > MAX_PORT:
            raise ConfigError(f"metrics_port {self.metrics_port} + one port per process "
                              f"({self.processes}) goes past {MAX_PORT}")

    @property
    def connections(self) -> int:
        """Database connections one worker process uses at most: one per claimer and
        janitor, one each for the janitors' vacuum step and the flows' resolver beside
        them, and one each for the lease keeper, the completer, the stats sampler, the
        periodic schedules and giving tasks back on shutdown, with one to spare for
        handlers that enqueue."""
        return self.claimers + self.janitors + (2 if self.janitors else 0) + 6
