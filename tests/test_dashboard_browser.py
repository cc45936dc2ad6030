"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright): the
queue list shows and refreshes a queue's counts, an action works with the token and is
refused without it, a task's page shows its history, dead letters are retried by ticking
them, a flow's page follows its progress and cancels it, each action that asks first asks;
every test fails on a Content-Security-Policy violation or a console error, and the policy
is seen to refuse inline script and style.  Skipped, with the reason, where no Chromium is
installed."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import shardq
from shardq.loops.resolver import resolve
from shardq.web import DashboardConfig, create_app, users
from tests.helpers import claim_all
from tests.web import TOKEN, serving

playwright = pytest.importorskip("playwright.sync_api",
                                 reason="playwright is not installed (pip install -e '.[test]')")

app = shardq.App()  # its function only names the tasks: the test's client writes the flow


@app.task
def step(n: int) -> int:
    return n


CHROMIUM = (os.environ.get("SHARDQ_TEST_CHROMIUM") or shutil.which("chromium")
            or shutil.which("chromium-browser"))
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium here: apt-get install chromium (CI does), or set "
                             "SHARDQ_TEST_CHROMIUM to a Chromium binary")
# Flags for a headless browser in a container: no sandbox (no user namespaces), no GPU,
# /tmp instead of a small /dev/shm, nothing fetched from the network.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-extensions", "--no-first-run"]
WAIT_MS = 15_000
playwright.expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def site(timed: shardq.Client) -> Iterator[str]:
    with serving(create_app(timed, DashboardConfig(refresh_ms=300), token=TOKEN)) as url:
        yield url


# Every document reports its Content-Security-Policy violations to the test, before the
# page's own script runs, whatever the tab navigated to since.
REPORT_VIOLATIONS = """document.addEventListener("securitypolicyviolation", e =>
    window.__csp(e.violatedDirective + " " + e.blockedURI));"""


@pytest.fixture
def problems() -> list[str]:
    """What went wrong in the test's tab: CSP violations, console errors (a response of
    4xx or 5xx is one) and uncaught errors.  A test that provokes some takes them out."""
    return []


@pytest.fixture
def page(browser: Any, site: str, problems: list[str]) -> Iterator[Any]:
    """A tab whose test fails on any of its :func:`problems` left at the end (closed
    before the site stops: its script fetches from the site until then)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.expose_binding("__csp", lambda source, text: problems.append(f"csp: {text}"))
    context.add_init_script(REPORT_VIOLATIONS)
    tab = context.new_page()
    tab.on("console", lambda m: problems.append(f"console: {m.text} ({m.location['url']})")
           if m.type == "error" else None)
    tab.on("pageerror", lambda error: problems.append(f"error: {error}"))
    tab.set_default_timeout(WAIT_MS)
    yield tab
    tab.wait_for_timeout(100)  # events on their way still reach problems
    context.close()
    assert problems == []


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def cell(page: Any, queue: str, field: str) -> Any:
    return page.locator(f'tr[data-queue="{queue}"] [data-field="{field}"]')


def answering(page: Any, *, accept: bool) -> list[str]:
    """Answer the tab's next confirm() dialog; the list gets its question."""
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        if accept:
            dialog.accept()
        else:
            dialog.dismiss()

    page.once("dialog", answer)
    return asked


def log_in(page: Any) -> None:
    page.get_by_role("link", name="Log in").first.click()
    log_in_with(page, TOKEN)


def log_in_with(page: Any, token: str) -> None:
    page.fill("#token", token)
    page.click("#login")


def test_queue_list_shows_and_refreshes_counts(page: Any, site: str,
                                               timed: shardq.Client) -> None:
    queue = fresh("listed")
    timed.enqueue_many(queue, [{"n": n} for n in range(3)])
    page.goto(site + "/")
    playwright.expect(cell(page, queue, "available")).to_have_text("3")
    # The chart, an SVG picture from the dashboard itself, is drawn under its policy.
    page.wait_for_function("() => document.querySelector('img.chart').naturalWidth === 720")
    timed.enqueue_many(queue, [{"n": n} for n in range(4)])
    claim_all(timed, queue, most=2)
    # No reload: the page refreshes its rows in place.
    playwright.expect(cell(page, queue, "available")).to_have_text("5")
    playwright.expect(cell(page, queue, "locked")).to_have_text("2")


def test_actions_work_with_the_token(page: Any, site: str, timed: shardq.Client) -> None:
    queue = fresh("acted")
    timed.enqueue_many(queue, [{"n": n} for n in range(4)])
    page.goto(f"{site}/queues/{queue}")
    assert page.locator("#pause").count() == 0  # not logged in: no action buttons
    log_in(page)
    assert page.url == f"{site}/queues/{queue}"
    page.click("#pause")
    playwright.expect(page.get_by_role("status")).to_contain_text(f"{queue} paused")
    playwright.expect(page.locator('[data-field="paused"]')).to_have_text("paused")
    assert queue in timed.paused()
    page.click("#resume")
    playwright.expect(page.get_by_role("status")).to_contain_text(f"{queue} resumed")
    assert queue not in timed.paused()
    asked, before = answering(page, accept=False), page.url
    page.click("#purge")
    page.wait_for_timeout(300)  # time enough for a form that was sent anyway
    assert asked == [f"Delete the waiting tasks of {queue}?"]
    assert (page.url, timed.stats(queue)["available"]) == (before, 4)
    asked = answering(page, accept=True)
    page.click("#purge")
    playwright.expect(page.get_by_role("status")).to_contain_text("purged 4 waiting task(s)")
    assert asked == [f"Delete the waiting tasks of {queue}?"]
    assert timed.stats(queue)["available"] == 0


def test_actions_without_the_token_are_refused(page: Any, site: str, timed: shardq.Client,
                                               problems: list[str]) -> None:
    queue = fresh("refused")
    page.goto(site + "/")
    post = """async ([url, headers, body]) => {
        const r = await fetch(url, {method: "POST", headers: headers, body: body,
                                    credentials: "same-origin"});
        return r.status;
    }"""
    api = f"{site}/api/queues/{queue}/pause"
    assert page.evaluate(post, [api, {}, None]) == 401
    assert page.evaluate(post, [api, {"Authorization": "Bearer wrong-token"}, None]) == 403
    form = f"{site}/actions/queues/{queue}/pause"
    forged = {"Content-Type": "application/x-www-form-urlencoded"}
    assert page.evaluate(post, [form, forged, "csrf=guessed"]) == 401  # no session yet
    page.goto(f"{site}/login")
    page.fill("#token", "not-the-token-at-all")
    page.click("#login")
    playwright.expect(page.get_by_role("alert")).to_have_text("wrong token")
    page.fill("#token", TOKEN)
    page.click("#login")
    # Logged in, a form without the page's CSRF field is still refused.
    assert page.evaluate(post, [form, forged, "csrf=guessed"]) == 403
    assert queue not in timed.paused()
    # The browser logs each refusal as an error: these, and nothing else.
    refused = [re.search(r"status of (\d+)", p).group(1)  # type: ignore[union-attr]
               for p in problems if p.startswith("console: Failed to load resource")]
    assert (refused, len(problems)) == (["401", "403", "401", "403", "403"], 5)
    problems.clear()


def test_task_page_shows_its_history(page: Any, site: str, timed: shardq.Client,
                                     clock: shardq.ManualClock) -> None:
    queue = fresh("history")
    task_id = timed.enqueue(queue, {"invoice": 42, "to": "ada@example.org"})
    clock.advance(5)
    [task] = claim_all(timed, queue)
    timed.nack(task, "TimeoutError: upstream took too long", retry_in_s=60)
    page.goto(site + "/")
    page.fill('input[name="id"]', str(task_id))
    page.press('input[name="id"]', "Enter")
    page.wait_for_url(f"{site}/tasks/{task_id}")
    playwright.expect(page.locator("#state")).to_have_text("scheduled")
    history = page.locator("#history tbody tr")
    playwright.expect(history).to_have_count(4)
    texts = history.all_inner_texts()
    assert "enqueued" in texts[0]
    assert "first claimed" in texts[1]
    assert "last put back in line (put back 1 times)" in texts[2]
    assert texts[3].endswith("due")
    playwright.expect(page.locator("#payload")).to_contain_text('"invoice": 42')
    playwright.expect(page.locator("td.error").first).to_contain_text("TimeoutError")
    log_in(page)
    asked = answering(page, accept=True)
    page.click("#cancel")
    playwright.expect(page.get_by_role("status")).to_contain_text(f"task {task_id} cancelled")
    assert asked == ["Cancel this task?"]
    assert timed.get(task_id) is None


def test_dead_letters_are_retried_by_ticking_them(page: Any, site: str,
                                                   timed: shardq.Client) -> None:
    queue = fresh("ticked")
    timed.enqueue_many(queue, [{"n": n} for n in range(3)])
    tasks = claim_all(timed, queue)
    timed.nack_many(tasks, ["boom"] * 3, dead=[True] * 3)
    page.goto(f"{site}/queues/{queue}")
    log_in(page)
    page.check(f'input[value="{tasks[0].id}"]')
    asked = answering(page, accept=False)  # retrying asks nothing
    page.click("#retry-dead")
    playwright.expect(page.get_by_role("status")).to_contain_text("retried 1 dead task(s)")
    figures = timed.stats(queue)
    assert (figures["available"], figures["dead"], asked) == (1, 2, [])
    page.check(f'input[value="{tasks[1].id}"]')
    page.click("#purge-dead")  # the button's own question: dismissed, nothing purged
    page.wait_for_timeout(300)
    assert (asked, timed.stats(queue)["dead"]) == (["Delete these dead tasks?"], 2)
    asked = answering(page, accept=True)
    page.click("#purge-dead")
    playwright.expect(page.get_by_role("status")).to_contain_text("purged 1 dead task(s)")
    assert (asked, timed.stats(queue)["dead"]) == (["Delete these dead tasks?"], 1)


def test_flow_page_follows_its_progress_and_cancels_it(page: Any, site: str,
                                                       timed: shardq.Client) -> None:
    queue = fresh("flow")
    s = step.si(0).set(queue=queue)
    handle = timed.enqueue_flow(shardq.chain(s, shardq.group(s, s), s), name="nightly")
    page.goto(f"{site}/tasks/{handle.ids[3]}")
    playwright.expect(page.locator("#state")).to_have_text("waiting")
    page.click("#flow")
    page.wait_for_url(f"{site}/flows/{handle.id}")
    playwright.expect(page.locator("#state")).to_have_text("running")
    playwright.expect(page.locator("#progress")).to_contain_text("0 of 4 task(s) finished")
    [first] = claim_all(timed, queue)
    timed.ack(first)
    resolve(timed.statements)
    # No reload: the page refreshes its figures in place.
    playwright.expect(page.locator("#progress")).to_contain_text("1 of 4 task(s) finished")
    playwright.expect(page.locator('[data-field="pending"]')).to_have_text("2")
    bar = page.get_by_role("progressbar")
    playwright.expect(bar).to_have_attribute("aria-valuenow", "1")
    # The script sized the refreshed bar from its parts' shares.
    playwright.expect(bar).to_be_visible()
    playwright.expect(bar.locator("span.succeeded")).to_have_attribute("style", "width: 25%;")
    assert page.locator("#cancel-flow").count() == 0  # not logged in
    log_in(page)
    assert page.url == f"{site}/flows/{handle.id}"
    asked = answering(page, accept=True)
    page.click("#cancel-flow")
    playwright.expect(page.get_by_role("status")).to_contain_text("3 task(s) that had not "
                                                                  "finished")
    playwright.expect(page.locator("#state")).to_have_text("cancelled")
    assert asked == ["Cancel every task of this flow that has not finished?"]
    assert page.locator("#cancel-flow").count() == 0
    assert timed.flow(handle.id).state == "cancelled"  # type: ignore[union-attr]


def test_the_policy_refuses_what_is_not_the_dashboards_own(page: Any, site: str,
                                                            problems: list[str]) -> None:
    page.goto(site + "/workers")
    playwright.expect(page.locator("h1")).to_have_text("Workers")
    assert page.evaluate("getComputedStyle(document.body).margin") == "0px"  # its style
    page.evaluate("""() => {
        const script = document.createElement("script");
        script.textContent = "window.ran = true";
        document.body.append(script);
        document.querySelector("h1").setAttribute("style", "color: red");
        const img = document.createElement("img");
        img.src = "http://elsewhere.invalid/pixel.png";
        document.body.append(img);
    }""")
    wanted = {"csp: script-src-elem inline", "csp: style-src-attr inline",
              "csp: img-src http://elsewhere.invalid/pixel.png"}
    for _ in range(200):  # the reports arrive as events
        if wanted <= set(problems):
            break
        page.wait_for_timeout(50)
    assert wanted <= set(problems), problems
    assert page.evaluate("window.ran") is None
    assert page.evaluate("getComputedStyle(document.querySelector('h1')).color") != \
        "rgb(255, 0, 0)"
    problems.clear()


def test_without_script_the_pages_work_and_the_bar_is_left_out(browser: Any, site: str,
                                                               timed: shardq.Client) -> None:
    queue = fresh("noscript")
    handle = timed.enqueue_flow(shardq.group(step.si(0).set(queue=queue),
                                             step.si(1).set(queue=queue)))
    [first, _] = claim_all(timed, queue)
    timed.ack(first)
    resolve(timed.statements)
    context = browser.new_context(java_script_enabled=False)
    try:
        tab = context.new_page()
        tab.goto(f"{site}/flows/{handle.id}")
        playwright.expect(tab.locator("#progress")).to_contain_text("1 of 2 task(s) finished")
        playwright.expect(tab.locator(".bar")).to_be_hidden()
        assert tab.locator("header").evaluate("e => getComputedStyle(e).display") == "flex"
    finally:
        context.close()


class TestRoles:
    """A dashboard of named credentials: its own ``site``, for this class's tests."""

    @pytest.fixture
    def tokens(self, tmp_path: Path) -> dict[str, str]:
        path = str(tmp_path / "users")
        return {"path": path, **{role: users.add(path, f"{role}-1", role)
                                 for role in ("viewer", "operator")}}


    @pytest.fixture
    def site(self, timed: shardq.Client, tokens: dict[str, str]) -> Iterator[str]:
        config = DashboardConfig(users_file=tokens["path"], session_idle_s=60, refresh_ms=300)
        with serving(create_app(timed, config)) as url:
            yield url


    def test_an_operator_acts_a_viewer_is_refused_and_sessions_end(
            self, page: Any, site: str, timed: shardq.Client, tokens: dict[str, str],
            clock: shardq.ManualClock, problems: list[str]) -> None:
        queue = f"roles-{uuid.uuid4().hex[:8]}"
        timed.enqueue_many(queue, [{"n": n} for n in range(3)])
        page.goto(f"{site}/queues/{queue}")
        assert "/login" in page.url  # every page needs a credential here
        log_in_with(page, tokens["operator"])
        page.wait_for_url(f"{site}/queues/{queue}")
        playwright.expect(page.locator(".who")).to_have_text("operator-1 (operator)")
        assert page.locator("#purge").count() == 0  # an admin's
        page.click("#pause")
        playwright.expect(page.get_by_role("status")).to_contain_text(f"{queue} paused")
        assert queue in timed.paused()
        page.click("#logout")
        page.wait_for_url("**/login**")
        page.goto(f"{site}/queues/{queue}")
        assert "/login" in page.url  # the session ended with the logout

        log_in_with(page, tokens["viewer"])
        page.wait_for_url(f"{site}/queues/{queue}")
        playwright.expect(page.locator(".who")).to_have_text("viewer-1 (viewer)")
        assert page.locator("#resume").count() == 0  # a viewer is shown no action
        forged = """async ([url]) => {
            const csrf = document.querySelector('meta[name="shardq-csrf"]').content;
            const r = await fetch(url, {method: "POST", credentials: "same-origin",
                headers: {"Content-Type": "application/x-www-form-urlencoded"},
                body: "csrf=" + encodeURIComponent(csrf)});
            return r.status;
        }"""
        assert page.evaluate(forged, [f"{site}/actions/queues/{queue}/resume"]) == 403
        assert queue in timed.paused()
        # The browser logs the refusal as an error: that one, and nothing else.
        assert len(problems) == 1
        assert "403" in problems[0]
        problems.clear()

        clock.advance(61)  # idle past session_idle_s
        page.goto(f"{site}/queues/{queue}")
        assert "/login" in page.url
