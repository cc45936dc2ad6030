"""What the reshard study's measurements share: the reshard's steps with their times and
phases, the machine's load, and a goal's verdict."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from bench import harness
from shardq.ops.reshard import Step

PHASES = ("build", "switch", "retire")
FROM, TO = 16, 64  # the reshard measured: a schema of 16 buckets to 64


def load_1m() -> float:
    """The machine's 1-minute load average now."""
    return os.getloadavg()[0]


def named(url: str, application_name: str) -> str:
    """``url`` with ``application_name`` set (what ``pg_stat_activity`` shows)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "application_name"]
    query.append(("application_name", application_name))
    return urlunsplit(parts._replace(query=urlencode(query)))


def verdict(value: float, goal: float, at_least: bool) -> str:
    """``met`` or ``missed``: ``value`` against a lower (``at_least``) or upper bound."""
    return "met" if (value >= goal if at_least else value <= goal) else "**missed**"


@dataclass
class Timeline:
    """A reshard's steps (``on_step``), each with the seconds since ``began`` at which it
    ended and the phase of ``shardq.layout`` after it (read on a connection of its own)."""

    url: str
    began: float = field(default_factory=time.perf_counter)
    steps: list[tuple[float, str, str, bool]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.conn = psycopg.connect(self.url, autocommit=True)

    def __call__(self, step: Step) -> None:
        at = time.perf_counter() - self.began
        phase = str(harness.scalar(self.conn, "SELECT phase FROM shardq.layout"))
        self.steps.append((at, step.did, phase, step.contended))

    def close(self) -> None:
        """Close the phase-reading connection."""
        self.conn.close()

    @property
    def seconds(self) -> float:
        """From the call to the last step."""
        return self.steps[-1][0] if self.steps else 0.0

    def phases(self) -> dict[str, float]:
        """Seconds spent in each phase: a step's time counts for the phase it ran in (the
        phase the step before it left; the first step, which begins the build, for build)."""
        out = dict.fromkeys(PHASES, 0.0)
        before, phase = 0.0, "build"
        for at, _did, after, _contended in self.steps:
            out[phase if phase in out else "build"] += at - before
            before, phase = at, after
        return out

    def contended(self) -> int:
        """Catalog changes whose lock was not granted within the timeout (tried again)."""
        return sum(1 for step in self.steps if step[3])

    def lines(self, title: str) -> list[str]:
        """The phases' durations and the steps (a step repeated in a row shown once)."""
        phases = self.phases()
        rows: list[list[object]] = [[name, phases[name]] for name in PHASES]
        rows.append(["total", self.seconds])
        lines = [f"{title}: {self.seconds:.2f} s, {self.contended()} catalog change(s) "
                 "refused their lock and tried again", "",
                 harness.markdown_table(["phase", "seconds"], rows), ""]
        merged: list[tuple[float, float, int, str, str]] = []
        before = 0.0
        for at, did, phase, _contended in self.steps:
            if merged and merged[-1][3] == did:
                start, _end, n, _did, _phase = merged[-1]
                merged[-1] = (start, at, n + 1, did, phase)
            else:
                merged.append((before, at, 1, did, phase))
            before = at
        rows = [[f"{start:.3f}", f"{end:.3f}", n, did, phase]
                for start, end, n, did, phase in merged]
        return [*lines, harness.markdown_table(
            ["from s", "to s", "steps", "did", "phase after"], rows), ""]


GOAL_HEADERS = ["goal", "figure", "value", "goal", "verdict"]


def goal_table(rows: list[list[object]]) -> str:
    """The goals' rows as a table: what, the figure, its value, the goal, met or missed."""
    return harness.markdown_table(GOAL_HEADERS, rows)


def with_goals(goals: list[list[object]], lines: list[str], rows: list[list[object]]
               ) -> list[str]:
    """A section's ``lines``; its goal ``rows`` added to ``goals`` (the report's summary)."""
    goals.extend(rows)
    return lines
