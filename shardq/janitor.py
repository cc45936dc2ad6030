"""The janitor: rescues tasks whose lease expired and applies due priority head starts.

It is separate from the claimers and safe to run in several processes at once:
every statement takes its rows with ``FOR UPDATE SKIP LOCKED`` and re-checks
their state, one bounded batch of one bucket at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shardq.db import Conn
from shardq.loop import Loop

if TYPE_CHECKING:
    from shardq.client import Client


@dataclass(frozen=True)
class JanitorReport:
    """What one janitor pass did."""

    rescued: int = 0
    """Tasks whose lease expired, put back in line with backoff."""
    dead: int = 0
    """Tasks whose lease expired on their last attempt, now dead."""
    promoted: int = 0
    """Scheduled tasks that became due and got their priority head start."""
    purged: int = 0
    """Dead tasks deleted because they were older than the retention."""

    def __add__(self, other: JanitorReport) -> JanitorReport:
        return JanitorReport(self.rescued + other.rescued, self.dead + other.dead,
                             self.promoted + other.promoted, self.purged + other.purged)

    @property
    def total(self) -> int:
        """Rows changed in the pass."""
        return self.rescued + self.dead + self.promoted + self.purged


def _drain(client: Client, name: str, bucket: int,
           count: Callable[[list[tuple[Any, ...]]], JanitorReport]) -> JanitorReport:
    """Repeat one bounded statement on a bucket until a batch comes back short."""
    limit = client.config.janitor_batch
    query = client._query(name, limit)
    report = JanitorReport()

    def work(conn: Conn) -> list[tuple[Any, ...]]:
        params = client._params(bucket=bucket, dead_retention_s=client.config.dead_retention_s)
        return conn.execute(query, params).fetchall()

    while True:
        rows = client.db.run(work)
        report += count(rows)
        if len(rows) < limit:
            return report


def _rescued(rows: list[tuple[Any, ...]]) -> JanitorReport:
    dead = sum(1 for row in rows if row[1] == "dead")
    return JanitorReport(rescued=len(rows) - dead, dead=dead)


def _promoted(rows: list[tuple[Any, ...]]) -> JanitorReport:
    return JanitorReport(promoted=len(rows))


def _purged(rows: list[tuple[Any, ...]]) -> JanitorReport:
    return JanitorReport(purged=len(rows))


def janitor_pass(client: Client) -> JanitorReport:
    """One pass over every bucket of the schema."""
    report = JanitorReport()
    for bucket in range(client.bucket_count):
        report += _drain(client, "janitor_promote", bucket, _promoted)
        report += _drain(client, "janitor_rescue", bucket, _rescued)
        if client.dialect == "postgresql":  # keyed tasks exist on PostgreSQL only
            report += _drain(client, "janitor_rescue_keyed", bucket, _rescued)
        if client.config.dead_retention_s is not None:
            report += _drain(client, "janitor_purge_dead", bucket, _purged)
    return report


class Janitor(Loop[JanitorReport]):
    """Runs :func:`janitor_pass` every ``interval_s`` in a background thread."""

    def __init__(self, client: Client, interval_s: float = 1.0) -> None:
        super().__init__("shardq-janitor", interval_s)
        self.client = client

    def run_once(self) -> JanitorReport:
        """One pass over every bucket."""
        return janitor_pass(self.client)
