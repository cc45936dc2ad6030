"""The dashboard's redaction: payloads, durable steps' values and errors masked by the
app's ``redact`` rules (``create_app(..., app=)``, ``shardq dashboard --app``) and by
the ``redact`` setting, on the pages and in the JSON API; and every value masked, the
payload's shape kept, for a caller that asks for ``masked`` (a viewer)."""

from __future__ import annotations

import dataclasses
import html
import json
import subprocess
import sys
import uuid
from typing import Any

import pytest

import shardq
from shardq.core.masking import MASK
from shardq.web import DashboardConfig, create_app, reads
from shardq.web.masks import Masks
from tests.helpers import free_port, one_line_error, shardq_cli, wait_for
from tests.web import call, serving

pytestmark = pytest.mark.behaviour

CARD = "4242424242424242"


def pages(url: str, task_id: Any, queue: str) -> dict[str, str]:
    """Every page and record that shows the task, unescaped."""
    return {path: html.unescape(call(url + path).text)
            for path in (f"/tasks/{task_id}", f"/queues/{queue}", f"/api/tasks/{task_id}",
                         f"/api/queues/{queue}")}


def failed_once(client: shardq.Client, queue: str, error: str) -> None:
    """Claim the queue's task and fail it with ``error``, stored as given (a client that
    nacks by hand masks nothing)."""
    [task] = [t for b in range(client.bucket_count) for t in client.claim_bucket(queue, b)]
    client.nack(task, error, dead=True)


def test_the_apps_rules_mask_payloads_and_errors(client: shardq.Client) -> None:
    queue = f"pay-{uuid.uuid4().hex[:8]}"
    app = shardq.App(client=client)

    @app.task(queue=queue, redact=["card", "password"])
    def pay(card: str, amount: int, *, login: dict[str, str]) -> None: ...

    task_id = pay.enqueue(CARD, 1999, login={"user": "ada", "password": "hunter22"})
    failed_once(client, queue, f"ValueError: card {CARD} declined (hunter22)")
    with serving(create_app(client, app=app)) as url:
        shown = pages(url, task_id, queue)
        record = call(f"{url}/api/tasks/{task_id}").json()
    for path, text in shown.items():
        assert CARD not in text, path
        assert "hunter22" not in text, path
        assert f"card {MASK} declined ({MASK})" in text, path
    assert record["payload"] == {"task": pay.name, "args": [MASK, 1999],
                                 "kwargs": {"login": {"user": "ada", "password": MASK}}}
    assert [a["error"] for a in record["history"]] == [
        f"ValueError: card {MASK} declined ({MASK})"]
    assert "ada" in shown[f"/tasks/{task_id}"]  # what no rule names is shown


def test_the_redact_setting_masks_every_tasks_fields(client: shardq.Client) -> None:
    queue = f"signup-{uuid.uuid4().hex[:8]}"
    task_id = client.enqueue(queue, {"user": "ada", "secrets": [{"token": "tok-123456"}]})
    failed_once(client, queue, "bad token tok-123456")
    config = DashboardConfig(redact=("token,password",))
    assert config.redact == ("token", "password")
    with serving(create_app(client, config)) as url:
        shown = pages(url, task_id, queue)
        record = call(f"{url}/api/tasks/{task_id}").json()
    assert record["payload"] == {"user": "ada", "secrets": [{"token": MASK}]}
    assert record["last_error"] == f"bad token {MASK}"
    for path, text in shown.items():
        assert "tok-123456" not in text, path
    # With the sizes only, the errors are still masked.
    with serving(create_app(client, DashboardConfig(redact=("token",),
                                                    hide_payloads=True))) as url:
        sized = call(f"{url}/api/tasks/{task_id}").json()
    assert sized["last_error"] == f"bad token {MASK}"
    assert sized["payload_bytes"] == len(json.dumps(
        {"user": "ada", "secrets": [{"token": "tok-123456"}]}, separators=(",", ":")))


def test_a_durable_steps_values_are_masked(client: shardq.Client) -> None:
    queue = f"steps-{uuid.uuid4().hex[:8]}"
    task_id = client.enqueue(queue, {"order": 7})
    info = client.get(task_id)
    assert info is not None
    step = shardq.Step("charge", "step", "done", {"card": CARD, "ok": True}, None, info.enqueued_at)
    with_step = reads.task_json(dataclasses.replace(info, steps=(step,)), "full",
                                Masks(fields=("card",)))
    assert with_step["steps"][0]["value"] == {"card": MASK, "ok": True}


def test_masked_shows_the_shape_with_every_value_masked(client: shardq.Client) -> None:
    queue = f"viewer-{uuid.uuid4().hex[:8]}"
    task_id = client.enqueue(queue, {"user": "ada-lovelace", "lines": [{"sku": "tea"}], "n": 3})
    failed_once(client, queue, "no stock of tea for ada-lovelace")
    info = client.get(task_id)
    assert info is not None
    record = reads.task_json(info, "masked", Masks())
    assert record["payload"] == {"user": MASK, "lines": [{"sku": MASK}], "n": MASK}
    # Values of four characters or more are masked in the errors too.
    assert record["last_error"] == f"no stock of tea for {MASK}"
    assert reads.task_json(info, "full", Masks())["payload"]["user"] == "ada-lovelace"


def test_the_cli_loads_the_app_for_its_rules(dsn: str, client: shardq.Client) -> None:
    from tests.apps.paying import app, charge

    app.use_client(client)
    task_id = charge.enqueue(CARD, 1999)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "shardq", "dashboard", "--dsn", dsn,
                             "--port", str(port), "--app", "tests.apps.paying:app"],
                            stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(f"{url}/api/queues"), timeout=30, what="the dashboard")
        record = call(f"{url}/api/tasks/{task_id}").json()
        assert record["payload"]["args"] == [MASK, 1999]
        assert CARD not in call(f"{url}/tasks/{task_id}").text
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    one_line_error(shardq_cli("dashboard", "--app", "tests.apps.paying:charge", dsn=dsn,
                              check=False), "not a shardq.App", "(the module's Apps: app)")


def _answers(url: str) -> bool:
    try:
        return call(url).status == 200
    except OSError:
        return False
