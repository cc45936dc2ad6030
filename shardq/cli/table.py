"""``shardq stats`` and ``shardq top``: every queue's figures as a terminal table.

``top`` redraws the table every second (like ``top``) with :mod:`rich`'s live display
and quits on ``q`` (or Ctrl-C).  Each refresh reads every queue's figures once
(:func:`shardq.ops.queuestats.queues`), in bounded time however large the table.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import time
import tty
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from shardq.ops.queuestats import QueueStats
from shardq.text.figures import count, duration, paused
from shardq.text.limits import summary

REFRESH_S = 1.0


def table(figures: list[QueueStats]) -> Table:
    """One row per queue: counts (``~n ±e`` when estimated), rates, lag, ETA, paused or
    saturated, and the limits with their use (a column only when a queue has limits)."""
    grid = Table(expand=False)
    limited = any(f.limited for f in figures)
    columns = ("queue", "avail", "sched", "parked", "locked", "dead", "in/s", "out/s", "lag",
               "eta", "state") + (("limits",) if limited else ())
    for name in columns:
        # A pause's end makes the state long: it wraps before any figure is cut short.
        grid.add_column(name, justify="left" if name in ("queue", "state", "limits")
                        else "right", no_wrap=name != "state")
    for f in figures:
        grid.add_row(f.queue, count(f, "available"), count(f, "scheduled"), count(f, "parked"),
                     count(f, "locked"), count(f, "dead"), f"{f.enqueued_per_s:.1f}",
                     f"{f.completed_per_s:.1f}", duration(f.lag_s), duration(f.drain_eta_s),
                     _state(f), *((summary(f),) if limited else ()))
    return grid


def _state(f: QueueStats) -> Text | str:
    """Paused, saturated (``max_running`` full while due tasks wait), or nothing."""
    if f.paused:
        return Text(paused(f), style="bold yellow")
    return Text("saturated", style="bold red") if f.saturated else ""


def show(figures: list[QueueStats]) -> None:
    """Print the table once (``shardq stats``)."""
    # Piped output is not cut to a terminal's width.
    Console(width=None if sys.stdout.isatty() else 160).print(table(figures))


def _screen(figures: list[QueueStats], took_s: float) -> Group:
    heading = Text(f"shardq top — {datetime.now().strftime('%H:%M:%S')} — {len(figures)} "
                   f"queue(s), read in {took_s * 1000:.0f} ms — q quits", style="bold")
    return Group(heading, table(figures))


@contextmanager
def _keys() -> Iterator[Callable[[float], str]]:
    """A reader of single key presses (waiting up to a timeout) while the terminal is in
    cbreak mode; restored on exit."""
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def read(timeout_s: float) -> str:
        ready, _, _ = select.select([fd], [], [], timeout_s)
        return os.read(fd, 32).decode(errors="replace") if ready else ""

    try:
        yield read
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def top(read: Callable[[], list[QueueStats]], console: Console | None = None) -> None:
    """Show ``read()``'s figures, refreshed every second, until ``q`` or Ctrl-C."""
    console = console or Console()
    with _keys() as key, Live(console=console, screen=True, auto_refresh=False) as live:
        try:
            while True:
                start = time.monotonic()
                figures = read()
                live.update(_screen(figures, time.monotonic() - start), refresh=True)
                until = start + REFRESH_S
                while (left := until - time.monotonic()) > 0:
                    if "q" in key(left).lower():
                        return
        except KeyboardInterrupt:
            return
