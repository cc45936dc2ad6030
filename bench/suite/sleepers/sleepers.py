"""The slot-scaling scenario's raw handlers: they sleep, as I/O-bound handlers wait.

Standard library only, in a directory of its own that ``shardq consume`` is started
in (``sleepers:sync_1ms``): the same module then serves the worker of this tree and
of an exported earlier tree (whose ``bench`` package has no such module).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any


def sync_1ms(payload: Any) -> None:
    """Block the slot's thread for 1 ms."""
    time.sleep(0.001)


def sync_10ms(payload: Any) -> None:
    """Block the slot's thread for 10 ms."""
    time.sleep(0.01)


async def async_1ms(payload: Any) -> None:
    """Wait 1 ms on the event loop."""
    await asyncio.sleep(0.001)


async def async_10ms(payload: Any) -> None:
    """Wait 10 ms on the event loop."""
    await asyncio.sleep(0.01)
