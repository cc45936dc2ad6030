"""The dashboard's JSON API and pages over HTTP, served by a real uvicorn on a real database:
figures, task lists, a task's record, the token on actions, read-only, hidden payloads,
mounting, and the bounded actions."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import shardq
from shardq.web import DashboardConfig, create_app
from shardq.web.actions import ACTION_ROWS
from shardq.web.auth import COOKIE
from tests.helpers import bucket_of, claim_all, free_port, wait_for
from tests.web import OPENER, TOKEN, Reply, call, log_in, serving

pytestmark = pytest.mark.behaviour


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def site(timed: shardq.Client) -> Iterator[str]:
    """A dashboard with the token, on the test's (manually clocked) client."""
    with serving(create_app(timed, token=TOKEN)) as url:
        yield url


def test_queues_api_gives_each_queues_figures(site: str, timed: shardq.Client) -> None:
    queue = fresh("figures")
    timed.enqueue_many(queue, [{"n": n} for n in range(7)])
    timed.enqueue(queue, {"later": True}, delay_s=60)
    reply = call(f"{site}/api/queues")
    assert reply.status == 200
    assert reply.headers["server-timing"].startswith("app;dur=")
    [figures] = [q for q in reply.json()["queues"] if q["queue"] == queue]
    assert (figures["available"], figures["scheduled"], figures["locked"]) == (7, 1, 0)
    assert "available" in figures["exact"]


def test_queue_api_lists_tasks_in_line_running_and_dead(site: str, timed: shardq.Client,
                                                        clock: shardq.ManualClock) -> None:
    queue = fresh("lists")
    first = timed.enqueue(queue, {"n": 0})
    clock.advance(1)
    middle = timed.enqueue_many(queue, [{"n": n} for n in range(1, 4)])
    clock.advance(1)
    last = timed.enqueue(queue, {"n": 4})
    later = timed.enqueue(queue, {"n": 5}, delay_s=30)
    # A claim takes the oldest due task of one bucket: the first task, then one of the
    # middle ones (each is older than the last).
    [running] = timed.claim_bucket(queue, bucket_of(first), limit=1, lease_s=45)
    assert running.id == first
    [dying] = timed.claim_bucket(queue, bucket_of(middle[0]), limit=1)
    assert dying.id in middle
    timed.nack(dying, "ValueError: no such user", dead=True)
    page = call(f"{site}/api/queues/{queue}").json()
    assert [t["id"] for t in page["running"]] == [str(first)]
    assert page["running"][0]["lease_token"] == str(running.lease_token)
    assert page["oldest_waiting"][0]["payload"]["n"] in (1, 2, 3)  # the head moved on
    assert page["newest_waiting"][0]["id"] == str(last)
    assert [t["id"] for t in page["next_scheduled"]] == [str(later)]
    assert [t["last_error"] for t in page["dead"]] == ["ValueError: no such user"]
    assert page["stats"]["dead"] == 1
    assert len(page["throughput"]) == 60
    assert sum(m["enqueued"] for m in page["throughput"]) == 6


def test_task_api_gives_the_record_or_404_or_400(site: str, timed: shardq.Client) -> None:
    task_id = timed.enqueue(fresh("one"), {"to": "ada@example.org"})
    record = call(f"{site}/api/tasks/{task_id}").json()
    assert record["payload"] == {"to": "ada@example.org"}
    assert record["state"] == "available"
    assert call(f"{site}/api/tasks/{uuid.uuid4()}").status == 404
    bad = call(f"{site}/api/tasks/not-a-uuid")
    assert bad.status == 400
    assert "error" in bad.json()


def test_api_actions_need_the_bearer_token(site: str, timed: shardq.Client) -> None:
    queue = fresh("guarded")
    timed.enqueue(queue, {})  # a queue with no task cannot be paused
    none = call(f"{site}/api/queues/{queue}/pause", "POST")
    assert none.status == 401
    assert none.headers["www-authenticate"] == "Bearer"
    assert call(f"{site}/api/queues/{queue}/pause", "POST", token="x" * 32).status == 403
    assert queue not in timed.paused()
    done = call(f"{site}/api/queues/{queue}/pause", "POST", token=TOKEN)
    assert done.status == 200
    assert queue in timed.paused()
    assert call(f"{site}/api/queues/{queue}/resume", "POST", token=TOKEN).json()["count"] == 1
    assert queue not in timed.paused()


def test_purge_is_bounded_and_says_more_remain(site: str, timed: shardq.Client) -> None:
    queue = fresh("purge")
    timed.enqueue_many(queue, [{"n": n} for n in range(ACTION_ROWS + 200)])
    first = call(f"{site}/api/queues/{queue}/purge", "POST", token=TOKEN).json()
    assert (first["count"], first["more"]) == (ACTION_ROWS, True)
    second = call(f"{site}/api/queues/{queue}/purge", "POST", token=TOKEN).json()
    assert (second["count"], second["more"]) == (200, False)
    assert timed.stats(queue)["available"] == 0


def kill(client: shardq.Client, queue: str, n: int) -> list[str]:
    client.enqueue_many(queue, [{"n": i} for i in range(n)])
    tasks = claim_all(client, queue)
    client.nack_many(tasks, ["boom"] * len(tasks), dead=[True] * len(tasks))
    return [str(t.id) for t in tasks]


def test_dead_letters_retry_and_purge_by_id_and_by_queue(site: str,
                                                         timed: shardq.Client) -> None:
    queue = fresh("dead")
    ids = kill(timed, queue, 5)
    retried = call(f"{site}/api/dead/retry", "POST", {"ids": ids[:2]}, token=TOKEN).json()
    assert retried["count"] == 2
    purged = call(f"{site}/api/dead/purge", "POST", {"ids": ids[2:3]}, token=TOKEN).json()
    assert purged["count"] == 1
    rest = call(f"{site}/api/dead/retry", "POST", {"queue": queue}, token=TOKEN).json()
    assert (rest["count"], rest["more"]) == (2, False)
    figures = timed.stats(queue)
    assert (figures["available"], figures["dead"]) == (4, 0)
    both = call(f"{site}/api/dead/purge", "POST", {"queue": queue, "ids": ids}, token=TOKEN)
    assert both.status == 400
    assert call(f"{site}/api/dead/purge", "POST", {"what": 1}, token=TOKEN).status == 400


def test_cancel_through_the_api(site: str, timed: shardq.Client) -> None:
    task_id = timed.enqueue(fresh("cancel"), {})
    done = call(f"{site}/api/tasks/{task_id}/cancel", "POST", token=TOKEN).json()
    assert done["count"] == 1
    assert timed.get(task_id) is None


def test_pages_render_and_escape(site: str, timed: shardq.Client) -> None:
    queue = fresh("pages")
    [task_id] = kill(timed, queue, 1)
    timed.retry_dead([task_id])
    [task] = timed.claim(queue, limit=1)
    timed.nack(task, "<script>alert(1)</script>", dead=True)
    home = call(f"{site}/")
    assert home.status == 200
    assert queue in home.text
    assert f"Buckets: {timed.bucket_count} buckets (generation " in home.text
    page = call(f"{site}/queues/{queue}")
    assert page.status == 200
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    task_page = call(f"{site}/tasks/{task_id}").text
    assert "enqueued" in task_page
    assert "last put back in line" in task_page
    assert call(f"{site}/tasks/{uuid.uuid4()}").status == 404
    found = call(f"{site}/tasks?{urlencode({'id': task_id})}")
    assert (found.status, found.headers["location"].endswith(f"/tasks/{task_id}")) == (303, True)
    svg = call(f"{site}/chart.svg?{urlencode({'queue': queue})}")
    assert svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.text.startswith("<svg")


def test_forms_need_the_session_and_the_csrf_field(site: str, timed: shardq.Client) -> None:
    queue = fresh("forms")
    timed.enqueue(queue, {})  # a queue with no task cannot be paused
    mine = log_in(site, TOKEN)
    url = f"{site}/actions/queues/{queue}/pause"
    form = urlencode({"csrf": mine.csrf}).encode()
    assert call(url, "POST", form=form).status == 401  # no session
    forged = urlencode({"csrf": "0" * 64}).encode()
    assert call(url, "POST", form=forged, cookie=mine.cookie).status == 403
    other = log_in(site, TOKEN)  # each session has a CSRF token of its own
    assert other.csrf != mine.csrf
    assert call(url, "POST", form=urlencode({"csrf": other.csrf}).encode(),
                cookie=mine.cookie).status == 403
    assert queue not in timed.paused()
    done = call(url, "POST", form=form, cookie=mine.cookie)
    assert done.status == 303
    assert queue in timed.paused()
    wrong = call(f"{site}/login", "POST", form=urlencode({"token": "nope"}).encode())
    assert wrong.status == 403
    right = call(f"{site}/login", "POST",
                 form=urlencode({"token": TOKEN, "next": "//evil.example/"}).encode())
    assert right.status == 303
    assert right.headers["location"] == "/"  # only this dashboard's own pages
    cookie = right.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "samesite=strict" in cookie.lower()
    assert "httponly" in cookie.lower()
    assert "secure" not in cookie.lower()
    assert TOKEN not in cookie


def test_pages_show_limits_and_the_form_sets_them(site: str, timed: shardq.Client) -> None:
    queue = fresh("limits")
    timed.set_limits(queue, max_running=1, rate=shardq.Rate(100, 60), create=True)
    timed.enqueue_many(queue, [{"n": 1}, {"n": 2}])
    timed.claim(queue, limit=5)  # one slot of one held, one task due: saturated
    [row] = [r for r in call(f"{site}/").text.split("<tr") if f'data-queue="{queue}"' in r]
    assert "saturated" in row
    assert "run 1/1 · rate 100/60s" in row
    page = call(f"{site}/queues/{queue}").text
    assert '<b data-field="max_running">1 / 1</b>' in page
    assert '<b data-field="rate">100 per 60s, burst 5</b>' in page
    assert '<span class="paused" data-field="saturated">saturated</span>' in page
    assert 'id="limits-form"' not in page  # not logged in
    me = log_in(site, TOKEN)
    session, csrf = me.cookie, me.csrf
    mine = call(f"{site}/queues/{queue}", cookie=session).text
    assert 'name="max_running" size="6" placeholder="none" value="1"' in mine
    assert 'name="rate" size="10" placeholder="100/60" value="100/60/5"' in mine
    url = f"{site}/actions/queues/{queue}/limit"
    wanted = {"max_running": "3", "max_running_per_group": "2", "rate": "",
              "rate_per_group": "5/1/2"}
    forged = urlencode({**wanted, "csrf": "0" * 64}).encode()
    assert call(url, "POST", form=forged, cookie=session).status == 403
    assert call(url, "POST", form=urlencode({**wanted, "csrf": csrf}).encode()
                ).status == 401  # no session
    assert timed.limits(queue).limits == shardq.Limits(1, None, shardq.Rate(100, 60.0, 5))
    done = call(url, "POST", form=urlencode({**wanted, "csrf": csrf}).encode(),
                cookie=session)
    assert done.status == 303
    assert timed.limits(queue).limits == shardq.Limits(3, 2, None, shardq.Rate(5, 1.0, 2))
    assert "limits+set" in done.headers["location"]
    bad = call(url, "POST", form=urlencode({"max_running": "0", "csrf": csrf}).encode(),
               cookie=session)
    assert bad.status == 400
    assert "max_running must be between 1 and" in bad.text
    assert timed.limits(queue).limits.max_running == 3
    figures = call(f"{site}/queues/{queue}").text
    assert '<b data-field="max_running">1 / 3</b>' in figures
    assert '<span data-field="saturated">not saturated</span>' in figures


def test_limits_through_the_api(site: str, timed: shardq.Client) -> None:
    queue = fresh("api-limits")
    url = f"{site}/api/queues/{queue}/limits"
    assert call(url, "POST", {"max_running": 4}).status == 401
    done = call(url, "POST", {"max_running": 4, "rate": "10/1/3", "create": True},
                token=TOKEN)
    assert done.status == 200, done.text
    assert timed.limits(queue).limits == shardq.Limits(4, None, shardq.Rate(10, 1.0, 3))
    call(url, "POST", {"rate": None}, token=TOKEN)  # null removes one; the others stay
    assert timed.limits(queue).limits == shardq.Limits(4)
    assert call(url, "POST", {"max_waiting": 1}, token=TOKEN).status == 400
    assert call(url, "POST", {"rate": "fast"}, token=TOKEN).status == 400
    figures = call(f"{site}/api/queues/{queue}").json()["stats"]
    assert (figures["max_running"], figures["running"], figures["saturated"]) == (4, 0, False)


def test_limits_of_an_unknown_queue_need_create(site: str, timed: shardq.Client) -> None:
    queue = fresh("api-typo")
    url = f"{site}/api/queues/{queue}/limits"
    refused = call(url, "POST", {"max_running": 4}, token=TOKEN)
    assert refused.status == 404
    assert refused.json()["error"].endswith('add ?create=1 or "create": true')
    assert not timed.limits(queue).limits.any
    assert call(f"{url}?create=1", "POST", {"max_running": 4}, token=TOKEN).status == 200
    assert timed.limits(queue).limits == shardq.Limits(4)
    other = f"{site}/api/queues/{fresh('api-new')}/limits"
    assert call(other, "POST", {"rate": "1/1", "create": True}, token=TOKEN).status == 200
    too_many = call(url, "POST", {"max_running": 1_000_001}, token=TOKEN)
    assert too_many.status == 400
    assert "between 1 and 1,000,000" in too_many.json()["error"]


@pytest.mark.parametrize("settings", [{"read_only": True}, {}])
def test_without_a_token_no_action_is_served(timed: shardq.Client,
                                             settings: dict[str, Any]) -> None:
    queue = fresh("readonly")
    timed.enqueue(queue, {})
    with serving(create_app(timed, DashboardConfig(**settings))) as url:
        assert call(f"{url}/api/queues/{queue}/pause", "POST", token=TOKEN).status in (404, 405)
        assert call(f"{url}/actions/queues/{queue}/pause", "POST").status in (404, 405)
        assert call(f"{url}/login").status == 404
        page = call(f"{url}/queues/{queue}").text
        assert "<form method=\"post\"" not in page
        assert "read-only" in page
    assert queue not in timed.paused()
    with pytest.raises(ValueError, match="read-only"):
        create_app(timed, DashboardConfig(read_only=True), token=TOKEN)


def test_hidden_payloads_show_sizes(timed: shardq.Client) -> None:
    queue = fresh("private")
    task_id = timed.enqueue(queue, {"email": "grace@example.org"})
    with serving(create_app(timed, DashboardConfig(hide_payloads=True))) as url:
        record = call(f"{url}/api/tasks/{task_id}").json()
        assert "payload" not in record
        assert record["payload_bytes"] == len('{"email":"grace@example.org"}')
        for path in (f"/tasks/{task_id}", f"/queues/{queue}", f"/api/queues/{queue}"):
            assert "grace@example.org" not in call(url + path).text


def test_mounted_under_a_path(timed: shardq.Client) -> None:
    queue = fresh("mounted")
    timed.enqueue(queue, {})
    outer = Starlette(routes=[Mount("/ops/queues", app=create_app(timed, token=TOKEN))])
    with serving(outer) as url:
        home = call(f"{url}/ops/queues/")
        assert home.status == 200
        assert f'href="{url}/ops/queues/queues/{queue}"' in home.text
        login = call(f"{url}/ops/queues/login", "POST",
                     form=urlencode({"token": TOKEN, "next": "/ops/queues/"}).encode())
        assert login.headers["location"] == "/ops/queues/"
        assert "Path=/ops/queues/" in login.headers["set-cookie"]
        paused = call(f"{url}/ops/queues/api/queues/{queue}/pause", "POST", token=TOKEN)
        assert paused.status == 200
        missing = call(f"{url}/ops/queues/api/tasks/{uuid.uuid4()}")
        assert (missing.status, "error" in missing.json()) == (404, True)
    assert queue in timed.paused()


def dashboard_cli(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shardq", "dashboard", "--dsn", dsn, *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_cli_refuses_unsafe_or_conflicting_tokens(dsn: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o644)
    loose = dashboard_cli(dsn, "--token-file", str(token))
    assert (loose.returncode, "chmod 600" in loose.stderr) == (2, True)
    token.chmod(0o600)
    both = dashboard_cli(dsn, "--token-file", str(token), "--read-only")
    assert (both.returncode, "not both" in both.stderr) == (2, True)
    token.write_text("short")
    weak = dashboard_cli(dsn, "--token-file", str(token))
    assert (weak.returncode, "at least 16" in weak.stderr) == (2, True)
    missing = dashboard_cli(dsn, "--token-file", str(tmp_path / "nowhere"))
    assert (missing.returncode, "cannot read" in missing.stderr) == (2, True)


def test_cli_serves_the_dashboard(dsn: str, client: shardq.Client, tmp_path: Path) -> None:
    queue = fresh("served")
    client.enqueue(queue, {})
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "shardq", "dashboard", "--dsn", dsn,
                             "--port", str(port), "--token-file", str(token)],
                            stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(f"{url}/api/queues"), timeout=30, what="the dashboard")
        assert call(f"{url}/api/queues/{queue}/pause", "POST", token=TOKEN).status == 200
        assert queue in client.paused()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "actions need the token" in err


def _answers(url: str) -> bool:
    try:
        return call(url).status == 200
    except OSError:
        return False


CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
HARDENED = {"content-security-policy": CSP, "x-frame-options": "DENY",
            "x-content-type-options": "nosniff", "referrer-policy": "same-origin",
            "cross-origin-opener-policy": "same-origin"}


def hardening(reply: Reply) -> dict[str, str | None]:
    """The reply's security headers, by lower-case name (None: absent)."""
    headers = {k.lower(): v for k, v in reply.headers.items()}
    return {name: headers.get(name)
            for name in [*HARDENED, "strict-transport-security"]}


def test_every_response_carries_the_hardened_headers(site: str, timed: shardq.Client) -> None:
    queue = fresh("headers")
    task_id = timed.enqueue(queue, {})
    replies = {
        "page": call(f"{site}/queues/{queue}"),
        "fragment": call(f"{site}/fragments/queues/{queue}"),
        "json": call(f"{site}/api/queues/{queue}"),
        "html 404": call(f"{site}/tasks/{uuid.uuid4()}"),
        "json 404": call(f"{site}/api/tasks/{uuid.uuid4()}"),
        "json 401": call(f"{site}/api/tasks/{task_id}/cancel", "POST"),
        "redirect": call(f"{site}/tasks?{urlencode({'id': str(task_id)})}"),
        "chart": call(f"{site}/chart.svg"),
        "style": call(f"{site}/static/dashboard.css"),
        "script": call(f"{site}/static/dashboard.js"),
        "no such file": call(f"{site}/static/app.py"),
    }
    expected = {"page": 200, "fragment": 200, "json": 200, "html 404": 404, "json 404": 404,
                "json 401": 401, "redirect": 303, "chart": 200, "style": 200, "script": 200,
                "no such file": 404}
    assert {kind: r.status for kind, r in replies.items()} == expected
    for kind, reply in replies.items():
        assert hardening(reply) == {**HARDENED, "strict-transport-security": None}, kind
    assert replies["fragment"].text.lstrip().startswith("<table")
    # Over HTTPS (as a trusted proxy on this machine says), browsers are told to keep to it.
    request = urllib.request.Request(f"{site}/", headers={"X-Forwarded-Proto": "https"})
    with OPENER.open(request, timeout=30) as response:
        assert response.headers["strict-transport-security"] == "max-age=31536000"
        assert response.headers["content-security-policy"] == CSP


def test_pages_inline_no_script_style_or_handler(site: str, timed: shardq.Client) -> None:
    queue = fresh("inline")
    [task_id] = kill(timed, queue, 1)
    session = log_in(site, TOKEN).cookie
    for path in ("/", f"/queues/{queue}", f"/tasks/{task_id}", "/workers", "/login"):
        text = call(site + path, cookie=session).text
        assert "<style" not in text, path
        assert " style=" not in text, path
        assert "<script>" not in text, path
        assert " onclick=" not in text, path
        assert " onsubmit=" not in text, path
        assert f'<script src="{site}/static/dashboard.js" defer></script>' in text, path
        assert f'<link rel="stylesheet" href="{site}/static/dashboard.css">' in text, path
        assert '<body data-refresh-ms="2000">' in text, path
    page = call(f"{site}/queues/{queue}", cookie=session).text
    assert f'data-confirm="Delete the waiting tasks of {queue}?"' in page
    assert 'data-confirm="Delete these dead tasks?"' in page


def test_static_files_have_their_types_and_etags(site: str) -> None:
    style = call(f"{site}/static/dashboard.css")
    assert style.headers["content-type"] == "text/css; charset=utf-8"
    assert ".bar[hidden]" in style.text
    script = call(f"{site}/static/dashboard.js")
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert "window.confirm(question)" in script.text
    assert script.headers["cache-control"] == "no-cache"
    request = urllib.request.Request(f"{site}/static/dashboard.js",
                                     headers={"If-None-Match": script.headers["etag"]})
    with pytest.raises(urllib.error.HTTPError) as current:  # 304 Not Modified
        OPENER.open(request, timeout=30)
    assert current.value.code == 304
    assert current.value.headers["content-security-policy"] == CSP
    assert call(f"{site}/static/").status == 404
    assert call(f"{site}/static/..%2Fapp.py").status == 404


def test_frame_ancestors_lets_named_origins_frame_the_pages(timed: shardq.Client) -> None:
    allowed = "'self' https://intranet.example.com"
    with serving(create_app(timed, DashboardConfig(frame_ancestors=allowed))) as url:
        for path in ("/", "/api/queues", "/static/dashboard.css", "/nowhere"):
            headers = hardening(call(url + path))
            assert headers["content-security-policy"] == CSP.replace(
                "frame-ancestors 'none'", f"frame-ancestors {allowed}"), path
            assert headers["x-frame-options"] is None, path
            assert headers["x-content-type-options"] == "nosniff", path


@pytest.mark.parametrize("value", ["https://a.example.com, https://b.example.com",
                                   "'self'; script-src *", "", " 'self'", "https://a\r\nX: y"])
def test_frame_ancestors_takes_only_sources(value: str) -> None:
    with pytest.raises(shardq.ConfigError, match="--frame-ancestors"):
        DashboardConfig(frame_ancestors=value)
