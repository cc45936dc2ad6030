"""Payload redaction: the masking of payloads and of messages that quote them, the
``redact`` option of ``@app.task`` checked when a function is decorated, and a real
worker's stored errors (a task's last error, its attempts') with the values masked."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core.masking import MASK, masked, masked_everything, masked_text
from shardq.core.validate import MAX_ERROR_CHARS
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker

CARD = "4242424242424242"
PAYLOAD: dict[str, Any] = {"task": "shop.pay", "args": [],
           "kwargs": {"card": {"number": CARD, "cvc": "123"}, "amount": 1999,
                      "lines": [{"sku": "tea", "password": "hunter22"}, {"sku": "mug"}]}}


def test_fields_are_masked_at_any_depth_of_dicts_and_lists() -> None:
    shown = masked(PAYLOAD, ["card", "password"])
    assert shown["kwargs"]["card"] == MASK  # the whole value, a dict here
    assert shown["kwargs"]["lines"] == [{"sku": "tea", "password": MASK}, {"sku": "mug"}]
    assert shown["kwargs"]["amount"] == 1999
    assert PAYLOAD["kwargs"]["card"] == {"number": CARD, "cvc": "123"}  # a copy was masked
    assert masked(PAYLOAD, ["Card"]) == PAYLOAD  # names are compared as written
    assert masked([{"card": 1}, "card", 2], ("card",)) == [{"card": MASK}, "card", 2]


def test_a_callable_rule_gets_a_copy_and_returns_the_masked_payload() -> None:
    def drop_lines(payload: dict[str, Any]) -> dict[str, Any]:
        payload["kwargs"]["lines"].clear()  # changing what it is given changes no original
        payload["kwargs"]["card"]["number"] = MASK
        return payload

    shown = masked(PAYLOAD, drop_lines)
    assert shown["kwargs"]["card"] == {"number": MASK, "cvc": "123"}
    assert shown["kwargs"]["lines"] == []
    assert len(PAYLOAD["kwargs"]["lines"]) == 2
    text = masked_text(f"card {CARD} declined; hunter22 was the password", PAYLOAD, drop_lines)
    assert text == f"card {MASK} declined; {MASK} was the password"


def test_a_raising_rule_masks_everything_and_logs_no_payload(
        caplog: pytest.LogCaptureFixture) -> None:
    def broken(payload: dict[str, Any]) -> dict[str, Any]:
        raise KeyError(f"no 'card' in {payload}")

    with caplog.at_level(logging.WARNING, "shardq.masking"):
        shown = masked(PAYLOAD, broken)
        masked(PAYLOAD, broken)  # the same failure again: not logged again at once
    assert shown == masked_everything(PAYLOAD)
    [line] = [r.getMessage() for r in caplog.records]
    assert "raised KeyError" in line
    assert CARD not in line
    assert masked_text(f"declined {CARD} for 1999", PAYLOAD, broken) == (
        f"declined {MASK} for {MASK}")


def test_masked_everything_keeps_the_shape() -> None:
    assert masked_everything(PAYLOAD) == {
        "task": MASK, "args": [],
        "kwargs": {"card": {"number": MASK, "cvc": MASK}, "amount": MASK,
                   "lines": [{"sku": MASK, "password": MASK}, {"sku": MASK}]}}
    assert masked_everything([None, True, {}, []]) == [MASK, MASK, {}, []]


def test_masked_text_masks_values_of_four_characters_or_more() -> None:
    payload = {"card": {"number": CARD, "cvc": "123"}, "pin": 98765, "note": "it's 'x'"}
    text = (f"ValueError: card {CARD!r} (cvc 123) declined; pin 98765; note {payload['note']!r}"
            f"; attempt 1 of 123")
    assert masked_text(text, payload, ["card", "pin", "note"]) == (
        f"ValueError: card '{MASK}' (cvc 123) declined; pin {MASK}; note \"{MASK}\"; "
        "attempt 1 of 123")
    # A value holding another is masked whole, the longer first.
    assert masked_text("pw hunter22!", {"a": "hunter22!", "b": "hunter"}, ["a", "b"]) == (
        f"pw {MASK}")
    assert masked_text("nothing", {"a": "x"}, ["a"]) == "nothing"


@pytest.mark.parametrize("rule", ["card", ["card", ""], [1], ("ok", None), {"card"}, 42])
def test_the_decorator_refuses_a_bad_rule(rule: Any) -> None:
    app = shardq.App()
    with pytest.raises(shardq.ConfigError) as refused:
        app.task(redact=rule)(lambda card: None)
    assert "redact of task" in str(refused.value)
    assert "\n" not in str(refused.value)
    with pytest.raises(shardq.ConfigError, match="redact of queue 'raw'"):
        app.handler("raw", redact=rule)(lambda payload: None)
    assert not app.tasks
    assert not app.raw


def test_the_decorator_keeps_the_rule() -> None:
    app = shardq.App()

    def hide(payload: Any) -> Any:
        return payload

    @app.task(redact=["card", "cvc"])
    def pay(card: str, amount: int, *, cvc: str = "") -> None: ...

    @app.task(redact=hide)
    def other() -> None: ...

    @app.periodic(every_s=60, redact=("token",))
    def tick() -> None: ...

    assert (pay.redact, other.redact, tick.redact) == (("card", "cvc"), hide, ("token",))
    assert app.tasks[other.name].redact is hide
    # A card given by position is masked as one given by name.
    call = {"task": pay.name, "args": [CARD, 5], "kwargs": {"cvc": "9999"}}
    handler_rule = app.tasks[pay.name].redact
    assert handler_rule is not None
    assert masked(call, handler_rule) == {"task": pay.name, "args": [MASK, 5],
                                          "kwargs": {"cvc": MASK}}


# -- a real worker ----------------------------------------------------------------------

def run_all(dsn: str, client: shardq.Client, app: shardq.App, queue: str) -> None:
    """Run a worker on ``app`` until no task of ``queue`` is waiting or running."""
    worker = Worker(app, shardq.ClientConfig(dsn=dsn, backoff_base_s=0.001,
                                             backoff_cap_s=0.001, backoff_jitter=0),
                    WorkerConfig(janitors=0, listen=False, ack_flush_ms=50))
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            stats = client.stats(queue)
            if stats["available"] + stats["scheduled"] + stats["locked"] == 0:
                return
            time.sleep(0.05)
        pytest.fail(f"tasks of {queue} still waiting or running: {client.stats(queue)}")
    finally:
        worker.stop(grace_s=5)


def test_a_worker_stores_errors_with_the_values_masked(
        dsn: str, client: shardq.Client, connect: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    queue = f"pay-{uuid.uuid4().hex[:8]}"
    app = shardq.App(dsn)
    long = "s3cr3t-" + "x" * MAX_ERROR_CHARS  # the text is cut to size, masked before the cut

    @app.task(queue=queue, max_attempts=2, redact=["card", "password"])
    def pay(card: str, amount: int, *, password: str) -> None:
        raise ValueError(f"card {card} declined for {amount} (password {password!r})")

    @app.task(queue=queue, redact=lambda p: {**p, "args": ["hidden"]})
    async def use(token: str) -> None:  # run by the event loop's slots
        raise shardq.Fail(f"token {token} refused")

    paid = pay.enqueue(CARD, 1999, password="hunter22")
    cut = pay.enqueue("1234", 5, password=long)
    used = use.enqueue("tok-abcdefghijkl")
    with caplog.at_level(logging.WARNING, "shardq.worker"):
        run_all(dsn, client, app, queue)
    rows = dict(connect.execute("SELECT id, last_error FROM shardq.tasks WHERE queue = %s "
                                "AND status = 'dead'", (queue,)).fetchall())
    assert set(rows) == {paid, cut, used}
    attempts = [e for (e,) in connect.execute(
        "SELECT error FROM shardq.attempts WHERE queue = %s", (queue,)).fetchall()]
    assert len(attempts) == 2 + 2 + 1
    for error in [*rows.values(), *attempts]:
        assert error is not None
        for secret in (CARD, "hunter22", "s3cr3t", "tok-abcdefghijkl"):
            assert secret not in error
    assert f"card {MASK} declined for 1999 (password '{MASK}')" in rows[paid]
    assert f"card {MASK} declined for 5 (password '{MASK}')" in rows[cut]
    assert rows[used].endswith(f"Fail: token {MASK} refused\n")
    # The worker's failure lines are masked too.
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "declined" in logged
    for secret in (CARD, "hunter22", "tok-abcdefghijkl"):
        assert secret not in logged
