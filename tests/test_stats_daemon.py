"""The queue figures a running ``shardq consume --processes 2`` exports: the first
process samples them (and runs the janitor), the second does not."""

from __future__ import annotations

import os
import socket
import urllib.request
from pathlib import Path

import psycopg

import shardq
from shardq.worker.config import WorkerConfig
from shardq.worker.processes import child_config
from tests.apps import recorder
from tests.conftest import Databases
from tests.daemons import Daemon
from tests.helpers import free_port, wait_for

ROOT = Path(__file__).resolve().parent.parent


def test_only_the_first_process_samples() -> None:
    config = WorkerConfig(processes=3, metrics_port=9100)
    assert [child_config(config, i).sample_stats for i in range(3)] == [True, False, False]
    off = WorkerConfig(processes=2, sample_stats=False)
    assert not child_config(off, 0).sample_stats


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive TCP ports nothing listens on right now."""
    while True:
        first = free_port()
        try:
            for port in range(first + 1, first + count):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first


def scrape(port: int) -> str:
    """The metrics text on ``port``, or "" while nothing answers there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())
    except OSError:
        return ""


def sampled(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")
            or line.startswith(name + " ")]


def janitor_pass(text: str) -> float:
    (line,) = sampled(text, "shardq_janitor_last_pass_timestamp_seconds")
    return float(line.split()[-1])


def test_a_process_group_exports_the_figures_once(databases: Databases) -> None:
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(recorder.SETUP)
    with shardq.Client(url) as client:
        client.pause("work", create=True)  # the tasks stay waiting, so the figures hold still
        client.enqueue_many("work", [{"n": n} for n in range(25)])
        port = free_ports(2)  # the second process serves on the next one
        daemon = Daemon({**os.environ, "SHARDQ_DSN": url, "PYTHONPATH": str(ROOT)},
                        "tests.apps.recorder:app",
                        "--queue", "work", "--processes", "2", "--metrics-port", str(port),
                        "--slo-s", "600")
        try:
            wait_for(lambda: 'shardq_queue_available{queue="work"} 25.0' in scrape(port),
                     what="the first process's figures")
            wait_for(lambda: janitor_pass(scrape(port)) > 0, what="a janitor pass")
            first = scrape(port)
            for name in ("shardq_queue_lag_seconds", "shardq_queue_paused",
                         "shardq_queue_slo_seconds", "shardq_queue_enqueued_per_second"):
                assert sampled(first, name), name
            assert 'shardq_queue_paused{queue="work"} 1.0' in first
            wait_for(lambda: bool(scrape(port + 1)) or daemon.proc.poll() is not None,
                     what="the second process's endpoint")
            assert daemon.proc.poll() is None, daemon.output
            second = scrape(port + 1)
            assert sampled(second, "shardq_queue_available") == []
            assert janitor_pass(second) == 0  # no janitor there: never a pass
        finally:
            daemon.signal()
            code, out = daemon.wait()
            client.resume("work")
        assert code == 0, out
