"""What the flow-control benchmark (:mod:`bench.flow`) observes: the handler runs
its worker processes record (:mod:`bench.flow.app`), and the capacity slots held, as
the database shows them."""

from __future__ import annotations

import threading

import psycopg

from bench import harness
from bench.flow.app import records_dir

QUEUE = harness.QUEUE


def recorded(url: str) -> list[list[str]]:
    """The recorded handler runs of ``url``'s database: start, end, group, lease end."""
    folder = records_dir(url)
    if not folder.is_dir():
        return []
    return [line.split("\t") for path in folder.glob("*.tsv")
            for line in path.read_text().splitlines() if line.count("\t") == 3]


def starts(url: str, group: str | None = None) -> list[tuple[float, float]]:
    """(start, end) of the recorded handlers (of ``group``), by start."""
    return sorted((float(a), float(b)) for a, b, g, _ in recorded(url)
                  if group is None or g == group)


def max_overlap(spans: list[tuple[float, float]]) -> int:
    """The most of ``spans`` (start, end) open at one instant (an end before a start)."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    most = running = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


class SlotSampler:
    """Samples, every 20 ms in a thread, how many of the queue's running tasks hold a
    slot of its ``max_running`` (whether the limit is used, seen from the database)."""

    def __init__(self, url: str) -> None:
        self.url, self.samples = url, [0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="slot-sampler")

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(0.02):
                self.samples.append(int(harness.scalar(
                    conn, "SELECT count(*) FROM shardq.tasks WHERE queue = %s "
                          "AND status = 'locked' AND slot IS NOT NULL", (QUEUE,))))

    def __enter__(self) -> SlotSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def busy(self) -> list[int]:
        """The samples from the first to the last with a slot held."""
        held = [i for i, n in enumerate(self.samples) if n]
        return self.samples[held[0]:held[-1] + 1] if held else []


def per_second(starts: list[float]) -> list[int]:
    """Starts in each whole second from the first start on (the last, partial one left
    out)."""
    if not starts:
        return []
    whole = int(starts[-1] - starts[0])
    counts = [0] * whole
    for t in starts:
        second = int(t - starts[0])
        if second < whole:
            counts[second] += 1
    return counts
