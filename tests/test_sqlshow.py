"""``shardq sql``: each statement it shows is the one the client sends, and the reference
page lists them as it shows them.

The client's own operations are stepped up to the request they make (without running
it), and that request's statement is compared with ``shardq sql show``'s.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Generator, Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

import shardq
from shardq.cli import sqlshow
from shardq.cli.main import main
from shardq.core.plan import Atomic, CopyIn, Fetch, Request
from shardq.core.statements import Statements
from shardq.flows.canvas import chain, chord
from shardq.loops import resolver
from shardq.ops import claims, durable, flow, graphs, produce, settle
from shardq.ops.flow import Control, Limits
from shardq.ops.rates import Rate
from shardq.ops.results import Kept
from tests.conftest import ROOT
from tests.helpers import claim_all

QUEUE = "sql-show"
app = shardq.App()  # its function names a flow's tasks


@app.task(queue=QUEUE)
def step(n: int) -> int:
    return n


@pytest.fixture
def held(client: shardq.Client) -> Iterator[list[shardq.Task]]:
    client.enqueue(QUEUE, {"n": 1})
    tasks = claim_all(client, QUEUE)
    yield tasks
    client.ack_many(tasks)


def first(steps: Generator[Request, Any, Any], *replies: Any) -> Request:
    """The request ``steps`` makes after being sent ``replies`` for its earlier ones."""
    request = next(steps)
    for reply in replies:
        request = steps.send(reply)
    return request


def sent(request: Request) -> bytes:
    assert isinstance(request, Fetch | CopyIn), request
    assert isinstance(request.query, bytes)
    return request.query


def turn(st: Statements, control: Control, after: str | None
         ) -> Generator[Request, Any, Any]:
    return flow.claim_turn(st, QUEUE, 0, after=after, control=control,
                             limit=sqlshow.BATCH, lease_s=None).steps()


def test_each_claim_shown_is_the_one_the_client_sends(client: shardq.Client) -> None:
    st = client.statements
    limited = Control(Limits(max_running=5))
    mixed = Control(Limits(max_running=5), grouped=True)
    group_rated = Control(Limits(rate_per_group=Rate(10)), grouped=True)
    requests = {
        "claim": first(claims.claim_bucket(st, QUEUE, 0, limit=sqlshow.BATCH,
                                           lease_s=None).steps()),
        "claim_buckets": first(claims.claim_buckets(st, QUEUE, [0, 1], limit=sqlshow.BATCH,
                                                    lease_s=None).steps()),
        "claim_limited": first(turn(st, limited, None)),
        "claim_limited_mixed": first(turn(st, mixed, None)),
        # a group's turn asks for the next group first
        "claim_limited_group": first(turn(st, mixed, ""), [("g",)]),
        "rate_take": first(turn(st, Control(Limits(rate=Rate(10))), None)),
        "group_rate_take": first(turn(st, group_rated, ""), [("g",)]),
    }
    for name, request in requests.items():
        assert sent(request) == sqlshow.STATEMENTS[name].sent("postgresql"), name


def test_each_settling_statement_shown_is_the_one_the_client_sends(
        client: shardq.Client, held: list[shardq.Task]) -> None:
    st = client.statements
    requests = {
        "ack_many": first(settle.ack(st, held).steps()),
        "ack_results": first(settle.ack(st, held, [Kept("1", None, 60.0)]).steps()),
        "nack_many": first(settle.nack(st, held, None, None, None).steps()),
        "requeue_many": first(settle.defer(st, held, None, None).steps()),
        "extend_many": first(settle.extend(st, held, 60.0).steps()),
    }
    for name, request in requests.items():
        assert sent(request) == sqlshow.STATEMENTS[name].sent("postgresql"), name


def test_each_enqueue_shown_is_the_one_the_client_sends(client: shardq.Client) -> None:
    st = client.statements
    params = produce.placement(st, QUEUE, None, None, 0, None)
    assert sent(first(produce.enqueue(st, params, {}, None, None).steps())) \
        == sqlshow.STATEMENTS["enqueue"].sent("postgresql")
    batch = first(produce.enqueue_many(st, params, [{}, {}], None, None).steps())
    assert isinstance(batch, Atomic)
    placed = batch.steps()
    assert sent(next(placed)) == sqlshow.STATEMENTS["placement_batch"].sent("postgresql")
    now = datetime.now(UTC)
    copy = placed.send([(now, 0, now, None)])
    assert sent(copy) == sqlshow.STATEMENTS["copy_tasks"].sent("postgresql")


def test_a_flows_statements_shown_are_the_ones_the_client_sends(client: shardq.Client) -> None:
    st = client.statements
    written = first(graphs.enqueue(st, chain(step.s(1), step.s()), None, keep_result_s=None,
                                   name=None).steps())
    assert isinstance(written, Atomic)
    steps = written.steps()
    next(steps)  # the flow's row
    assert sent(steps.send(None)) == sqlshow.STATEMENTS["flow_insert"].sent("postgresql")
    fold = first(resolver.fold(st).steps())
    assert isinstance(fold, Atomic)
    steps = fold.steps()
    flow_id, waiting = uuid4(), uuid4()
    requests = {"flow_pick": next(steps), "flow_take": steps.send([(flow_id, "chain")])}
    steps.send([(flow_id, datetime.now(UTC), uuid4(), "succeeded", [waiting], 1)])  # counts
    requests["flow_release"] = steps.send(None)  # of the task that waited for this one
    requests["flow_finish"] = steps.send([(QUEUE, 1, None)])
    for name, request in requests.items():
        assert sent(request) == sqlshow.STATEMENTS[name].sent("postgresql"), name


def test_a_flows_members_copied_are_shown_as_sent(client: shardq.Client) -> None:
    st = client.statements
    many = graphs.COPY_MIN
    written = first(graphs.enqueue(st, chord([step.s(n) for n in range(many)], step.s()),
                                   None, keep_result_s=None, name=None).steps())
    assert isinstance(written, Atomic)
    steps = written.steps()
    next(steps)  # the flow's row
    placed = steps.send(None)  # the members' place in line, then their COPY
    assert sent(placed) == sqlshow.STATEMENTS["placement_batch"].sent("postgresql")
    now = datetime.now(UTC)
    assert sent(steps.send([(now, 0, now, None)])) \
        == sqlshow.STATEMENTS["copy_flow_tasks"].sent("postgresql")


def test_the_janitors_requeue_shown_is_the_one_it_sends(client: shardq.Client) -> None:
    st = client.statements
    for name in ("janitor_rescue", "janitor_rescue_keyed"):
        assert st.query(name, st.config.janitor_batch) \
            == sqlshow.STATEMENTS[name].sent("postgresql")


def test_a_statement_is_shown_whole_with_its_values_named(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sql", "show", "claim_limited_group", "--dialect", "cockroachdb"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("-- claim_limited_group, as shardq sends it to cockroachdb:\n")
    statement = out.partition("\n\n")[2]
    assert "{" not in statement.replace("'{}'", "")  # every placeholder filled
    assert "%(group)s" in statement
    assert "%(queue)s" in statement
    assert "LIKE 'lease expired:%'" in statement  # as the server receives it, not %%
    assert f"<= {flow.LISTED_SLOTS}" in statement
    assert '"group_slot"' in statement
    assert '"max_running_per_group"' in statement
    assert "%(bucket)s" not in out  # a group's claim reads no bucket


def test_the_bucket_is_shown_named_in_its_engines_column(
        capsys: pytest.CaptureFixture[str]) -> None:
    column = "crdb_internal_exec_time_id_queue_status_shard_16"
    assert main(["sql", "show", "claim", "--dialect", "cockroachdb"]) == 0
    header, _, statement = capsys.readouterr().out.partition("\n\n")
    assert f'-- The bucket is the bound %(bucket)s, in column "{column}" (a schema of 16 ' \
           "buckets)." in header
    assert f'"{column}" = %(bucket)s' in statement
    assert main(["sql", "show", "claim"]) == 0
    header, _, statement = capsys.readouterr().out.partition("\n\n")
    assert '-- The bucket is the bound %(bucket)s, in column "bucket".' in header
    assert '"bucket" = %(bucket)s' in statement


def test_sql_list_names_every_statement(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["sql", "list"], ["sql", "show"]):
        assert main(argv) == 0
        names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
        assert names == list(sqlshow.STATEMENTS)
    for name in ("claim", "claim_limited", "ack_many", "ack_results", "nack_many", "enqueue",
                 "extend_many", "janitor_rescue", "rate_take"):
        assert name in sqlshow.STATEMENTS


@pytest.mark.parametrize(("argv", "said"), [
    (["sql", "show", "nothing"], "shardq: no statement 'nothing': `shardq sql list` names them\n"),
    (["sql", "show", "copy_tasks", "--dialect", "cockroachdb"],
     "shardq: copy_tasks is not sent to cockroachdb (only to postgresql)\n"),
])
def test_a_statement_not_there_is_one_line_and_status_2(
        capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    assert main(argv) == 2
    assert capsys.readouterr() == ("", said)


def test_the_reference_page_lists_each_statement_as_shown() -> None:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None
    assert spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = (ROOT / "docs" / "reference" / "sql.md").read_text()
    assert "<!-- generated: sql -->" in page
    assert "reference/sql.md" in (ROOT / "mkdocs.yml").read_text()
    generated = hooks.GENERATORS["sql"]()
    shown = 0
    for name, statement in sqlshow.STATEMENTS.items():
        for engine in statement.dialects:
            block = "\n".join(f"    {line}".rstrip()
                              for line in sqlshow.show(name, engine).splitlines())
            assert f"    ```sql\n{block}\n    ```" in generated, (name, engine)
            shown += 1
    assert generated.count("```sql") == shown


def test_durable_tasks_statements_shown_are_the_ones_the_client_sends(
        client: shardq.Client, held: list[shardq.Task]) -> None:
    st = client.statements
    [task] = held
    requests = {
        "steps_load": first(durable.load(st, task.id).steps()),
        "step_save": first(durable.save(st, task, "n", "step", "done", "1", None).steps()),
        "park_many": first(durable.park(st, [task], [durable.Parking("sleep", None)])
                           .steps()),
    }
    emit = first(durable.emit(st, {"e": 1}).steps())
    assert isinstance(emit, Atomic)
    writes = emit.steps()
    requests["event_emit"] = next(writes)
    requests["event_wake"] = writes.send([("e",)])
    fold = first(resolver.fold(st).steps())
    assert isinstance(fold, Atomic)
    steps = fold.steps()
    parent = uuid4()
    next(steps)
    steps.send([(parent, "spawn")])  # the flow of a parent's children
    steps.send([(parent, datetime.now(UTC), uuid4(), "succeeded", None, 1)])  # its events
    requests["parents_wake"] = steps.send(None)  # after their counts
    for name, request in requests.items():
        assert sent(request) == sqlshow.STATEMENTS[name].sent("postgresql"), name
