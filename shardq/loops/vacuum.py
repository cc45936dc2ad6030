"""The janitor's vacuum step: keeps shardq.tasks' dead rows and index bloat down.

Every task leaves dead row versions behind (its claim's update, its ack's delete),
and every claim moves its row within the primary key, so a queue at a steady rate
makes dead rows at that rate.  Autovacuum looks at a database once per
``autovacuum_naptime`` (a server-wide minute by default), and in between claims step
over ever more dead index entries.  This step reads the table's dead rows every
``vacuum_interval_s`` and, past ``vacuum_dead_rows``, runs ``VACUUM`` on it; every
``reindex_interval_s`` it also rebuilds (``REINDEX INDEX CONCURRENTLY``, no lock on
claims) the one index most past ``reindex_bloat_ratio`` times the size its entries
need, if it is over ``reindex_min_bytes``.

Safe with several janitors: the work is done under a session advisory lock that
only one may hold; the others skip their turn.  Bounded: one VACUUM of one table
and at most one REINDEX per step, each under the client's ``statement_timeout_s``;
a step cut short there is not retried, and the next waits longer each time (8
intervals, doubling, up to ten minutes).
A role that may not maintain the table (not its owner; PostgreSQL 17+: no MAINTAIN)
is told once in the log and in the step's report, and the table is left to
autovacuum.  PostgreSQL only (``Dialect.vacuum``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shardq.core import sqlfiles
from shardq.core.config import ClientConfig
from shardq.core.db import Conn
from shardq.core.errors import ConnectionLost
from shardq.core.loop import Loop
from shardq.core.statements import Statements
from shardq.loops.janitor import HasStatements

log = logging.getLogger("shardq")

LOCK_KEY = int.from_bytes(b"shardqVC", "big")  # the advisory lock of the vacuum step
MAINTAIN_SINCE = 170000  # server_version_num of the first PostgreSQL with MAINTAIN
FILL = 0.9  # B-tree leaf pages are filled to 90% when built
MAX_BACKOFF_S = 600.0  # longest wait after a step was cut short
# The names REINDEX CONCURRENTLY gives its new copy and, after the swap, the old index
# (both invalid until the rebuild is over, and left so if it is interrupted).
LEFTOVER = re.compile(r"_cc(new|old)\d*$")


@dataclass(frozen=True)
class Reindexed:
    """One index rebuilt: its name and size before and after."""

    index: str
    bytes_before: int
    bytes_after: int


@dataclass(frozen=True)
class VacuumReport:
    """What one step of :class:`Vacuumer` did."""

    dead_rows: int | None = None
    """shardq.tasks' dead rows as the statistics had them when the step began."""
    vacuumed: bool = False
    """Whether the step ran VACUUM on the table."""
    reindexed: tuple[Reindexed, ...] = ()
    """Indexes rebuilt by the step (at most one)."""
    dropped: tuple[str, ...] = ()
    """Invalid index copies left by an interrupted rebuild (``*_ccnew``, ``*_ccold``),
    dropped."""
    skipped: str | None = None
    """Why the step did nothing it was due to: not permitted, or another janitor's turn."""


@dataclass(frozen=True)
class Look:
    """The table as the step found it."""

    dead: int
    live: int
    vacuums: int
    permitted: bool
    owner: str
    role: str


def look_at(conn: Conn) -> Look:
    """shardq.tasks' dead and live rows, and whether this role may VACUUM and REINDEX it."""
    row = conn.execute(sqlfiles.text("vacuum_look")).fetchone()
    assert row is not None  # the table exists: the caller read its layout
    dead, live, vacuums, owns, version, owner, role = row
    permitted = bool(owns)
    if not permitted and version >= MAINTAIN_SINCE:
        granted = conn.execute(sqlfiles.text("vacuum_maintain")).fetchone()
        permitted = bool(granted and granted[0])
    return Look(int(dead or 0), int(live or 0), int(vacuums or 0), permitted, str(owner),
                str(role))


def refusal(look: Look) -> str:
    """Why the vacuum step cannot run for this role, and what to do about it."""
    return (f"role {look.role} may not VACUUM or REINDEX shardq.tasks (owned by {look.owner}): "
            "the janitor's vacuum step leaves it to autovacuum; run the janitor as the owner, "
            f"or GRANT MAINTAIN ON shardq.tasks TO {look.role} (PostgreSQL 17+)")


@dataclass(frozen=True)
class Bloated:
    """An index of shardq.tasks past the rebuild rule: ``size`` bytes where its entries
    need about ``needed``."""

    name: str
    size: int
    needed: float

    @property
    def ratio(self) -> float:
        """How many times the size its entries need the index is."""
        return self.size / self.needed


def bloated(rows: Sequence[tuple[Any, ...]], config: ClientConfig) -> list[Bloated]:
    """The valid indexes among ``rows`` (``sql/index_bloat.sql``'s) that the rule calls
    bloated, worst first: over ``reindex_min_bytes`` and more than
    ``reindex_bloat_ratio`` times the size their entries need.  The one rule the vacuum
    step rebuilds by and ``shardq doctor`` warns by."""
    found = []
    for name, size, entries, entry_bytes, valid in rows:
        needed = max(entries * entry_bytes / FILL, 8192.0)  # key, header, line pointer
        if (valid and config.reindex_bloat_ratio > 0 and size > config.reindex_min_bytes
                and size > config.reindex_bloat_ratio * needed):
            found.append(Bloated(name, int(size), needed))
    return sorted(found, key=lambda b: b.ratio, reverse=True)


class Vacuumer(Loop[VacuumReport]):
    """Runs the vacuum step every ``vacuum_interval_s`` in a background thread.

    ``clock`` (seconds, monotonic) decides when the index bloat check is due; tests
    inject their own.
    """

    def __init__(self, source: HasStatements | Statements, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        st = source if isinstance(source, Statements) else source.statements
        super().__init__("shardq-vacuum", st.config.vacuum_interval_s)
        self.statements = st
        self._clock = clock
        self._checked_at: float | None = None
        self._told = False
        self._backoff_s, self._resume_at, self._cut = 0.0, float("-inf"), ""

    @property
    def applies(self) -> bool:
        """Whether the step is on and the engine has VACUUM."""
        return self.statements.config.vacuum and self.statements.dialect.vacuum

    def run_once(self) -> VacuumReport:
        """Vacuum the table if its dead rows are past the threshold, and rebuild a
        bloated index if the check is due; return what was done."""
        st = self.statements
        if not self.applies:
            return VacuumReport(skipped=f"vacuum step off (setting vacuum, or no VACUUM on "
                                        f"{st.dialect.name})")
        look = st.run(look_at)
        if not look.permitted:
            return VacuumReport(dead_rows=look.dead, skipped=self._refused(look))
        now = self._clock()
        if now < self._resume_at:
            return VacuumReport(dead_rows=look.dead, skipped=self._cut)
        vacuum = look.dead >= st.config.vacuum_dead_rows
        reindex = st.config.reindex_bloat_ratio > 0 and (
            self._checked_at is None or now - self._checked_at >= st.config.reindex_interval_s)
        if not (vacuum or reindex):
            return VacuumReport(dead_rows=look.dead)
        try:
            report: VacuumReport = st.blocking().run(
                lambda conn: self._locked(conn, look.dead, vacuum=vacuum, reindex=reindex),
                idempotent=False)  # a cut VACUUM or REINDEX is not repeated here
        except ConnectionLost as exc:
            # Most likely cut at statement_timeout_s: a table too large to vacuum within
            # it.  Trying again every step would redo that work for nothing, so wait
            # longer each time (and leave the table to autovacuum meanwhile).
            self._backoff_s = min(MAX_BACKOFF_S, max(2 * self._backoff_s, 8 * self.interval_s))
            self._resume_at = now + self._backoff_s
            self._cut = (f"the last vacuum step was cut short ({exc}); the next in "
                         f"{self._backoff_s:.0f} s")
            log.warning("shardq-vacuum: %s", self._cut)
            return VacuumReport(dead_rows=look.dead, skipped=self._cut)
        self._backoff_s = 0.0
        if reindex and report.skipped is None:
            self._checked_at = now
        return report

    def _refused(self, look: Look) -> str:
        message = refusal(look) + ", or turn the step off (--no-vacuum)"
        if not self._told:
            log.warning("shardq-vacuum: %s", message)
            self._told = True
        return message

    def _locked(self, conn: Conn, dead: int, *, vacuum: bool, reindex: bool) -> VacuumReport:
        st = self.statements
        key = {"lock_key": LOCK_KEY}
        got = conn.execute(st.query("vacuum_lock"), key).fetchone()
        if not (got and got[0]):
            return VacuumReport(dead_rows=dead, skipped="another janitor holds the vacuum lock")
        try:
            if vacuum:
                conn.execute(st.query("vacuum_tasks"))  # no parameters: the simple protocol
            rebuilt, dropped = self._reindex(conn) if reindex else ((), ())
        finally:
            conn.execute(st.query("vacuum_unlock"), key)
        return VacuumReport(dead_rows=dead, vacuumed=vacuum, reindexed=rebuilt,
                            dropped=dropped)

    def _reindex(self, conn: Conn) -> tuple[tuple[Reindexed, ...], tuple[str, ...]]:
        """Drop invalid leftovers, then rebuild the most bloated index (if one is)."""
        st, config = self.statements, self.statements.config
        rows: list[tuple[Any, ...]] = conn.execute(st.query("index_bloat")).fetchall()
        dropped = tuple(name for name, *_, valid in rows if not valid and LEFTOVER.search(name))
        for name in dropped:
            conn.execute(st.query("index_drop", identifiers={"index": ("shardq", name)}))
        over = bloated(rows, config)
        if not over:
            return (), dropped
        name, before = over[0].name, over[0].size
        conn.execute(st.query("reindex", identifiers={"index": ("shardq", name)}))
        row = conn.execute(st.query("index_size"), {"index": f"shardq.{name}"}).fetchone()
        after = int(row[0]) if row and row[0] else 0
        log.info("shardq-vacuum: rebuilt the bloated index shardq.%s: %.1f MiB -> %.1f MiB",
                 name, before / 2**20, after / 2**20)
        return (Reindexed(name, before, after),), dropped
