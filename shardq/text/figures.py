"""Figures for people: short counts, estimates with their error, durations.

Shared by the terminal views (``shardq stats``/``top``) and the web dashboard, so a
figure reads the same everywhere.
"""

from __future__ import annotations

from datetime import UTC

from shardq.ops.queuestats import QueueStats


def short(value: float) -> str:
    """``1234567`` as ``1.23M``; below ten thousand, the whole number with separators."""
    for threshold, size, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if abs(value) >= threshold:
            return f"{value / size:.3g}{suffix}"
    return f"{value:,.0f}"


def count(figures: QueueStats, state: str) -> str:
    """An exact count as is; an estimate as ``~n±e%``."""
    value: int = getattr(figures, state)
    error = figures.error.get(state)
    if error is None:
        return short(value)
    return f"~{short(value)}±{100 * error / max(value, 1):.0f}%"


def duration(value: float | None) -> str:
    """Seconds as ``12.3s``, ``4.5m`` or ``2.0h``; None as ``-``."""
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.1f}s"
    if value < 7200:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"


def paused(figures: QueueStats) -> str:
    """``paused``, or ``paused until 2026-12-01 09:00:00 UTC`` when the pause ends by
    itself; empty when the queue is not paused."""
    if not figures.paused:
        return ""
    if figures.paused_until is None:
        return "paused"
    return f"paused until {figures.paused_until.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
