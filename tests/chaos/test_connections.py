"""The pool after a server restart, leases of outcomes waiting to be written, and a
worker's LISTEN connection through an outage."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import shardq
from shardq.core import listen
from shardq.core.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from shardq.worker.notifier import Listener
from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(180)


def test_after_a_restart_the_pool_hands_out_no_dead_connection(
        chaos_pg: ThrowawayPostgres) -> None:
    """A restart ends every pooled connection.  The first statement that meets a dead one
    replaces the idle ones too, so the retry gets a live connection rather than spending
    its tries on the pool's other dead ones."""
    if not chaos_pg.running:
        chaos_pg.start()
    url = chaos_pg.url(chaos_pg.create_database())
    with shardq.Client(url, pool_max_size=8) as client:
        pool = client.db.pool
        # Open all eight connections, then give them back idle.
        held = [pool.getconn() for _ in range(8)]
        for conn in held:
            pool.putconn(conn)
        chaos_pg.restart("fast")
        started = time.monotonic()
        assert client.stats("q")["available"] == 0
        assert time.monotonic() - started < 10
        assert pool.get_stats().get("connections_lost", 0) <= 2


def test_an_outcome_waiting_to_be_written_keeps_its_lease(chaos_pg: ThrowawayPostgres) -> None:
    """The lease keeper goes on extending a task whose handler finished while its ack
    waits in the completer: the ack cannot land after the lease ran out."""
    if not chaos_pg.running:
        chaos_pg.start()
    url = chaos_pg.url(chaos_pg.create_database())
    app = shardq.App(url)
    done = threading.Event()

    @app.handler("slow-acks")
    def handle(payload: dict[str, Any]) -> None:
        done.set()

    with shardq.Client(url) as client:
        client.enqueue("slow-acks", {})
        # Acks wait up to 8 s to be written, on a 3 s lease heartbeated every second.
        worker = Worker(app, ClientConfig(dsn=url, lease_s=3),
                        WorkerConfig(janitors=0, listen=False, ack_flush_ms=8000, ack_batch=100))
        worker.start()
        try:
            assert done.wait(30)
            time.sleep(5)  # past the lease the claim gave, before the ack is written
            with psycopg.connect(url) as conn:
                row = conn.execute("SELECT status, exec_time > now() FROM shardq.tasks"
                                   ).fetchone()
            assert row == ("locked", True)  # still held, its lease extended
            wait_for(lambda: client.stats("slow-acks")["locked"] == 0, timeout=30,
                     what="the ack to be written")
        finally:
            worker.stop(5)
        figures = client.stats("slow-acks")
        assert (figures["available"], figures["locked"], figures["dead"]) == (0, 0, 0)


def test_a_listener_says_once_that_it_lost_its_connection_and_comes_back(
        chaos_pg: ThrowawayPostgres, caplog: pytest.LogCaptureFixture) -> None:
    """A worker's LISTEN connection tries again every second while the server is away
    (a failover takes seconds): one warning for the outage, not one per try, and a line
    when it LISTENs again, at the same level, whereupon it wakes the claimers (notes may
    have been missed)."""
    if not chaos_pg.running:
        chaos_pg.start()
    url = chaos_pg.url(chaos_pg.create_database())
    woken: list[tuple[str | None, int | None]] = []
    listener = Listener(url, {"q"}, lambda queue, bucket: woken.append((queue, bucket)),
                        connect_timeout_s=2)
    # At WARNING: whoever sees the outage's line sees the line of its end too.
    with caplog.at_level(logging.WARNING, logger="shardq.worker"):
        listener.start()
        try:
            wait_for(lambda: woken == [(None, None)], 30, what="the first LISTEN")
            chaos_pg.outage(3.5)  # the listener tries again three or four times meanwhile
            wait_for(lambda: len(woken) == 2, 30, what="the listener to come back")
        finally:
            listener.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "shardq.worker"]
    assert sum("LISTEN connection lost" in line for line in lines) == 1, lines
    assert sum("LISTEN connection back" in line for line in lines) == 1, lines


def test_a_listener_whose_server_went_silent_listens_again(
        chaos_pg: ThrowawayPostgres, proxy: Proxy) -> None:
    """A primary that dies without closing its connections (a crashed host) leaves the
    LISTEN connection open and silent.  The listener checks a silent connection, finds
    it dead, and LISTENs again on a server that answers: notes reach the worker again."""
    if not chaos_pg.running:
        chaos_pg.start()
    db = chaos_pg.create_database()
    woken: list[tuple[str | None, int | None]] = []
    listener = Listener(proxy.url(db), {"q"}, lambda queue, bucket: woken.append(
        (queue, bucket)), connect_timeout_s=2)
    listener.start()
    try:
        wait_for(lambda: woken == [(None, None)], 30, what="the first LISTEN")
        proxy.half_open(True)  # the open connection is frozen for good
        time.sleep(0.5)
        proxy.half_open(False)  # new connections go through
        wait_for(lambda: len(woken) == 2, 30, what="the listener to LISTEN again")
        with psycopg.connect(chaos_pg.url(db), autocommit=True) as conn:
            conn.execute("SELECT pg_notify('shardq', 'q:3')")
        wait_for(lambda: ("q", 3) in woken, 10, what="a note through the new connection")
    finally:
        listener.stop()


def _notify_until(url: str, channel: str, payload: str, heard: Callable[[], bool]) -> bool:
    """Send ``payload`` on ``channel`` every half second until ``heard()``; whether it was
    heard within 20 s."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(40):
            conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))
            if heard():
                return True
            time.sleep(0.5)
    return heard()


BACK = "the results listener is connected again"


def test_a_results_listener_whose_server_went_silent_listens_again(
        chaos_pg: ThrowawayPostgres, proxy: Proxy, caplog: pytest.LogCaptureFixture) -> None:
    """The client's results listener (blocking and asyncio) checks a silent connection
    too: after its server vanished without closing it, it connects again, and
    notifications reach the waiting calls again."""
    if not chaos_pg.running:
        chaos_pg.start()
    db = chaos_pg.create_database()

    def back(times: int) -> bool:
        return sum(BACK in r.getMessage() for r in caplog.records) >= times

    caplog.set_level(logging.INFO, logger="shardq")
    blocking = listen.Listener(proxy.url(db), "shardq_results", connect_timeout_s=2)
    event = blocking.subscribe("p")
    try:
        proxy.half_open(True)
        time.sleep(0.5)
        proxy.half_open(False)
        wait_for(lambda: back(1), 30, what="the blocking listener to connect again")
        event.clear()  # set by the wake-ups of a lost and a new connection
        assert _notify_until(chaos_pg.url(db), "shardq_results", "p", event.is_set)
    finally:
        blocking.close()

    async def asyncio_listener() -> bool:
        listener = listen.AsyncListener(proxy.url(db), "shardq_results", connect_timeout_s=2)
        event = await listener.subscribe("p")
        try:
            proxy.half_open(True)
            await asyncio.sleep(0.5)
            proxy.half_open(False)
            for _ in range(300):
                if back(2):
                    break
                await asyncio.sleep(0.1)
            event.clear()
            return await asyncio.to_thread(_notify_until, chaos_pg.url(db), "shardq_results",
                                           "p", event.is_set)
        finally:
            await listener.close()

    assert asyncio.run(asyncio_listener()), "the asyncio listener heard nothing"
