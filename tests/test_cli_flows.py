"""``shardq flow show|cancel``, run as a user would, on a real database; and a task's record
(``shardq task show``, :meth:`shardq.Client.get`) names its flow."""

from __future__ import annotations

import json
import uuid

import pytest

import shardq
from shardq.loops.resolver import resolve
from tests.helpers import claim_all, one_line_error, shardq_cli

app = shardq.App()  # its functions only name the tasks: the test's client writes the flows


@app.task
def step(n: int) -> int:
    return n


def started(client: shardq.Client,
            name: str | None = None) -> tuple[str, shardq.FlowHandle]:
    """A chain on a queue of its own: a step, a group of two, a last step; the first step
    acked and folded in, one member of the group dead (its error holds a password)."""
    queue = f"cli-flow-{uuid.uuid4().hex[:8]}"
    s = step.si(0).set(queue=queue)
    handle = client.enqueue_flow(shardq.chain(s, shardq.group(s, s), s), name=name)
    [first] = claim_all(client, queue)
    client.ack(first)
    resolve(client.statements)
    dying = claim_all(client, queue, most=1)
    client.nack(dying[0], "OSError: cannot reach postgresql://app:s3cret@db/x", dead=True)
    resolve(client.statements)
    return queue, handle


def test_flow_show_prints_state_counts_and_tasks(dsn: str, client: shardq.Client) -> None:
    queue, handle = started(client, name="nightly")
    out = shardq_cli("flow", "show", str(handle.id), "--dsn", dsn).stdout
    lines = out.splitlines()
    assert lines[0] == f"flow {handle.id}: chain 'nightly', failed"
    assert lines[1] == ("tasks: 1 waiting, 1 pending, 0 running, 1 succeeded, 1 dead, "
                        "0 cancelled")
    assert lines[2] == f"progress: [{'#' * 15}{'.' * 15}] 2 of 4 finished"
    assert f"result: task {handle.ids[3]}" in lines
    rows = {line.split()[0]: line.split()[1:] for line in lines if line[:36] in
            {str(i) for i in handle.ids}}
    assert set(rows) == {str(i) for i in handle.ids[1:]}  # the first left no result
    assert rows[str(handle.ids[3])] == ["waiting", "(2)", "0", queue, step.name]
    assert sorted(r[0] for r in (rows[str(i)] for i in handle.ids[1:3])) == ["dead", "pending"]
    assert "postgresql://app:***@db/x" in out
    assert "s3cret" not in out
    assert "--limit lists more" not in out
    one = shardq_cli("flow", "show", str(handle.id), "--limit", "1", "--dsn", dsn).stdout
    assert "(the first 1 task(s) listed: --limit lists more)" in one


def test_flow_show_json(dsn: str, client: shardq.Client) -> None:
    _, handle = started(client)
    shown = json.loads(shardq_cli("flow", "show", str(handle.id), "--json", "--dsn", dsn).stdout)
    assert (shown["id"], shown["kind"], shown["name"], shown["state"]) == (
        str(handle.id), "chain", None, "failed")
    assert shown["counts"] == {"waiting": 1, "pending": 1, "running": 0, "succeeded": 1,
                               "dead": 1, "cancelled": 0}
    assert [n["id"] for n in shown["nodes"]] == [str(i) for i in handle.ids[1:]]


def test_flow_cancel(dsn: str, client: shardq.Client) -> None:
    _, handle = started(client)
    done = shardq_cli("flow", "cancel", str(handle.id), "--dsn", dsn)
    assert done.stdout == f"cancelled 3 task(s) of flow {handle.id}\n"
    flow = client.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["cancelled"]) == ("cancelled", 3)
    again = shardq_cli("flow", "cancel", str(handle.id), "--dsn", dsn, check=False)
    assert again.returncode == 1
    assert again.stderr == (f"shardq: flow {handle.id} had ended (cancelled): nothing to "
                            "cancel\n")


@pytest.mark.parametrize("action", ["show", "cancel"])
def test_unknown_and_bad_flow_ids(dsn: str, action: str) -> None:
    unknown = uuid.uuid4()
    missing = shardq_cli("flow", action, str(unknown), "--dsn", dsn, check=False)
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"shardq: no flow {unknown} (")
    one_line_error(shardq_cli("flow", action, "not-a-uuid", "--dsn", dsn, check=False),
                   "not a flow id", "not-a-uuid")
    one_line_error(shardq_cli("flow", action, str(unknown), "--limit", "-1", "--dsn", dsn,
                              check=False), "--limit")
    one_line_error(shardq_cli("flow", "stop", str(unknown), "--dsn", dsn, check=False),
                   "invalid choice")


def test_a_tasks_record_names_its_flow(dsn: str, client: shardq.Client) -> None:
    _, handle = started(client)
    waiting = client.get(handle.ids[3])
    assert waiting is not None
    assert (waiting.state, waiting.flow_id, waiting.waits) == ("waiting", handle.id, 2)
    due = [client.get(i) for i in handle.ids[1:3]]
    assert {(t.flow_id, t.waits) for t in due if t is not None} == {(handle.id, None)}
    alone = client.get(client.enqueue("cli-alone", {}))
    assert alone is not None
    assert (alone.flow_id, alone.waits) == (None, None)
    shown = shardq_cli("task", "show", str(handle.ids[3]), "--dsn", dsn).stdout
    assert f"flow_id: {handle.id}" in shown
    assert "waits: 2" in shown
