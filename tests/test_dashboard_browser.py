"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright): the
queue list shows and refreshes a queue's counts, an action works with the token and is
refused without it, a task's page shows its history, dead letters are retried by ticking
them, a flow's page follows its progress and cancels it.  Skipped, with the reason, where
no Chromium is installed."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import shardq
from shardq.loops.resolver import resolve
from shardq.web import DashboardConfig, create_app
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
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    yield tab
    context.close()


@pytest.fixture
def site(timed: shardq.Client) -> Iterator[str]:
    with serving(create_app(timed, DashboardConfig(refresh_ms=300), token=TOKEN)) as url:
        yield url


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def cell(page: Any, queue: str, field: str) -> Any:
    return page.locator(f'tr[data-queue="{queue}"] [data-field="{field}"]')


def log_in(page: Any) -> None:
    page.get_by_role("link", name="Log in").first.click()
    page.fill("#token", TOKEN)
    page.click("#login")


def test_queue_list_shows_and_refreshes_counts(page: Any, site: str,
                                               timed: shardq.Client) -> None:
    queue = fresh("listed")
    timed.enqueue_many(queue, [{"n": n} for n in range(3)])
    page.goto(site + "/")
    playwright.expect(cell(page, queue, "available")).to_have_text("3")
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
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#purge")
    playwright.expect(page.get_by_role("status")).to_contain_text("purged 4 waiting task(s)")
    assert timed.stats(queue)["available"] == 0


def test_actions_without_the_token_are_refused(page: Any, site: str,
                                               timed: shardq.Client) -> None:
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


def test_dead_letters_are_retried_by_ticking_them(page: Any, site: str,
                                                   timed: shardq.Client) -> None:
    queue = fresh("ticked")
    timed.enqueue_many(queue, [{"n": n} for n in range(3)])
    tasks = claim_all(timed, queue)
    timed.nack_many(tasks, ["boom"] * 3, dead=[True] * 3)
    page.goto(f"{site}/queues/{queue}")
    log_in(page)
    page.check(f'input[value="{tasks[0].id}"]')
    page.click("#retry-dead")
    playwright.expect(page.get_by_role("status")).to_contain_text("retried 1 dead task(s)")
    figures = timed.stats(queue)
    assert (figures["available"], figures["dead"]) == (1, 2)


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
    assert page.locator("#cancel-flow").count() == 0  # not logged in
    log_in(page)
    assert page.url == f"{site}/flows/{handle.id}"
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-flow")
    playwright.expect(page.get_by_role("status")).to_contain_text("3 task(s) that had not "
                                                                  "finished")
    playwright.expect(page.locator("#state")).to_have_text("cancelled")
    assert page.locator("#cancel-flow").count() == 0
    assert timed.flow(handle.id).state == "cancelled"  # type: ignore[union-attr]
