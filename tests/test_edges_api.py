"""The client API's edges: pausing a queue nobody has heard of (a typo) is refused, and
a task call that does not fit the task function's signature is refused at enqueue."""

from __future__ import annotations

import inspect
import itertools
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core.arguments import Arguments
from tests.conftest import Databases
from tests.helpers import claim_all, query, scalar, shardq_cli

pytestmark = [pytest.mark.both_clients, pytest.mark.behaviour]

QUEUE = "edges-calls"
TASK = "tests.test_edges_api.send_email"
SHOWN = f"{TASK}(to, subject, body='', *, cc=None)"

app = shardq.App()


@app.task(queue=QUEUE)
def send_email(to: str, subject: str, body: str = "", *, cc: str | None = None) -> None:
    """The README's task, with a default and a keyword-only argument."""


@app.task(queue=QUEUE)
def anything(*args: Any, **kwargs: Any) -> None:
    """Takes every call."""


@app.task(queue=QUEUE)
def strict(first: int, /, *rest: int, flag: bool, **extra: Any) -> None:
    """A positional-only, a variadic, a required keyword-only and a **kwargs parameter."""


builtin = app.task(max, queue=QUEUE, name="max")  # no readable signature: takes any call


@app.periodic(every_s=60, queue=QUEUE)
def tick() -> None:
    """A periodic task: no arguments."""


def queue_rows(dsn: str) -> list[tuple[Any, ...]]:
    return query(dsn, "SELECT name, paused_at IS NOT NULL FROM shardq.queues ORDER BY name")


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- 7: pausing a queue shardq does not know -----------------------------------------------------


@pytest.fixture
def own(databases: Databases) -> str:
    """A fresh database with two queues: 'emails' (waiting tasks) and 'reports' (a dead one)."""
    url = databases.create()
    with shardq.Client(url) as client:
        client.enqueue_many("emails", [{"n": n} for n in range(3)])
        client.enqueue("reports", {}, max_attempts=1)
        (task,) = claim_all(client, "reports")
        client.nack(task, "boom")
    return url


def test_pausing_an_unknown_queue_is_refused_with_the_known_queues(own: str) -> None:
    with shardq.Client(own) as client:
        with pytest.raises(shardq.UnknownQueue) as refused:
            client.pause("emials")
        assert str(refused.value) == (
            "no queue named 'emials': it has no tasks, is not paused and was not active in "
            "the last hour (known queues: emails, reports); to pause it before its first "
            "task, pass create=True")
        assert refused.value.known == ["emails", "reports"]
        assert isinstance(refused.value, shardq.InvalidTask)
        with pytest.raises(shardq.UnknownQueue, match="no queue named 'emials'"):
            client.resume("emials")
        assert queue_rows(own) == []
        assert sorted(client.queues()) == ["emails", "reports"]


def test_create_pauses_a_queue_before_its_first_task(own: str) -> None:
    with shardq.Client(own) as client:
        since = client.pause("later", create=True)
        assert queue_rows(own) == [("later", True)]
        assert client.queues()["later"]["paused"] is True
        assert client.pause("later") == since  # paused, so known: no create needed
        client.enqueue("later", {})
        assert claim_all(client, "later") == []
        assert client.resume("later") is True
        assert queue_rows(own) == []  # the row goes: nothing is left to list
        assert len(claim_all(client, "later")) == 1


def test_a_resumed_queue_without_tasks_is_no_longer_listed(own: str) -> None:
    with shardq.Client(own) as client:
        client.pause("later", create=True)
        assert client.resume("later") is True
        assert "later" not in client.queues()
        with pytest.raises(shardq.UnknownQueue):
            client.resume("later")
        with pytest.raises(shardq.UnknownQueue):
            client.pause("later")
        assert queue_rows(own) == []


def test_queues_with_tasks_or_recent_work_are_known(own: str) -> None:
    with shardq.Client(own) as client:
        client.enqueue("done", {})
        client.ack_many(claim_all(client, "done"))  # no task left, but counted this hour
        for queue in ("emails", "reports", "done"):  # waiting, dead, recently active
            assert client.resume(queue) is False  # known, and not paused
            client.pause(queue)
        assert queue_rows(own) == [("done", True), ("emails", True), ("reports", True)]


def test_rows_left_by_older_releases(own: str) -> None:
    # Older releases kept a row per queue ever paused, set to NULL on resume.
    with psycopg.connect(own, autocommit=True) as conn:
        conn.execute("INSERT INTO shardq.queues VALUES ('typo', now()), ('once', NULL)")
    with shardq.Client(own) as client:
        assert client.queues()["typo"]["paused"] is True
        assert "once" not in client.queues()
        with pytest.raises(shardq.UnknownQueue):
            client.pause("once")
        assert client.resume("typo") is True
        with pytest.raises(shardq.UnknownQueue):
            client.resume("once")
        assert queue_rows(own) == []
        assert sorted(client.queues()) == ["emails", "reports"]


def test_cli_pause_and_resume_refuse_unknown_queues(own: str) -> None:
    typo = shardq_cli("queue", "pause", "emials", dsn=own, check=False)
    assert (typo.returncode, typo.stdout) == (2, "")
    assert typo.stderr == (
        "shardq: no queue named 'emials': it has no tasks, is not paused and was not active "
        "in the last hour (known queues: emails, reports); to pause it before its first "
        "task, add --create\n")
    assert queue_rows(own) == []
    created = shardq_cli("queue", "pause", "later", "--create", dsn=own, check=False)
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("queue later paused since ")
    assert queue_rows(own) == [("later", True)]
    resumed = shardq_cli("queue", "resume", "later", dsn=own, check=False)
    assert (resumed.returncode, resumed.stdout) == (0, "queue later resumed\n")
    assert queue_rows(own) == []
    again = shardq_cli("queue", "resume", "later", dsn=own, check=False)
    assert again.returncode == 2
    assert again.stderr.startswith("shardq: no queue named 'later': ")
    assert again.stderr.count("\n") == 1
    idle = shardq_cli("queue", "resume", "emails", dsn=own, check=False)
    assert (idle.returncode, idle.stdout) == (0, "queue emails was not paused\n")


def test_a_long_list_of_known_queues_is_cut() -> None:
    names = [f"q{n:02}" for n in range(25)]
    message = str(shardq.UnknownQueue("x", names))
    assert "q00, q01" in message
    assert "q19 and 5 more)" in message
    assert "q20" not in message


# -- 8: task calls checked against the function's signature ---------------------------------------


@pytest.fixture
def calls(client: shardq.Client, dsn: str) -> str:
    """The module's app on the emptied shared database; returns its URL for row counts."""
    app.use_client(client)
    return dsn


def rows(dsn: str) -> int:
    count: int = scalar(dsn, "SELECT count(*) FROM shardq.tasks WHERE queue = %s", (QUEUE,))
    return count


BAD_CALLS = [
    (("only-to",), {}, "missing a required argument: 'subject'"),
    (("ada@example.org",), {"cc": "x"}, "missing a required argument: 'subject'"),
    ((), {"subject": "hi"}, "missing a required argument: 'to'"),
    (("a", "b", "c", "d"), {}, "too many positional arguments"),
    (("a", "hi"), {"bcc": "x"}, "got an unexpected keyword argument 'bcc'"),
    (("a",), {"to": "b", "subject": "hi"}, "multiple values for argument 'to'"),
]


@pytest.mark.parametrize(("args", "kwargs", "problem"), BAD_CALLS)
def test_a_call_that_does_not_fit_is_refused(calls: str, args: tuple[Any, ...],
                                             kwargs: dict[str, Any], problem: str) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    options: list[dict[str, Any]] = [{}, {"delay_s": 30}, {"run_at": later}, {"key": "k"},
                                     {"priority": 60}]
    for chosen in options:
        with pytest.raises(shardq.InvalidTask) as refused:
            send_email.enqueue(*args, **chosen, **kwargs)
        assert str(refused.value) == f"{SHOWN}: {problem}"
    assert rows(calls) == 0


def test_a_refused_call_in_the_callers_transaction_writes_nothing(calls: str) -> None:
    with psycopg.connect(calls) as conn:
        with pytest.raises(shardq.InvalidTask):
            send_email.enqueue("only-to", conn=conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert rows(calls) == 0


@pytest.mark.parametrize("keys", [None, ["a", "b", "c"]])
def test_one_bad_call_in_a_batch_writes_none(calls: str, keys: list[str] | None) -> None:
    batch: list[tuple[Any, ...] | dict[str, Any]] = [
        ("a@x.org", "hi"), {"to": "b@x.org", "subject": "yo"}, ("only-to",)]
    with pytest.raises(shardq.InvalidTask) as refused:
        send_email.enqueue_many(batch, keys=keys, delay_s=5)
    assert str(refused.value) == (
        f"call 2 of the batch: {SHOWN}: missing a required argument: 'subject'")
    with pytest.raises(shardq.InvalidTask, match=r"call 0 of the batch: .*'cc2'"):
        send_email.enqueue_many([{"to": "a", "subject": "b", "cc2": "c"}])
    assert rows(calls) == 0


def test_calls_that_fit_are_enqueued_as_given(calls: str) -> None:
    send_email.enqueue("a@x.org", "hi")
    send_email.enqueue("a@x.org", "hi", "body", cc="c@x.org", delay_s=1)
    send_email.enqueue(to="a@x.org", subject="hi")
    send_email.enqueue_many([("a@x.org", "hi"), ("a@x.org", "hi", "body"),
                             {"to": "a@x.org", "subject": "hi", "cc": None}])
    anything.enqueue()
    anything.enqueue(1, 2, x=3)
    anything.enqueue_many([(), (1,), {"any": "thing"}])
    strict.enqueue(1, flag=True)
    strict.enqueue(1, 2, 3, flag=False, more=4)
    builtin.enqueue(3, 4)
    tick.enqueue()
    assert rows(calls) == 15
    [(args, kwargs)] = query(calls, "SELECT payload->'args', payload->'kwargs' FROM shardq.tasks "
                                   "WHERE payload->>'task' = %s AND payload->'kwargs' ? 'more'",
                            (strict.name,))
    assert (args, kwargs) == ([1, 2, 3], {"flag": False, "more": 4})


def test_shapes_of_other_signatures_are_refused(calls: str) -> None:
    refusals: list[tuple[Callable[[], object], str]] = [
        (lambda: strict.enqueue(1), "missing a required argument: 'flag'"),
        (lambda: strict.enqueue(first=1, flag=True),
         "'first' parameter is positional only, but was passed as a keyword"),
        (lambda: strict.enqueue_many([{"flag": True}]), "missing a required argument: 'first'"),
        (lambda: tick.enqueue(1), "too many positional arguments"),
        (lambda: tick.enqueue(slot="x"), "got an unexpected keyword argument 'slot'"),
    ]
    for call, problem in refusals:
        with pytest.raises(shardq.InvalidTask, match=problem):
            call()
    assert rows(calls) == 0


# The checker's shortcuts decide the common calls without Signature.bind: they must agree
# with it on every shape.
def _pos_kw(a: int, b: int = 0) -> None: ...
def _kw_only(*, a: int, b: int = 0) -> None: ...
def _pos_only(a: int, /, b: int = 0, **kw: Any) -> None: ...
def _var(a: int, *args: int, c: int = 0, **kw: Any) -> None: ...
def _none() -> None: ...


SHAPES: list[Callable[..., None]] = [_pos_kw, _kw_only, _pos_only, _var, _none]
ARGS = [(), (1,), (1, 2), (1, 2, 3)]
KWARGS: list[dict[str, Any]] = [{}, {"a": 1}, {"b": 2}, {"a": 1, "b": 2}, {"c": 3},
                                {"a": 1, "z": 9}, {"z": 9}]


@pytest.mark.parametrize("fn", SHAPES, ids=lambda f: f.__name__)
def test_the_checks_agree_with_the_signature(fn: Callable[..., None]) -> None:
    arguments = Arguments(fn.__name__, fn)
    for args, kwargs in itertools.product(ARGS, KWARGS):
        try:
            inspect.signature(fn).bind(*args, **kwargs)
            fits = True
        except TypeError:
            fits = False
        try:
            arguments.check(args, kwargs)
            accepted = True
        except shardq.InvalidTask:
            accepted = False
        assert accepted == fits, (fn.__name__, args, kwargs)
