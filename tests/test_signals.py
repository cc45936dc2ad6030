"""Signals that stop a command set an event that the main thread waits on
(shardq.core.signals), however often they land while it waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.daemons import ROOT

# The main thread enters and leaves Event.wait on the event the signals set, as fast as
# it can, until SIGUSR2; SIGUSR1 comes thousands of times meanwhile.  A handler that
# set the event itself would find the event's lock held by the main thread sooner or
# later, and wait for it for ever.
CHILD = """
import signal, sys
from shardq.core.signals import stop_on_signals

for sig in (signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(sig, signal.SIG_IGN)  # what the block puts back: late signals do nothing
seen = []
with stop_on_signals((signal.SIGUSR1, signal.SIGUSR2),
                     on_signal=lambda sig, n: seen.append(sig)) as stop:
    print("ready", flush=True)
    woke = 0
    while signal.SIGUSR2 not in seen:
        if stop.wait(0.00001):
            stop.clear()
            woke += 1
print(len(seen), woke, flush=True)
"""


def test_signals_that_land_while_the_main_thread_waits_on_the_event_are_all_taken() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    sent, until = 0, time.monotonic() + 1.0
    while time.monotonic() < until:
        os.kill(child.pid, signal.SIGUSR1)
        sent += 1
        time.sleep(0.0002)
    os.kill(child.pid, signal.SIGUSR2)
    try:
        out, _ = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        raise AssertionError(f"the process hung after {sent} signals") from None
    assert child.returncode == 0, out
    seen, woke = (int(n) for n in out.split())
    # Signals sent faster than they are handled may merge into one; each one handled
    # came through the pipe and set the event.
    assert 1 < seen <= sent + 1
    assert woke >= 1
