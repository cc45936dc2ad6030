"""The dashboard's task page and JSON record of a durable task parked by a real worker:
its steps with their values (hidden with the payloads), what it waits for and until
when, its attempts labelled parked and woken, and its cancel button."""

from __future__ import annotations

import html
import json
import uuid
from urllib.parse import urlencode

import pytest

import shardq
from shardq.ops.durable import NEVER
from shardq.web import DashboardConfig, create_app
from tests.durable_views_kit import QUEUE, app, approval, napper, park
from tests.web import TOKEN, call, log_in, serving

pytestmark = [pytest.mark.server, pytest.mark.behaviour]


@pytest.fixture
def blocking(client: shardq.Client) -> shardq.Client:
    """The test's Client, for the handlers' enqueues too."""
    app.use_client(client)
    return client


def test_the_task_page_lists_steps_and_the_wait(blocking: shardq.Client, dsn: str) -> None:
    order = uuid.uuid4().hex
    task_id, forever = approval.enqueue(order), approval.enqueue(f"{order}-2", None)
    park(dsn, blocking, {task_id: "event", forever: "event"})
    info = blocking.get(task_id)
    assert info is not None
    assert info.waiting_for is not None
    assert info.waiting_for.until is not None
    with serving(create_app(blocking)) as url:
        page = html.unescape(call(f"{url}/tasks/{task_id}").text)
        record = call(f"{url}/api/tasks/{task_id}").json()
        endless = html.unescape(call(f"{url}/tasks/{forever}").text)
    assert '<td id="state">parked</td>' in page
    waiting = page.split('<td id="waiting">')[1].split("</td>")[0]
    assert waiting.startswith(f"event <code>approved:{order}</code>, until <time ")
    assert info.waiting_for.until.strftime("%Y-%m-%d %H:%M:%S") in waiting
    steps = page.split('<table id="steps">')[1].split("</table>")[0]
    assert [row.split("<code>")[1].split("</code>")[0]
            for row in steps.split("<tr>")[2:]] == ["price", "cool-off", "approval"]
    assert f'"order": "{order}"' in steps
    assert '"total": 42' in steps
    assert f'"event": "approved:{order}"' in steps
    outcomes = page.split('<table id="attempts">')[1]
    assert "<td>parked</td>" in outcomes
    assert "<td>woken, parked</td>" in outcomes
    # The JSON record holds the same.
    assert record["state"] == "parked"
    assert record["waiting_for"] == {"reason": "event", "event": f"approved:{order}",
                                     "until": info.waiting_for.until.isoformat()}
    assert next((s["name"], s["value"]) for s in record["steps"]) == (
        "price", {"order": order, "total": 42})
    # A wait without a deadline says so, and shows no wake-up time.
    assert "no deadline" in endless.split('<td id="waiting">')[1].split("</td>")[0]
    # NEVER (the year 9999) is shown nowhere; "9999" alone can be a time's microseconds.
    assert str(NEVER.year) + "-" not in endless


def test_hidden_payloads_hide_step_values(blocking: shardq.Client, dsn: str) -> None:
    order = uuid.uuid4().hex
    task_id = approval.enqueue(order)
    park(dsn, blocking, {task_id: "event"})
    with serving(create_app(blocking, DashboardConfig(hide_payloads=True))) as url:
        page = html.unescape(call(f"{url}/tasks/{task_id}").text)
        record = call(f"{url}/api/tasks/{task_id}").json()
    size = len(json.dumps({"order": order, "total": 42}, separators=(",", ":")))
    steps = page.split('<table id="steps">')[1].split("</table>")[0]
    assert "total" not in page  # the step's value, shown nowhere
    assert f"<td>{size} bytes</td>" in steps
    assert "payloads are" in page
    assert [sorted(s) for s in record["steps"]] == [
        ["at", "kind", "name", "state", "until", "value_bytes"]] * 3
    assert record["steps"][0]["value_bytes"] == size
    assert "total" not in str(record)


def test_a_parked_task_can_be_cancelled_from_its_page(blocking: shardq.Client,
                                                      dsn: str) -> None:
    task_id = napper.enqueue(uuid.uuid4().hex)
    park(dsn, blocking, {task_id: "sleep"})
    with serving(create_app(blocking, token=TOKEN)) as url:
        me = log_in(url, TOKEN)
        session = me.cookie
        page = call(f"{url}/tasks/{task_id}", cookie=session).text
        assert 'id="cancel"' in page
        form = urlencode({"csrf": me.csrf, "queue": QUEUE}).encode()
        done = call(f"{url}/actions/tasks/{task_id}/cancel", "POST", form=form,
                    cookie=session)
    assert done.status == 303
    assert blocking.get(task_id) is None
