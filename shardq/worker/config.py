"""Settings of the worker daemon (the CLI flags and SHARDQ_* variables come from here)."""

from __future__ import annotations

from dataclasses import dataclass

from shardq.config import check_positive, setting
from shardq.errors import ConfigError


@dataclass(frozen=True)
class WorkerConfig:
    """How ``shardq consume`` claims and runs tasks."""

    queue: tuple[str, ...] = setting((), "queue to consume (default: all the app's queues)")
    concurrency: int = setting(8, "handlers running at once (per process)")
    processes: int = setting(1, "worker processes, each with its own claimers and handlers")
    claimers: int = setting(2, "claiming threads (scale out with more worker processes)")
    batch: int = setting(100, "most tasks one claim takes")
    poll_max_ms: int = setting(1000, "longest a bucket goes unvisited when all were empty")
    janitors: int = setting(1, "janitor threads in this process (0: none)")
    janitor_interval_s: float = setting(1.0, "pause between janitor passes")
    metrics_port: int = setting(0, "serve Prometheus metrics on this port (0: off)")
    metrics_host: str = setting("127.0.0.1", "address the metrics endpoint listens on")
    log_format: str = setting("text", "log lines as 'text' or 'json'")
    shutdown_grace_s: float = setting(30.0, "how long running handlers may finish on shutdown")
    ack_batch: int = setting(200, "acks and nacks written in one statement at most")
    ack_flush_ms: int = setting(5, "longest an ack or nack waits to be written")
    listen: bool = setting(True, "LISTEN for enqueue notifications (PostgreSQL)")

    def __post_init__(self) -> None:
        check_positive(self, "concurrency", "processes", "claimers", "batch", "poll_max_ms",
                       "janitor_interval_s", "shutdown_grace_s", "ack_batch", "ack_flush_ms")
        if self.janitors < 0 or self.metrics_port < 0:
            raise ConfigError("janitors and metrics_port must not be negative")
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"log_format must be 'text' or 'json', got {self.log_format!r}")
