"""Durable tasks across a killed worker, with ``shardq consume`` processes: a step that
``kill -9``s its worker on the first attempt runs again, the steps before it do not, and
a parent replayed after its children were spawned spawns none twice."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import shardq
from tests.daemons import ROOT, Daemon
from tests.helpers import wait_for

pytestmark = [pytest.mark.behaviour]

APP = '''
import os
import signal
from pathlib import Path

import shardq

app = shardq.App()


def log():
    return Path(os.environ["DURABLE_LOG"])


def note(label, value):
    with log().open("a") as f:
        f.write(label + "\\n")
        f.flush()
        os.fsync(f.fileno())
    return value


def second(x):
    note("step2", None)
    marker = log().with_suffix(".killed")
    if not marker.exists():
        marker.write_text("once")
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-task
    return x * 10


@app.task(queue="crash", keep_result_s=600)
def three(x):
    ctx = shardq.current()
    a = ctx.step("one", note, "step1", x)
    b = ctx.step("two", second, a)
    c = ctx.step("three", note, "step3", b + 1)
    return [a, b, c]


@app.task(queue="kids", keep_result_s=600)
def child(i):
    note(f"child{i}", None)
    return i


@app.task(queue="crash", keep_result_s=600)
def parent(n):
    ctx = shardq.current()
    ids = [ctx.spawn(f"c{i}", child.s(i)) for i in range(n)]
    note("spawned", None)
    marker = log().with_suffix(".killed")
    if not marker.exists():
        marker.write_text("once")
        os.kill(os.getpid(), signal.SIGKILL)  # dies after spawning, before the wait
    return sum(ctx.wait("all", ids, timeout_s=300))
'''


def daemon_env(tmp_path: Path, dsn: str) -> dict[str, str]:
    """A daemon's environment: the app's module on the path, short leases and backoff so
    that a dead worker's task comes back within seconds."""
    return {**os.environ, "SHARDQ_DSN": dsn, "DURABLE_LOG": str(tmp_path / "log.txt"),
            "SHARDQ_LEASE_S": "2", "SHARDQ_BACKOFF_BASE_S": "0.2",
            "SHARDQ_JANITOR_INTERVAL_S": "0.2",
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}


def lines(tmp_path: Path) -> Counter[str]:
    path = tmp_path / "log.txt"
    return Counter(path.read_text().split()) if path.exists() else Counter()


@pytest.fixture
def crash_app(tmp_path: Path, client: shardq.Client) -> Iterator[Any]:
    """The app's module, imported here too (its tasks enqueue through ``client``)."""
    (tmp_path / "crashapp.py").write_text(APP)
    sys.path.insert(0, str(tmp_path))
    try:
        import crashapp  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    crashapp.app.use_client(client)
    yield crashapp
    sys.modules.pop("crashapp", None)


def run_past_a_kill(tmp_path: Path, dsn: str) -> None:
    """A daemon that dies of its task (it consumes the queue ``crash`` only: a child
    running beside its parent would die with it, and run again, as any task does)."""
    env = daemon_env(tmp_path, dsn)
    first = Daemon(env, "crashapp:app", "--queue", "crash")
    try:
        code = first.proc.wait(timeout=60)
    except Exception:
        first.kill()
        raise AssertionError(first.output) from None
    else:
        assert code == -9, first.output
    finally:
        first.kill()
    assert (tmp_path / "log.killed").exists()


def test_a_step_that_kills_its_worker_runs_again_and_the_others_once(
        tmp_path: Path, dsn: str, client: shardq.Client, crash_app: Any) -> None:
    task_id = crash_app.three.enqueue(4)
    run_past_a_kill(tmp_path, dsn)
    second = Daemon(daemon_env(tmp_path, dsn), "crashapp:app")
    try:
        got = client.result(task_id, wait_s=60)
    finally:
        second.stop()
    assert got.value == [4, 40, 41], second.output
    assert lines(tmp_path) == Counter({"step1": 1, "step2": 2, "step3": 1})


def test_a_parent_replayed_after_spawning_spawns_each_child_once(
        tmp_path: Path, dsn: str, client: shardq.Client, crash_app: Any) -> None:
    n = 100
    task_id = crash_app.parent.enqueue(n)
    run_past_a_kill(tmp_path, dsn)
    second = Daemon(daemon_env(tmp_path, dsn), "crashapp:app")
    try:
        got = client.result(task_id, wait_s=120)
        wait_for(lambda: sum(lines(tmp_path)[f"child{i}"] for i in range(n)) >= n,
                 timeout=30, what="every child to run")
    finally:
        second.stop()
    assert got.value == sum(range(n)), second.output
    seen = lines(tmp_path)
    assert seen["spawned"] >= 2  # killed once, then replayed (and woken by its children)
    assert {seen[f"child{i}"] for i in range(n)} == {1}  # each child ran once
    children = client.flow(task_id)  # the parent's children are a flow of its id
    assert children is not None
    assert (children.kind, children.tasks, children.counts["succeeded"]) == ("spawn", n, n)
