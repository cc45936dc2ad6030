"""The chaos scenarios as tests (see :mod:`tests.chaos.scenarios`).

The quick ones run with the suite; ``chaos_long`` ones need ``SHARDQ_CHAOS_LONG=1``.
A failure's message lists every broken invariant and the figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import Stage
from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy
from tests.chaos.scenarios import SCENARIOS, Scenario

pytestmark = pytest.mark.timeout(420)


def _param(scenario: Scenario) -> Any:
    marks: list[Any] = []
    if scenario.long:
        marks.append(pytest.mark.chaos_long)
    return pytest.param(scenario, id=scenario.name, marks=marks)


@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS])
def test_scenario(scenario: Scenario, chaos_pg: ThrowawayPostgres,
                  chaos_log_pg: ThrowawayPostgres, proxy: Proxy, tmp_path: Path) -> None:
    if not chaos_pg.running:  # an earlier scenario failed during an outage
        chaos_pg.start()
    stage = Stage(chaos_pg, proxy, tmp_path, chaos_log_pg)
    try:
        figures = scenario.run(stage)
    finally:
        stage.close()
    assert figures.passed, (
        f"{scenario.name}: {'; '.join(figures.violations)} | enqueued {figures.enqueued}, "
        f"distinct run {figures.distinct_run}, duplicates {figures.duplicates}, "
        f"lost {figures.lost}, stuck {figures.stuck}, dead {figures.dead}, "
        f"ids on two rows {figures.two_rows} | {'; '.join(figures.notes)}")
