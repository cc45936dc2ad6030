"""The Prometheus alert rules and the Grafana dashboard in deploy/: the rules pass
``promtool test rules`` (a firing and a silent case each), and both name only metrics a
worker exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from shardq.worker.metrics import Metrics

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
RULES = DEPLOY / "prometheus" / "shardq-rules.yml"
RULE_TESTS = DEPLOY / "prometheus" / "shardq-rules-test.yml"
DASHBOARD = DEPLOY / "grafana" / "shardq.json"


def exported() -> set[str]:
    """Every series name a worker's registry exports (counters with _total, histograms
    with _bucket, _sum and _count)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                "gauge": ("",)}
    return {family.name + suffix for family in Metrics().registry.collect()
            for suffix in suffixes[family.type]}


def named(expr: str) -> set[str]:
    return set(re.findall(r"\bshardq_[a-z_]+", expr))


def rules() -> list[dict[str, str]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_rules_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                            capture_output=True, text=True, timeout=120, check=False)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_rule_has_a_firing_and_a_silent_case() -> None:
    cases: dict[str, set[bool]] = {}
    for group in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in group["alert_rule_test"]:
            cases.setdefault(case["alertname"], set()).add(bool(case["exp_alerts"]))
    assert cases == {rule["alert"]: {True, False} for rule in rules()}


def test_rules_and_dashboard_name_exported_metrics() -> None:
    names = exported()
    for rule in rules():
        assert named(rule["expr"]), rule["alert"]
        assert named(rule["expr"]) <= names, rule["alert"]
    exprs = [target["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"]
             for target in panel["targets"]]
    used = set().union(*(named(e) for e in exprs))
    assert used <= names, used - names
    # Every queue figure the sampler exports is on the dashboard.
    assert {n for n in names if n.startswith("shardq_queue_")} <= used
