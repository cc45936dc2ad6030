"""The dashboard's pause until a time and redrive of dead letters: the JSON API and the
queue page's forms."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

import shardq
from shardq.web import create_app
from tests.helpers import claim_all
from tests.web import TOKEN, call, log_in, serving

pytestmark = pytest.mark.behaviour

LONG_S = 1000 * 86400.0  # beyond other tests' manual clocks (see test_pause_until.py)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def site(timed: shardq.Client) -> Iterator[str]:
    """A dashboard with the token, on the test's (manually clocked) client."""
    with serving(create_app(timed, token=TOKEN)) as url:
        yield url


def bury(client: shardq.Client, queue: str, n: int, error: str) -> None:
    client.enqueue_many(queue, [{"n": i} for i in range(n)])
    tasks = claim_all(client, queue)
    client.nack_many(tasks, [error] * len(tasks), dead=[True] * len(tasks))


def test_api_pause_until(site: str, timed: shardq.Client, clock: shardq.ManualClock) -> None:
    queue = fresh("until")
    timed.enqueue(queue, {})
    url = f"{site}/api/queues/{queue}/pause"
    until = clock.now() + timedelta(seconds=LONG_S)
    assert call(url, "POST", {"until": until.isoformat()}).status == 401  # no token
    done = call(url, "POST", {"until": until.isoformat()}, token=TOKEN)
    assert done.status == 200
    assert (done.json()["count"], until.isoformat() in done.json()["message"]) == (1, True)
    figures = call(f"{site}/api/queues/{queue}").json()["stats"]
    assert (figures["paused"], figures["paused_until"]) == (True, until.isoformat())
    listed = call(f"{site}/api/queues").json()["queues"]
    assert [q["paused_until"] for q in listed if q["queue"] == queue] == [until.isoformat()]
    naive = call(url, "POST", {"until": "2031-01-01T09:00:00"}, token=TOKEN)
    assert (naive.status, "time zone" in naive.json()["error"]) == (400, True)
    past = call(url, "POST", {"until": clock.now().isoformat()}, token=TOKEN)
    assert (past.status, "a time to come" in past.json()["error"]) == (400, True)
    assert call(url, "POST", {"when": "now"}, token=TOKEN).status == 400
    assert call(url, "POST", token=TOKEN).status == 200  # no body: open-ended
    figures = call(f"{site}/api/queues/{queue}").json()["stats"]
    assert (figures["paused"], figures["paused_until"]) == (True, None)


def test_api_redrive_counts_then_redrives(site: str, timed: shardq.Client,
                                          clock: shardq.ManualClock) -> None:
    queue = fresh("redrive")
    bury(timed, queue, 3, "ConnectionError: refused")
    clock.advance(600)
    bury(timed, queue, 2, "ValueError: bad row")
    url = f"{site}/api/dead/redrive"
    wanted = {"queue": queue, "error": "connectionerror", "older_than_s": 300}
    assert call(url, "POST", wanted).status == 401
    counted = call(url, "POST", {**wanted, "dry_run": True}, token=TOKEN).json()
    assert counted == {"message": f"would redrive 3 dead task(s) of {queue}", "count": 3,
                       "more": False}
    assert timed.stats(queue)["dead"] == 5
    assert call(url, "POST", {**wanted, "newer_than_s": 400}, token=TOKEN).json()["count"] == 0
    done = call(url, "POST", wanted, token=TOKEN).json()
    assert done == {"message": f"redrove 3 dead task(s) of {queue}", "count": 3, "more": False}
    assert (timed.stats(queue)["available"], timed.stats(queue)["dead"]) == (3, 2)
    for bad in ({"error": "x"}, {"queue": queue, "dry_run": "yes"},
                {"queue": queue, "older_than_s": "soon"}, {"queue": queue, "limit": 5}):
        assert call(url, "POST", bad, token=TOKEN).status == 400, bad
    assert timed.stats(queue)["dead"] == 2


def test_page_forms_pause_until_and_redrive(site: str, timed: shardq.Client,
                                            clock: shardq.ManualClock) -> None:
    queue = fresh("forms")
    bury(timed, queue, 2, "SMTP 550")
    bury(timed, queue, 1, "other")
    me = log_in(site, TOKEN)
    session = me.cookie
    page = call(f"{site}/queues/{queue}", cookie=session).text
    assert 'id="pause-form"' in page
    assert 'id="redrive-form"' in page
    assert "<script" not in page.split('id="redrive-form"')[1].split("</form>")[0]
    until = clock.now() + timedelta(seconds=LONG_S)
    paused = call(f"{site}/actions/queues/{queue}/pause", "POST", cookie=session,
                  form=urlencode({"csrf": me.csrf, "until": until.isoformat()}).encode())
    assert paused.status == 303
    assert timed.stats(queue)["paused_until"] == until.isoformat()
    shown = call(f"{site}/queues/{queue}").text
    assert f"paused until {until:%Y-%m-%d %H:%M:%S} UTC" in shown
    assert f"paused until {until:%Y-%m-%d %H:%M:%S} UTC" in call(f"{site}/").text
    fields = {"csrf": me.csrf, "queue": queue, "error": "smtp", "older_than_s": "",
              "newer_than_s": "3600"}
    url = f"{site}/actions/dead/redrive"
    assert call(url, "POST", form=urlencode(fields).encode()).status == 401  # no session
    counted = call(url, "POST", cookie=session,
                   form=urlencode({**fields, "dry_run": "1"}).encode())
    assert counted.status == 303
    back = parse_qs(urlsplit(counted.headers["location"]).query)
    assert back == {"done": [f"would redrive 2 dead task(s) of {queue}"], "error": ["smtp"],
                    "newer_than_s": ["3600"]}
    assert timed.stats(queue)["dead"] == 3
    refilled = call(counted.headers["location"], cookie=session).text
    assert 'name="error" size="20" placeholder="anything" value="smtp"' in refilled
    done = call(url, "POST", cookie=session, form=urlencode(fields).encode())
    assert parse_qs(urlsplit(done.headers["location"]).query)["done"] == [
        f"redrove 2 dead task(s) of {queue}"]
    assert timed.stats(queue)["dead"] == 1
