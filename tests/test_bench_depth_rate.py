"""The benchmark suite's depth-target and fixed-rate sections: goals, ratios and the load
average from stored records, no server."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("matplotlib")

from bench.suite import depth, rate, report
from bench.suite.settings import Settings

SETTINGS = Settings(depth_concurrency=(16, 64), fixed_rate=500.0, idle_rate=20.0)


def _depth(variant: str, concurrency: int, rep: int, jobs_per_s: float) -> dict[str, Any]:
    return {"scenario": "depth", "variant": variant, "concurrency": concurrency, "rep": rep,
            "rate": jobs_per_s, "jobs": int(jobs_per_s), "min_depth": 1500,
            "worker_cpu_ms_per_1k": 40.0, "pg_cpu_ms_per_1k": 60.0, "worker_cpu_pct": 50.0,
            "pg_cpu_pct": 70.0, "load_1m": 1.5}


def _rate(load: str, variant: str, rep: int, p99: float, cpu: float) -> dict[str, Any]:
    per_s = 500.0 if load == "fixed" else 20.0
    return {"scenario": "rate", "load": load, "variant": variant, "rep": rep, "rate": per_s,
            "achieved_rate": per_s, "sent": 100, "handled": 100, "p50_ms": 2.0,
            "p95_ms": 4.0, "p99_ms": p99, "worker_cpu_pct": cpu, "pg_cpu_pct": cpu,
            "xacts_per_task": 2.0}


def test_depth_goals_take_the_worst_pair_of_each_repetition() -> None:
    # Rep 1 ran on a machine ten times slower: the ratios within each rep are alike.
    records = []
    for rep, scale in ((0, 1.0), (1, 0.1)):
        for variant, at_16, at_64 in (("shardq-sync", 8000, 16000), ("shardq-async", 9000, 20000),
                                      ("pgqueuer", 4000, 8000),
                                      ("procrastinate-async", 1000, 1000),
                                      ("procrastinate-sync", 500, 500)):
            records += [_depth(variant, 16, rep, at_16 * scale),
                        _depth(variant, 64, rep, at_64 * scale)]
    goals = {str(row[0]): row[1:] for row in depth.targets(records, SETTINGS)}
    [ahead_16] = [v for k, v in goals.items() if k.startswith("depth, 16 workers")]
    assert ahead_16 == ["2.00x (shardq-sync ÷ pgqueuer)", "met"]
    # the median of 16,000 and 1,600 jobs/s: short of the goal
    assert goals["depth, 64 workers, shardq-sync: ≥ 15,000 jobs/s"] == [
        "8,800 jobs/s (0.59x the goal)", "MISSED"]
    text = "\n".join(depth.section(records, SETTINGS))
    assert "| 64 | pgqueuer |" in text
    assert "| 2.00x | 2.50x |" in text
    assert depth.section([], SETTINGS) == []
    assert depth.targets([], SETTINGS) == []


def test_rate_goals_judge_each_shardq_arm() -> None:
    records = [_rate("fixed", "shardq-sync", 0, 8.0, 12.0),
               _rate("idle", "shardq-sync", 0, 9.0, 1.0),
               _rate("fixed", "shardq-async", 0, 11.0, 16.0),
               _rate("idle", "shardq-async", 0, 10.0, 1.0),
               _rate("fixed", "pgqueuer", 0, 16.0, 10.0)]
    goals = {str(row[0]): row[1:] for row in rate.targets(records, SETTINGS)}
    assert goals["rate 500/s, shardq-sync: pickup p99 ≤ 10 ms"] == ["8.0 ms", "met"]
    assert goals["rate 500/s, shardq-async: consumer CPU ≤ 15 % of a core"] == ["16.0 %", "MISSED"]
    assert goals["idle (20/s), shardq-async: pickup p99 < 10 ms"] == ["10.0 ms", "MISSED"]
    assert "| fixed | pgqueuer | 500 | 500 | 2 | 4 | 16 | 0.50x |" in "\n".join(
        rate.section(records, SETTINGS))


def test_the_report_gives_the_load_average_of_the_suite_and_of_each_scenario() -> None:
    records = [_depth("shardq-sync", 16, 0, 8000),
               {"scenario": "load", "step": "depth", "rep": 0, "start": 0.5, "end": 1.75},
               {"scenario": "load", "step": "suite", "rep": 0, "start": 0.25, "end": 2.0}]
    text = report.render(records, SETTINGS, [], "python -m bench", [], 1.0)
    assert "- 1-minute load average: 0.25 when the suite started, 2.00 when it ended" in text
    assert ("## 16. Throughput at a held queue depth (handlers that take 1 ms)\n\n"
            "1-minute load average at the start → the end of the scenario: depth 0.50 → 1.75."
            in text)
    assert "## 17." not in text
