"""The soak's producer: enqueues tasks at a fixed rate, plus a stream of delayed ones.

``python -m bench.soak.producer URL --rate 1000 --delayed 2000 --delay-s 120``: every
tick (50 ms) one ``enqueue_many`` of ``rate / 20`` due tasks; and delayed tasks at
``delayed / delay_s`` per second, each ``delay_s`` ahead, so that about ``delayed``
stand in the table at any time (the harness seeds the first ``delayed`` with delays
spread over ``delay_s``).  A tick that falls behind enqueues what it owes.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

import shardq
from bench.soak.app import QUEUE

TICK_S = 0.05
TASK = "bench.soak.app.work"


def payloads(n: int, due: float) -> list[dict[str, Any]]:
    """``n`` task payloads for the soak app's ``work``, due at epoch second ``due``."""
    return [{"task": TASK, "args": [], "kwargs": {"t": due}} for _ in range(n)]


def seed(client: shardq.Client, delayed: int, delay_s: float) -> None:
    """The standing backlog: ``delayed`` tasks due evenly over the next ``delay_s``."""
    now = time.time()
    for i in range(delayed):
        offset = delay_s * (i + 1) / delayed
        client.enqueue_many(QUEUE, payloads(1, now + offset), delay_s=offset)


def main() -> None:
    """Enqueue until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m bench.soak.producer")
    parser.add_argument("url")
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--delayed", type=int, default=2000)
    parser.add_argument("--delay-s", type=float, default=120.0)
    args = parser.parse_args()
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    owed = owed_delayed = 0.0
    with shardq.Client(args.url) as client:
        last = time.monotonic()
        while not stop:
            now = time.monotonic()
            owed += (now - last) * args.rate
            owed_delayed += (now - last) * args.delayed / args.delay_s
            last = now
            if owed >= 1:
                n, owed = int(owed), owed - int(owed)
                client.enqueue_many(QUEUE, payloads(n, time.time()))
            if owed_delayed >= 1:
                n, owed_delayed = int(owed_delayed), owed_delayed - int(owed_delayed)
                client.enqueue_many(QUEUE, payloads(n, time.time() + args.delay_s),
                                    delay_s=args.delay_s)
            time.sleep(max(0.0, TICK_S - (time.monotonic() - now)))
    sys.exit(0)


if __name__ == "__main__":
    main()
