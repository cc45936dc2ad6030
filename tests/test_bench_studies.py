"""Every benchmark study's ``--quick`` run against the test server: it finishes and writes
its report, stamped with its command and commit; nothing about speed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from bench.suite.cli import SCENARIOS as SUITE_SCENARIOS
from tests.tcp_postgres import tcp_server

pytest.importorskip("psutil", reason="the bench extra is not installed")
pytest.importorskip("matplotlib", reason="the bench extra is not installed")

ROOT = Path(__file__).resolve().parents[1]

# study: (module, extra arguments, the report it writes)
STUDIES: dict[str, tuple[str, list[str], str]] = {
    "claim_throughput": ("bench.claim_throughput", [], "claim_throughput-quick.md"),
    "chords": ("bench.chords", [], "chords-quick.md"),
    "cold_start": ("bench.cold_start", [], "cold_start-quick.md"),
    "durable": ("bench.durable", [], "durable-quick.md"),
    "daemon drain": ("bench.daemon", ["drain", "--tasks", "500"], "daemon_drain-quick.md"),
    "daemon pickup": ("bench.daemon", ["pickup", "--tasks", "5"], "daemon_pickup-quick.md"),
    "dashboard": ("bench.dashboard", [], "dashboard-quick.md"),
    "drain_ab": ("bench.drain_ab", ["--tree", str(ROOT)], "drain_ab-quick.md"),
    "enqueue_ab": ("bench.enqueue_ab", [], "enqueue_ab-quick.md"),
    "fleet_locks": ("bench.fleet_locks", [], "fleet_locks-quick.md"),
    "flow": ("bench.flow", ["--only", "rate,fairness"], "flow-quick.md"),
    "history": ("bench.history", [], "history_cost-quick.md"),
    "keys": ("bench.keys", [], "keys-quick.md"),
    "lease_model": ("bench.lease_model", [], "lease_model-quick.md"),
    "ordering": ("bench.ordering", [], "ordering-quick.md"),
    "otel_cost": ("bench.otel_cost", [], "otel_cost-quick.md"),
    "prefetch_split": ("bench.prefetch_split", [], "prefetch_split-quick.md"),
    "reshard": ("bench.reshard", [], "reshard-quick.md"),
    "slot_engine": ("bench.slot_engine", ["--tree", str(ROOT)], "slot_engine-quick.md"),
    "soak": ("bench.soak", [], "soak-quick.md"),
    "spark insert": ("bench.spark.insert", ["--rows", "2000"], "spark_insert-quick.md"),
    "spark stream": ("bench.spark.stream", [], "spark_stream-quick.md"),
    "stats_cost": ("bench.stats_cost", [], "stats_cost-quick.md"),
    # The suite (python -m bench): every scenario small but the three that are studies of
    # their own above (flow, chords, durable: the same code, run once here, not twice).
    "suite": ("bench", ["--scenarios", ",".join(
        s for s in SUITE_SCENARIOS if s not in {"flow", "chords", "durable"})],
              "suite/report-quick.md"),
    "throughput_cost": ("bench.throughput_cost", [], "throughput_cost-quick.md"),
    "versions": ("bench.versions", ["--base", "HEAD"], "versions-quick.md"),
}
NO_SERVER = {"slot_engine", "soak"}  # no database; the soak's own configured server
SPARK = {"spark insert", "spark stream"}


@pytest.mark.slow  # 24 processes, some with Spark: the benchmark harness's own pass
@pytest.mark.timeout(1600)  # past the suite's and Spark's own bounds below
@pytest.mark.parametrize("study", sorted(STUDIES))
def test_the_quick_run_writes_its_stamped_report(study: str, server_url: str,
                                                 tmp_path: Path) -> None:
    module, extra, report = STUDIES[study]
    if study in SPARK and not (shutil.which("java") and Path(
            "/usr/share/java/postgresql.jar").exists()):
        pytest.skip("Spark needs Java and the PostgreSQL JDBC jar")
    with ExitStack() as stack:
        # JDBC needs a TCP address: the embedded default listens on a unix socket.
        url = stack.enter_context(tcp_server()) if study in SPARK else server_url
        server = [] if study in NO_SERVER else ["--dsn", url]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SHARDQ_BENCH_RESULTS": str(tmp_path)}
        # Bounds for a 2-core box that runs CI's three lanes at once (a load of 6-11): the
        # suite takes about 3.5 minutes on a quiet box, a Spark study about 1.5.
        done = subprocess.run([sys.executable, "-m", module, "--quick", *extra, *server],
                              cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=1500 if study == "suite" else 900 if study in SPARK else 300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / report).read_text(encoding="utf-8")
    command, commit = text.splitlines()[:2]
    assert command.startswith(f"command: `python -m {module} --quick")
    assert "--dsn URL" in command or not server  # the server's URL is not written down
    assert commit.startswith("commit: ")
    assert commit != "commit: unknown"
    if study == "suite":  # the scenarios the default run adds last ran too
        assert "## 16. Throughput at a held queue depth" in text
        assert "## 17. Latency and cost at a fixed rate" in text
