"""The benchmark suite's fleet sections: side-by-side ratios from stored records, no server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from bench.suite import fleet_report, report
from bench.suite.settings import Settings


def _ceiling(buckets: int, clients: int, rep: int, rate: float) -> dict[str, Any]:
    return {"scenario": "fleet_ceiling", "buckets": buckets, "clients": clients, "rep": rep,
            "rate": rate, "active": 1.0, "idx_tup_per_task": 2.0, "idx_pages_per_task": 3.0,
            "waits": {"CPU": 0.75, "Lock:transactionid": 0.25}}


def _worker(buckets: int, processes: int, rep: int, rate: float) -> dict[str, Any]:
    return {"scenario": "fleet_worker", "buckets": buckets, "processes": processes, "rep": rep,
            "rate": rate}


def test_ceiling_ratios_pair_runs_of_one_repetition() -> None:
    # Rep 0 ran on a fast machine, rep 1 on a slow one: each rep's 16 ÷ 1 is 2.
    records = [_ceiling(1, 8, 0, 1000.0), _ceiling(16, 8, 0, 2000.0),
               _ceiling(1, 8, 1, 100.0), _ceiling(16, 8, 1, 200.0)]
    settings = Settings(fleet_buckets=(1, 16), fleet_clients=(8,))
    text = "\n".join(fleet_report.ceiling_section(records, settings))
    assert "| 16 | 1,100 | 2.00x |" in text
    assert "| 1 | 550 | 1.00x |" in text
    assert "CPU 75%, Lock:transactionid 25%" in text


def test_worker_section_ratios_by_bucket_and_process_count() -> None:
    records = [_worker(1, 1, 0, 100.0), _worker(16, 1, 0, 150.0),
               _worker(1, 2, 0, 180.0), _worker(16, 2, 0, 300.0)]
    settings = Settings(worker_buckets=(1, 16), worker_processes=(1, 2))
    text = "\n".join(fleet_report.worker_section(records, settings))
    assert "| 1 | 100 | 150 | 1.50x | 1.00x | 1.00x |" in text
    assert "| 2 | 180 | 300 | 1.67x | 1.80x | 2.00x |" in text


def test_report_renders_only_the_fleet_sections_it_has_records_for(tmp_path: Path) -> None:
    records = [_ceiling(1, 8, 0, 1000.0)]
    text = report.render(records, Settings(fleet_buckets=(1,), fleet_clients=(8,)), [],
                         "python -m bench", [], 1.0)
    assert "## 7. Fleet ceiling" in text
    assert "## 8. Worker processes" not in text
    assert [p.name for p in fleet_report.draw(records, Settings(), tmp_path)] == [
        "fleet_ceiling.png"]
