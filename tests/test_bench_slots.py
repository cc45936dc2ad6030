"""The benchmark suite's slot-scaling section: goals and ratios from stored records, no server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from bench.suite import report, slot_scaling
from bench.suite.settings import Settings


def _run(tree: str, kind: str, concurrency: int, rep: int, rate: float) -> dict[str, Any]:
    return {"scenario": "slots", "tree": tree, "kind": kind, "sleep_ms": 1,
            "concurrency": concurrency, "rep": rep, "rate": rate, "tasks": int(rate),
            "cpu_ms_per_1k": 50.0}


SETTINGS = Settings(slots_concurrency=(16, 256), slots_sleep_ms=(1,), slots_base="/tmp/old")


def test_goals_pair_runs_of_one_repetition() -> None:
    # Rep 1 ran on a machine ten times slower: the ratios within each rep are alike.
    records = [_run("now", "sync", 16, 0, 1000.0), _run("now", "sync", 256, 0, 900.0),
               _run("now", "async", 16, 0, 1200.0), _run("now", "async", 256, 0, 1600.0),
               _run("now", "sync", 16, 1, 100.0), _run("now", "sync", 256, 1, 90.0),
               _run("now", "async", 16, 1, 120.0), _run("now", "async", 256, 1, 160.0)]
    goals = {str(row[0]): row[1:] for row in slot_scaling.targets(records, SETTINGS)}
    never_slower = next(v for k, v in goals.items() if k.startswith("sync 1 ms: never"))
    assert never_slower == ["0.90x", "MISSED"]  # 900 ÷ 1000 in each rep
    assert next(v for k, v in goals.items() if k.startswith("async 1 ms: never")) == [
        "1.33x", "met"]
    assert next(v for k, v in goals.items() if "async ≥ sync" in k) == ["1.20x", "met"]
    assert goals["1 ms: async at 256 slots ≥ 1.5x sync at 16"] == ["1.60x", "met"]


def test_the_section_compares_the_trees_and_draws_one_plot(tmp_path: Path) -> None:
    records = [_run("now", "async", 16, 0, 3000.0), _run("base", "async", 16, 0, 1000.0),
               _run("now", "async", 256, 0, 6000.0), _run("base", "async", 256, 0, 1500.0)]
    text = "\n".join(slot_scaling.section(records, SETTINGS))
    assert "| 1 ms | async | this ÷ base | 3.00x | 4.00x |" in text
    assert "--slots-base /tmp/old" in text
    assert [p.name for p in slot_scaling.draw(records, SETTINGS, tmp_path)] == ["slots.png"]
    assert "## 12. Scaling with handler slots" in report.render(
        records, SETTINGS, [], "python -m bench", [], 1.0)
    assert slot_scaling.section([], SETTINGS) == []
