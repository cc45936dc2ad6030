"""The benchmark suite's async section: ratios and goals from stored records, no server."""

from __future__ import annotations

from typing import Any

from bench.suite import async_enqueue
from bench.suite.settings import Settings


def _run(kind: str, arm: str, rep: int, rate: float, lag: float = 1.0,
         batch: int = 1) -> dict[str, Any]:
    return {"scenario": async_enqueue.SCENARIO, "kind": kind, "batch": batch, "arm": arm,
            "rep": rep, "rate": rate, "cpu_ms_per_1k": 5.0, "lag_max_ms": lag,
            "lag_p99_ms": lag / 2, "seconds": 0.25}


def test_batched_ratios_pair_runs_of_one_repetition_and_judge_the_goals() -> None:
    # Rep 0 on a fast machine (2x), rep 1 on a slow one (2.5x): the ratio is the median of
    # the two, not the ratio of the medians (55,000 / 27,000).
    records = [_run("batched", "shardq-async", 0, 100_000.0, batch=100),
               _run("batched", "pgqueuer", 0, 50_000.0, batch=100),
               _run("batched", "shardq-async", 1, 10_000.0, batch=100),
               _run("batched", "pgqueuer", 1, 4_000.0, batch=100),
               _run("stall", "shardq-async", 0, 1.0, lag=4.0),
               _run("stall", "shardq-async", 1, 1.0, lag=30.0),
               _run("stall", "idle", 0, 1.0, lag=2.0)]
    settings = Settings(async_batches=(100,))
    text = "\n".join(async_enqueue.section(records, settings))
    assert "| batches of 100 | PGQueuer (asyncpg pool) | 27,000 | 2.25x | 5 | 1 |" in text
    assert "| shardq AsyncClient | 17 | 30 | 8.5 | 250 |" in text
    assert "| no enqueue: the coroutines only sleep | 2 | 2 | 1 | 250 |" in text
    assert "≥ 1.5x PGQueuer's | 2.25x | met |" in text
    assert "≤ 10 ms | 17.0 ms | MISSED |" in text
    assert "`python -m bench --scenarios async --resume --reps 2`" in text


def test_the_section_is_left_out_when_the_scenario_did_not_run() -> None:
    assert async_enqueue.section([], Settings()) == []
