"""The flow-control benchmark (bench/flow/) end to end in its quick mode: real worker
processes on the test server, the report and the suite's section; nothing about speed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("psutil", reason="the bench extra is not installed")
pytest.importorskip("matplotlib", reason="the bench extra is not installed")

from bench.flow import report as flow_report
from bench.flow import run as flow
from bench.flow.__main__ import main as flow_main
from bench.suite import report
from bench.suite.settings import quick_settings
from tests.conftest import ROOT


def test_the_standalone_entry_writes_its_report(server_url: str, tmp_path: Path) -> None:
    out = tmp_path / "flow.md"
    assert flow_main(["--quick", "--only", "rate", "--dsn", server_url, "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "**3. Rate `Rate(50, 1)`**" in text
    assert "`python -m bench.flow --only rate --quick`" in text
    assert "**1. Overhead.**" not in text
    goals = text.split("Goals:")[1]
    assert goals.count(" met |") + goals.count(" MISSED |") == 1


def test_the_other_measurements_record_every_arm_and_the_limit_held(server_url: str) -> None:
    records: list[dict[str, object]] = []
    flow.measure(flow.QUICK, 1, server_url, records, ("overhead", "binding", "fairness"))
    overhead = [r for r in records if r["kind"] == "overhead"]
    assert sorted(str(r["arm"]) for r in overhead) == sorted(flow.ARMS)
    assert {r["tasks"] for r in overhead} == {flow.QUICK.drain}
    (binding,) = [r for r in records if r["kind"] == "binding"]
    assert binding["tasks"] == flow.QUICK.binding_tasks
    # 48 handler slots, and neither the handlers nor the database ever saw more than 8.
    assert 1 <= int(str(binding["max_running_seen"])) <= flow.BINDING["max_running"]
    assert 1 <= int(str(binding["slots_held_max"])) <= flow.BINDING["max_running"]
    (fair,) = [r for r in records if r["kind"] == "fairness"]
    assert fair["group_b"] == 100
    section = "\n".join(report.render(records, quick_settings(), [], "python -m bench --quick",
                                      [], 1.0).splitlines())
    assert "## 13. Flow control" in section
    assert "drain with limits that never bind" in section
    assert flow_report.section([], quick_settings()) == []


def test_the_binding_limit_runs_beside_an_earlier_tree_whose_workers_run_its_code(
        server_url: str, tmp_path: Path) -> None:
    """``--base DIR``: the binding measurement runs this tree and the one in DIR in turn,
    and DIR's run is made by DIR's shardq, its worker processes included (each import
    of the copy's package leaves a mark)."""
    base = tmp_path / "base"
    for part in ("shardq", "sql"):
        shutil.copytree(ROOT / part, base / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    marks = tmp_path / "marks"
    marks.mkdir()
    with (base / "shardq" / "__init__.py").open("a", encoding="utf-8") as init:
        init.write(f"\nimport os as _os\nopen(_os.path.join({str(marks)!r}, "
                   "str(_os.getpid())), 'w').close()\n")
    records: list[dict[str, object]] = []
    flow.measure(flow.QUICK, 1, server_url, records, ("binding",), base)
    arms = [str(r["arm"]) for r in records if r["kind"] == "binding"]
    assert arms == ["this tree", f"base ({base})"]
    # The base run's runner, the `shardq consume` it started and its worker processes.
    assert len(list(marks.iterdir())) >= 2 + flow.BINDING["processes"]
    text = "\n".join(flow_report.body(records, quick=True, notes=False))
    assert f"--base {base}`" in text
    assert "÷ base" in text
