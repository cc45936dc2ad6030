"""A flow on the dashboard, over HTTP from a real uvicorn on a real database: its page (state,
progress, tasks, the link from each task's page), its JSON, and its cancellation through
the API (bearer token) and the page's form (session and CSRF field)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest

import shardq
from shardq.loops.resolver import resolve
from shardq.web import DashboardConfig, create_app
from tests.helpers import claim_all
from tests.web import TOKEN, call, log_in, serving

pytestmark = pytest.mark.behaviour

app = shardq.App()  # its functions only name the tasks: the test's client writes the flows


@app.task
def step(n: int) -> int:
    return n


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def site(timed: shardq.Client) -> Iterator[str]:
    with serving(create_app(timed, token=TOKEN)) as url:
        yield url


def started(client: shardq.Client, queue: str, name: str | None = "nightly <report>"
            ) -> shardq.FlowHandle:
    """A chain on ``queue``: one step, a group of two, one more; its first step acked and
    folded in, then one member of the group dead: the flow has failed, one task waits."""
    s = step.si(0).set(queue=queue)
    handle = client.enqueue_flow(shardq.chain(s, shardq.group(s, s), s), name=name)
    [first] = claim_all(client, queue)
    client.ack(first)
    resolve(client.statements)
    dying = claim_all(client, queue, most=1)
    client.nack(dying[0], "ValueError: <no such user>", dead=True)
    resolve(client.statements)
    return handle


def test_flow_page_shows_state_progress_and_tasks(site: str, timed: shardq.Client) -> None:
    queue = fresh("page")
    handle = started(timed, queue)
    page = call(f"{site}/flows/{handle.id}")
    assert page.status == 200
    text = page.text
    assert '<td id="kind">chain</td>' in text
    assert "nightly &lt;report&gt;" in text
    assert "<report>" not in text
    assert re.search(r'id="state"[^>]*>failed<', text)
    for state, n in (("waiting", 1), ("pending", 1), ("running", 0), ("succeeded", 1),
                     ("dead", 1), ("cancelled", 0)):
        assert f'<b data-field="{state}">{n}</b>' in text, state
    assert 'aria-valuemax="4" aria-valuenow="2"' in text
    assert "2 of 4 task(s) finished (50%)" in text
    assert '<span class="succeeded" data-share="25.00"' in text
    assert '<span class="dead" data-share="25.00"' in text
    rows = re.findall(r'<tr data-task="([0-9a-f-]+)">(.*?)</tr>', text, re.S)
    # The first step succeeded without keeping a result (acked by hand): only counted.
    assert [r[0] for r in rows] == [str(i) for i in handle.ids[1:]]
    states = [re.sub(r"<[^>]+>", "", re.search(r'data-field="state">(.*?)</td>', r[1], re.S)
                     .group(1)).strip() for r in rows]  # type: ignore[union-attr]
    assert sorted(states[:2]) == ["dead", "pending"]
    assert states[2] == "waiting (for 2)"
    assert "ValueError: &lt;no such user&gt;" in text
    assert f'href="{site}/tasks/{handle.ids[3]}"' in text
    assert f'href="{site}/queues/{queue}"' in text
    assert "Retrying it from its queue" in text
    assert 'id="cancel-flow"' not in text  # not logged in
    figures = call(f"{site}/fragments/flows/{handle.id}").text
    assert '<b data-field="dead">1</b>' in figures
    assert "<html" not in figures


def test_task_page_links_its_flow_and_a_flow_id_finds_the_flow(site: str,
                                                               timed: shardq.Client) -> None:
    handle = started(timed, fresh("linked"))
    waiting = call(f"{site}/tasks/{handle.ids[3]}").text
    assert f'<a id="flow" href="{site}/flows/{handle.id}">' in waiting
    assert "(waits for 2 of its tasks)" in waiting
    assert "its place in line (released once what it waits for succeeded)" in waiting
    alone = timed.enqueue(fresh("alone"), {})
    assert 'id="flow"' not in call(f"{site}/tasks/{alone}").text
    # The search box takes a flow's id too: the task page sends it on.
    found = call(f"{site}/tasks?{urlencode({'id': str(handle.id)})}")
    moved = call(found.headers["location"])
    assert (moved.status, moved.headers["location"]) == (303, f"{site}/flows/{handle.id}")
    assert call(f"{site}/flows/{uuid.uuid4()}").status == 404
    bad = call(f"{site}/flows/not-a-flow")
    assert (bad.status, "not a flow id" in bad.text) == (400, True)


def test_flow_api_gives_state_counts_progress_and_tasks(site: str,
                                                        timed: shardq.Client) -> None:
    handle = started(timed, fresh("api"), name=None)
    reply = call(f"{site}/api/flows/{handle.id}")
    assert reply.status == 200
    flow = reply.json()
    assert (flow["id"], flow["kind"], flow["name"], flow["state"]) == (
        str(handle.id), "chain", None, "failed")
    assert flow["counts"] == {"waiting": 1, "pending": 1, "running": 0, "succeeded": 1,
                              "dead": 1, "cancelled": 0}
    assert flow["progress"] == {"finished": 2, "total": 4}
    assert flow["result_id"] == str(handle.ids[3])
    assert [n["id"] for n in flow["nodes"]] == [str(i) for i in handle.ids[1:]]
    dead = [n for n in flow["nodes"] if n["state"] == "dead"]
    assert [n["error"] for n in dead] == ["ValueError: <no such user>"]
    assert flow["nodes"][2]["waits"] == 2
    assert len(call(f"{site}/api/flows/{handle.id}?limit=1").json()["nodes"]) == 1
    for limit in ("x", "-1", "10001"):
        refused = call(f"{site}/api/flows/{handle.id}?limit={limit}")
        assert (refused.status, "limit" in refused.json()["error"]) == (400, True)
    assert call(f"{site}/api/flows/{uuid.uuid4()}").status == 404
    assert "not a flow id" in call(f"{site}/api/flows/nope").json()["error"]


def test_flow_cancel_through_the_api_needs_the_token(site: str, timed: shardq.Client) -> None:
    handle = started(timed, fresh("api-cancel"))
    url = f"{site}/api/flows/{handle.id}/cancel"
    assert call(url, "POST").status == 401
    assert call(url, "POST", token="x" * 32).status == 403
    assert timed.flow(handle.id).state == "failed"  # type: ignore[union-attr]
    done = call(url, "POST", token=TOKEN)
    assert done.status == 200
    assert done.json()["count"] == 3  # the dead one, the one due, the one waiting
    flow = timed.flow(handle.id)
    assert flow is not None
    assert (flow.state, flow.counts["cancelled"], flow.nodes) == ("cancelled", 3, [])
    assert all(timed.get(i) is None for i in handle.ids)
    again = call(url, "POST", token=TOKEN).json()
    assert (again["count"], "had ended" in again["message"]) == (0, True)
    assert call(f"{site}/api/flows/{uuid.uuid4()}/cancel", "POST", token=TOKEN).status == 404


def test_flow_cancel_form_needs_the_session_and_the_csrf_field(site: str,
                                                               timed: shardq.Client) -> None:
    handle = started(timed, fresh("form"))
    me = log_in(site, TOKEN)
    session = me.cookie
    page = call(f"{site}/flows/{handle.id}", cookie=session).text
    assert 'id="cancel-flow"' in page
    assert f'value="{me.csrf}"' in page
    url = f"{site}/actions/flows/{handle.id}/cancel"
    form = urlencode({"csrf": me.csrf}).encode()
    assert call(url, "POST", form=form).status == 401  # no session
    forged = urlencode({"csrf": "0" * 64}).encode()
    assert call(url, "POST", form=forged, cookie=session).status == 403
    assert timed.flow(handle.id).state == "failed"  # type: ignore[union-attr]
    done = call(url, "POST", form=form, cookie=session)
    assert done.status == 303
    assert done.headers["location"].startswith(f"{site}/flows/{handle.id}?done=")
    shown = call(done.headers["location"], cookie=session).text
    assert "cancelled: 3 task(s) that had not finished" in shown
    assert re.search(r'id="state"[^>]*>cancelled<', shown)
    assert 'id="cancel-flow"' not in shown  # it ended: nothing to cancel
    assert 'id="cancelled-at"' in shown


def test_read_only_dashboards_serve_no_flow_cancel(timed: shardq.Client) -> None:
    handle = started(timed, fresh("readonly"))
    with serving(create_app(timed, DashboardConfig(read_only=True))) as url:
        assert call(f"{url}/flows/{handle.id}").status == 200
        assert call(f"{url}/api/flows/{handle.id}/cancel", "POST",
                    token=TOKEN).status in (404, 405)
        assert call(f"{url}/actions/flows/{handle.id}/cancel", "POST").status in (404, 405)
        assert "cancel-flow" not in call(f"{url}/flows/{handle.id}").text
    assert timed.flow(handle.id).state == "failed"  # type: ignore[union-attr]
