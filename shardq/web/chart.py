"""The hour's throughput as an SVG picture: tasks enqueued and completed per minute.

Drawn on the server (no script, no chart library): two lines over sixty minutes, a
scale, and a legend.  Only numbers and fixed words go into the picture.  The scale is
tasks per second, or per minute for a queue slower than one task a second, and its top
is a round number (1, 2 or 5 times a power of ten), so its three ticks read as they are.
"""

from __future__ import annotations

import math
from datetime import datetime

from shardq.ops.history import Minute
from shardq.text.figures import short

WIDTH, HEIGHT = 720, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 24, 28
SERIES = (("enqueued", "#2f6fdf"), ("completed", "#1a9d55"))
PER_MINUTE_BELOW = 1.0  # tasks/s under which the scale counts per minute


def _unit(peak_per_s: float) -> tuple[str, float]:
    """The scale's unit for a peak rate (tasks/s) and the factor from tasks/s to it."""
    return ("/min", 60.0) if peak_per_s < PER_MINUTE_BELOW else ("/s", 1.0)


def _round_top(peak: float) -> float:
    """The smallest of 1, 2 or 5 times a power of ten at or above ``peak`` (at least 1)."""
    if peak <= 1:
        return 1.0
    power = 10.0 ** math.floor(math.log10(peak))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= peak * (1 - 1e-12))


def _tick(value: float) -> str:
    """A tick's number: 0.5, 2.5 or 5,000 as they are, larger ones shortened (25k)."""
    return short(value) if value >= 1e4 else f"{value:,g}"


def svg(minutes: list[Minute], now: datetime) -> str:
    """The picture of ``minutes`` (oldest first), per-minute counts shown as tasks/s; the
    current minute's rate is over its seconds so far, so the line does not drop at the end."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    spans = [60.0] * len(minutes)
    if minutes:
        spans[-1] = min(60.0, max(1.0, (now - minutes[-1].at).total_seconds()))
    per_s = {name: [getattr(m, name) / s for m, s in zip(minutes, spans, strict=True)]
             for name, _ in SERIES}
    unit, factor = _unit(max([0.0, *per_s["enqueued"], *per_s["completed"]]))
    rates = {name: [v * factor for v in values] for name, values in per_s.items()}
    top = _round_top(max([0.0, *rates["enqueued"], *rates["completed"]]))
    step = plot_w / max(len(minutes) - 1, 1)
    words = "minute" if unit == "/min" else "second"

    def point(i: int, value: float) -> str:
        return f"{LEFT + i * step:.1f},{TOP + plot_h * (1 - value / top):.1f}"

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'width="{WIDTH}" height="{HEIGHT}" role="img" '
             f'aria-label="tasks per {words} over the last hour" class="chart">',
             f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa" '
             'stroke="#ddd"/>']
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - fraction)
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
                     'stroke="#e6e6e6"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
                     f'font-size="11">{_tick(top * fraction)}{unit}</text>')
    span = len(minutes)
    for label, x in ((f"-{span}m", LEFT), (f"-{span // 2}m", LEFT + plot_w / 2),
                     ("now", LEFT + plot_w)):
        parts.append(f'<text x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="middle" '
                     f'font-size="11">{label}</text>')
    for n, (name, colour) in enumerate(SERIES):
        if len(minutes) > 1:
            line = " ".join(point(i, v) for i, v in enumerate(rates[name]))
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                         f'points="{line}" class="series-{name}"/>')
        parts.append(f'<text x="{LEFT + 8 + 110 * n}" y="{TOP - 8}" font-size="12" '
                     f'fill="{colour}">— {name}{unit}</text>')
    if not minutes or not any(rates["enqueued"] + rates["completed"]):
        parts.append(f'<text x="{LEFT + plot_w / 2}" y="{TOP + plot_h / 2}" '
                     'text-anchor="middle" font-size="13" fill="#888">no tasks counted '
                     'in the last hour</text>')
    parts.append("</svg>")
    return "".join(parts)
