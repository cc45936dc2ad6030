"""Limits from the command line and in the figures: ``shardq queue limit`` sets, shows and
clears them (one-line errors, exit 2, on bad input); ``shardq stats`` shows each limit,
its use and saturation; ``shardq doctor`` warns about a queue whose max_running is
always full."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable

import pytest

import shardq
from shardq import Limits, Rate
from shardq.cli import doctor
from shardq.cli.main import main
from shardq.ops import queuestats
from shardq.worker.config import WorkerConfig
from tests.conftest import Databases


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """The ``shardq`` command run in this process (its exit status, stdout and stderr):
    the same parser and handlers as the installed command, without a Python start each."""
    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            status = main(list(args))
        except SystemExit as exc:  # argparse's errors
            status = int(exc.code or 0)
        out, err = capsys.readouterr()
        return status, out, err

    return run


@pytest.fixture
def limit(cli: Callable[..., tuple[int, str, str]], dsn: str) -> Callable[..., str]:
    """``shardq queue limit ARGS``: its output, once it exited 0."""
    def run(*args: str) -> str:
        status, out, err = cli("queue", "limit", *args, "--dsn", dsn)
        assert status == 0, err
        return out

    return run


def test_set_show_change_and_clear(limit: Callable[..., str], client: shardq.Client) -> None:
    queue = fresh("cli-limits")
    client.enqueue(queue, {})
    shown = limit(queue, "--max-running", "8", "--rate", "100/60")
    assert f"queue {queue}: limits" in shown
    assert "max_running            8  (0 in use)" in shown
    assert "rate                   100 per 60s, burst 5" in shown
    assert client.limits(queue).limits == Limits(8, None, Rate(100, 60.0, 5))
    # Options change only the limits given; the others stay.
    limit(queue, "--max-running-per-group", "2", "--rate-per-group", "5/1/3")
    assert client.limits(queue).limits == Limits(8, 2, Rate(100, 60.0, 5), Rate(5, 1.0, 3))
    limit(queue, "--rate", "none")
    assert client.limits(queue).limits == Limits(8, 2, None, Rate(5, 1.0, 3))
    # No option: shown, not changed; --json for scripts.
    as_json = json.loads(limit(queue, "--json"))
    assert as_json == {"queue": queue, "max_running": 8, "max_running_per_group": 2,
                       "rate": None, "rate_per_group": {"count": 5, "period_s": 1.0, "burst": 3},
                       "running": 0, "running_most_group": 0}
    # --clear removes every limit not given with it.
    limit(queue, "--clear", "--max-running", "3")
    assert client.limits(queue).limits == Limits(3)
    assert limit(queue, "--clear").strip() == f"queue {queue}: no limits"
    assert not client.limits(queue).limits.any


def test_shown_use_counts_the_running_tasks(limit: Callable[..., str],
                                            client: shardq.Client) -> None:
    queue = fresh("cli-use")
    client.set_limits(queue, max_running=2, max_running_per_group=1, create=True)
    client.enqueue_many(queue, [{"n": n} for n in range(3)], group="tenant-a")
    assert len(client.claim(queue, limit=5)) == 1  # the group's limit
    shown = limit(queue)
    assert "max_running            2  (1 in use)" in shown
    assert "max_running_per_group  1  (the busiest group holds 1)" in shown


@pytest.mark.parametrize(("args", "says"), [
    (["--max-running", "0"], "argument --max-running: the value must be between 1 and"),
    (["--max-running-per-group", "1000001"], "must be between 1 and 1,000,000"),
    (["--max-running", "many"], "argument --max-running: the value must be a whole number or none"),
    (["--rate", "10"], "argument --rate: the value must be COUNT/PERIOD_S[/BURST]"),
    (["--rate", "10/0"], "argument --rate: the value's period must be a positive number"),
    (["--rate-per-group", "10/1/0"], "count and burst must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(cli: Callable[..., tuple[int, str, str]], dsn: str,
                                          args: list[str], says: str) -> None:
    status, out, err = cli("queue", "limit", fresh("cli-bad"), *args, "--dsn", dsn)
    assert (status, out) == (2, "")
    [line] = err.splitlines()
    assert line.startswith("shardq: ")
    assert says in line


def test_an_unknown_queue_needs_create(cli: Callable[..., tuple[int, str, str]],
                                       limit: Callable[..., str], dsn: str,
                                       client: shardq.Client) -> None:
    queue = fresh("cli-typo")
    status, _, err = cli("queue", "limit", queue, "--max-running", "2", "--dsn", dsn)
    assert status == 2
    [line] = err.splitlines()
    assert "add --create" in line
    assert not client.limits(queue).limits.any
    limit(queue, "--max-running", "2", "--create")
    assert client.limits(queue).limits == Limits(2)
    limit(queue, "--max-running", "4")  # a queue with limits is known from then on
    assert client.limits(queue).limits == Limits(4)


def test_stats_show_limits_use_and_saturation(cli: Callable[..., tuple[int, str, str]],
                                              dsn: str, client: shardq.Client) -> None:
    queue, free = fresh("stats-limited"), fresh("stats-free")
    client.set_limits(queue, max_running=1, rate=Rate(100, 60), create=True)
    client.enqueue_many(queue, [{"n": 1}, {"n": 2}])
    client.enqueue(free, {})
    st = client.statements
    before = st.perform(queuestats.stats(st, queue))
    assert (before.max_running, before.running, before.saturated) == (1, 0, False)
    [held] = client.claim(queue, limit=5)
    figures = json.loads(cli("stats", "--json", "--dsn", dsn)[1])
    mine = figures[queue]
    assert (mine["max_running"], mine["running"], mine["saturated"]) == (1, 1, True)
    assert mine["rate"] == {"count": 100, "period_s": 60.0, "burst": 5}
    assert (mine["max_running_per_group"], mine["running_most_group"]) == (None, None)
    other = figures[free]
    assert (other["max_running"], other["running"], other["rate"], other["saturated"]) == \
        (None, None, None, False)
    table = cli("stats", "--dsn", dsn)[1]
    [row] = [line for line in table.splitlines() if queue in line]
    assert "saturated" in row
    assert "run 1/1 · rate 100/60s" in row
    client.ack(held)
    after = st.perform(queuestats.stats(st, queue))
    assert (after.running, after.available, after.saturated) == (0, 1, False)


def test_doctor_warns_about_an_always_saturated_limit(
        cli: Callable[..., tuple[int, str, str]], databases: Databases) -> None:
    url = databases.create()
    with shardq.Client(url) as client:
        client.set_limits("mail", max_running=1, create=True)
        client.enqueue_many("mail", [{"n": 1}, {"n": 2}])
        [held] = client.claim("mail", limit=5, lease_s=600)
        seen = doctor.saturation(client)
        assert (seen.check, seen.ok) == ("limits", False)
        assert "saturated in all 4 samples" in seen.seen
        assert "mail (1/1 running, 1 due waiting)" in seen.seen
        assert "shardq queue limit mail --max-running N" in seen.advice
        status, out, _ = cli("doctor", "--dsn", url)
        assert status == 1
        [line] = [x for x in out.splitlines() if x.startswith("WARN  limits: ")]
        assert "mail (1/1 running" in line
        client.ack(held)  # a slot is free again: the waiting task is held back no more
        assert doctor.saturation(client).ok


def test_doctor_is_silent_without_saturation(databases: Databases) -> None:
    url = databases.create()
    with shardq.Client(url) as client:
        assert doctor.saturation(client) == doctor.Finding(
            "limits", True, "no queue has a max_running limit")
        client.set_limits("mail", max_running=2, create=True)
        client.enqueue_many("mail", [{"n": 1}, {"n": 2}])
        client.claim("mail", limit=1, lease_s=600)  # one of two slots: room left
        seen = doctor.saturation(client)
        assert seen.ok, seen
        assert "none saturated" in seen.seen
        assert {f.check: f.ok for f in doctor.examine(client, WorkerConfig())}["limits"]


def test_top_shows_the_limits_column_only_when_a_queue_has_limits(
        client: shardq.Client) -> None:
    from rich.console import Console

    from shardq.cli import table

    queue, free = fresh("top-limited"), fresh("top-free")
    client.enqueue(free, {})
    st = client.statements

    def screen(names: list[str]) -> str:
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(table.table(st.perform(queuestats.many(st, names))))
        return console.export_text()

    assert "limits" not in screen([free])
    client.set_limits(queue, max_running=1, max_running_per_group=1, rate=Rate(50, 1, 20),
                      create=True)
    client.enqueue_many(queue, [{"n": 1}, {"n": 2}], group="tenant-a")
    client.claim(queue, limit=5)
    shown = screen([queue, free])
    assert "limits" in shown
    [row] = [line for line in shown.splitlines() if queue in line]
    assert "saturated" in row
    assert "run 1/1 · group 1/1 · rate 50/1s burst 20" in row


def test_metrics_show_limits_their_use_and_saturation(client: shardq.Client) -> None:
    from prometheus_client import generate_latest

    from shardq.worker.metrics import Metrics

    queue = fresh("metrics-limited")
    client.set_limits(queue, max_running=1, rate_per_group=Rate(30, 60), create=True)
    client.enqueue_many(queue, [{"n": 1}, {"n": 2}])
    [held] = client.claim(queue, limit=5)
    st = client.statements
    metrics = Metrics()
    metrics.record(st.perform(queuestats.stats(st, queue)))

    def series() -> dict[str, float]:
        text = generate_latest(metrics.registry).decode()
        return {line.split("{")[0]: float(line.rsplit(" ", 1)[1])
                for line in text.splitlines() if f'queue="{queue}"' in line}

    seen = series()
    assert (seen["shardq_queue_max_running"], seen["shardq_queue_limit_running"],
            seen["shardq_queue_limit_saturated"]) == (1.0, 1.0, 1.0)
    assert seen["shardq_queue_rate_per_group_per_second"] == 0.5
    for absent in ("shardq_queue_max_running_per_group", "shardq_queue_running_most_group",
                   "shardq_queue_rate_per_second"):
        assert absent not in seen
    client.ack(held)
    client.set_limits(queue, create=True)  # no limits: their series go, saturation reads 0
    metrics.record(st.perform(queuestats.stats(st, queue)))
    seen = series()
    assert "shardq_queue_max_running" not in seen
    assert "shardq_queue_rate_per_group_per_second" not in seen
    assert seen["shardq_queue_limit_saturated"] == 0.0
