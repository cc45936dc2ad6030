"""A durable task's checkpoints, wait and attempts, for people: shared by ``shardq task
show`` and the dashboard, so they read the same everywhere."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from shardq.core.task import Attempt, Step, Waiting

VALUE_WIDTH = 60  # characters of a step's value the terminal shows
WHAT = {"sleep": "a sleep", "children": "its children"}


def cut(value: Any, width: int = VALUE_WIDTH) -> str:
    """``value`` as compact JSON, cut to ``width`` characters (``…`` marks the cut)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= width else text[:width - 1] + "…"


def waiting(found: Waiting) -> str:
    """What a parked task waits for, and its deadline: ``event 'paid' until 2030-01-01
    12:00:00+00:00``, ``its children, no deadline``."""
    what = f"event {found.event!r}" if found.reason == "event" else WHAT[found.reason]
    return what + (f" until {found.until}" if found.until is not None else ", no deadline")


def outcomes(history: Sequence[Attempt]) -> list[str]:
    """Each attempt's outcome as shown: the claim that follows a park is the task woken
    (``woken, acked``)."""
    shown, parked = [], False
    for attempt in history:
        shown.append(f"woken, {attempt.outcome}" if parked else attempt.outcome)
        parked = attempt.outcome == "parked"
    return shown


def steps_table(steps: Sequence[Step]) -> str:
    """A durable task's checkpoints as a plain table: name, kind, state, deadline and
    value (cut short), in the order they were written."""
    lines = ["steps:", f"{'name':<24}  {'kind':<5}  {'state':<9}  {'until':<25}  value"]
    for s in steps:
        until = "-" if s.until is None else s.until.isoformat(timespec="seconds")
        lines.append(f"{s.name:<24}  {s.kind:<5}  {s.state:<9}  {until:<25}  {cut(s.value)}")
    return "\n".join(lines)
