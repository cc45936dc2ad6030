"""The handler slots' event loop: epoll, waited on with microsecond timeouts."""

from __future__ import annotations

import asyncio
import os
import selectors
import time

import pytest

from shardq.worker import eventloop
from shardq.worker.eventloop import FineEpollSelector, new_loop

pytestmark = pytest.mark.skipif(not hasattr(selectors, "EpollSelector"), reason="no epoll")


def test_the_loop_waits_with_the_fine_selector_and_runs_coroutines() -> None:
    loop = new_loop()
    try:
        assert isinstance(loop, asyncio.SelectorEventLoop)
        assert isinstance(loop._selector, FineEpollSelector)  # type: ignore[attr-defined]  # noqa: SLF001
        assert loop.run_until_complete(asyncio.sleep(0.0003, result="slept")) == "slept"
    finally:
        loop.close()


def test_a_wait_returns_the_ready_descriptors_at_once_and_nothing_on_timeout() -> None:
    reader, writer = os.pipe()
    selector = FineEpollSelector()
    try:
        selector.register(reader, selectors.EVENT_READ, "the pipe")
        began = time.monotonic()
        assert selector.select(0.0015) == []
        assert time.monotonic() - began >= 0.0015  # never short of its timeout
        os.write(writer, b"x")
        [(key, events)] = selector.select(5.0)
        assert (key.data, events) == ("the pipe", selectors.EVENT_READ)
        assert selector.select(None)[0][0].data == "the pipe"  # no timeout: as epoll
        assert selector.select(0)[0][0].data == "the pipe"
    finally:
        selector.close()
        os.close(reader)
        os.close(writer)


def test_a_descriptor_select_cannot_take_falls_back_to_the_default_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eventloop, "FD_SETSIZE", 0)
    loop = new_loop()
    try:
        assert not isinstance(loop._selector, FineEpollSelector)  # type: ignore[attr-defined]  # noqa: SLF001
        assert loop.run_until_complete(asyncio.sleep(0, result=1)) == 1
    finally:
        loop.close()
