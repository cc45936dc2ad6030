"""What a chaos scenario stands on: a fresh database, real daemons, and the counts.

A :class:`Stage` owns one scenario's database on the throwaway server, its log
database on a second server (so that restarting or stopping the first leaves the
handlers able to log, and finish tasks whose outcomes then meet the fault), the
``shardq consume`` processes it starts (through the fault proxy or straight to the
server), and the numbers of the tasks it enqueued.  Each task's payload carries a
unique number ``n``, so a task written twice (under two ids) shows up as twice the
runs of one ``n``; :meth:`Stage.figures` counts from the handlers' log and what is
left in ``shardq.tasks``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

import shardq
from tests.chaos import app
from tests.chaos.pg import ThrowawayPostgres
from tests.chaos.proxy import Proxy

ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.chaos.app:handle"
# Quick to react: leases, retries and polling in seconds, not minutes.
READY_S = 120.0  # starting a daemon takes seconds, much longer on a loaded machine
DAEMON_DEFAULTS = {"--concurrency": "4", "--batch": "20", "--lease-s": "5",
                   "--janitor-interval-s": "0.5", "--backoff-base-s": "0.2",
                   "--poll-max-ms": "200", "--shutdown-grace-s": "5"}


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def worker_children(pid: int) -> list[int]:
    """The ``--processes`` worker children of supervisor ``pid`` (not its resource tracker)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmdline:
            found.append(int(entry))
    return found


def wait_until(check: Callable[[], bool], timeout_s: float, step_s: float = 0.1) -> bool:
    """Poll ``check`` until it is true (True) or ``timeout_s`` passed (False)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(step_s)
    return True


def summarize_dump(dump: str) -> str:
    """Where each thread of a faulthandler dump stood: its innermost shardq frame, counted."""
    places: dict[str, int] = {}
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", dump):
        frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', block)
        ours = [f for f in frames if "/shardq/" in f[0]]
        if not ours:
            continue
        path, line, func = ours[0]
        place = f"{path.split('/shardq/')[-1]}:{line} {func}"
        if frames[0] != ours[0]:
            place += f" (in {frames[0][0].rsplit('/', 1)[-1]} {frames[0][2]})"
        places[place] = places.get(place, 0) + 1
    return "; ".join(f"{n}x {p}" for p, n in sorted(places.items(), key=lambda i: -i[1])) or "?"


class Daemon:
    """One ``shardq consume`` process (a supervisor with ``--processes``); output to a file."""

    def __init__(self, dsn: str, log_dsn: str, args: dict[str, str], workdir: Path) -> None:
        # PYTHONFAULTHANDLER: a hung daemon is sent SIGABRT and dumps every thread's stack.
        env = {**os.environ, "SHARDQ_DSN": dsn, "CHAOS_LOG_DSN": log_dsn,
               "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}
        argv = [a for pair in {**DAEMON_DEFAULTS, **args}.items() for a in pair if a != ""]
        self.log_path = Path(tempfile.mkstemp(prefix="daemon-", suffix=".log", dir=workdir)[1])
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "shardq", "consume", TARGET, "--queue", app.QUEUE, *argv],
                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        self.known_children: set[int] = set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def children(self) -> list[int]:
        """Its worker processes now (remembered, so they can be cleaned up once orphaned)."""
        found = worker_children(self.pid)
        self.known_children.update(found)
        return found

    def wait_ready(self, workers: int = 1, timeout_s: float = READY_S) -> bool:
        """Wait until ``workers`` worker processes say they consume (or it exited)."""
        return wait_until(lambda: not self.alive()
                          or self.output().count("consuming ") >= workers, timeout_s, 0.2)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int = signal.SIGTERM) -> None:
        if self.alive():
            self.proc.send_signal(signum)

    def wait(self, timeout_s: float) -> int | None:
        """Its exit code, or None if it still runs after ``timeout_s``."""
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """kill -9 it (and any worker children it had)."""
        self.children()
        if self.alive():
            self.proc.kill()
        self.proc.wait(timeout=10)
        for pid in self.known_children:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)

    def dump_and_kill(self) -> str:
        """Make a hung daemon (and its children) dump their threads' stacks, then kill -9;
        returns the dump."""
        before = len(self.output())
        for pid in [self.pid, *self.children()]:
            if pid_alive(pid):
                os.kill(pid, signal.SIGABRT)
        self.wait(5)
        self.kill()
        return self.output()[before:]

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


@dataclass
class Figures:
    """One scenario's counts, the invariants it broke, and notes for the report."""

    scenario: str
    fault: str
    enqueued: int = 0
    distinct_run: int = 0
    duplicates: int = 0
    lost: int = 0
    stuck: int = 0
    dead: int = 0
    two_rows: int = 0
    unfinished: int = 0  # still available at the deadline: the queue did not drain in time
    expected_dead: int = 0
    allowed_duplicates: set[int] = field(default_factory=set)  # ran, unacked at a kill
    duplicated: set[int] = field(default_factory=set)
    reclaimed: set[int] = field(default_factory=set)  # first ran at attempt > 1
    allowed_reclaimed: set[int] = field(default_factory=set)  # held by a process that died
    notes: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def check(self) -> None:
        """Record every broken invariant of the issue (0 lost, 0 stuck, ...)."""
        v = self.violations
        if self.lost:
            v.append(f"{self.lost} lost")
        if self.stuck:
            v.append(f"{self.stuck} stuck locked")
        if self.two_rows:
            v.append(f"{self.two_rows} ids on two rows")
        if self.unfinished:
            v.append(f"{self.unfinished} not run by the deadline")
        if self.dead != self.expected_dead:
            v.append(f"{self.dead} dead (expected {self.expected_dead})")
        orphaned = self.reclaimed - self.allowed_reclaimed
        if orphaned:
            v.append(f"{len(orphaned)} task(s) first ran at attempt > 1 with no process death "
                     "to explain it: claimed, never run, and held until the lease ran out")
        unexplained = self.duplicated - self.allowed_duplicates
        if unexplained:
            v.append(f"{len(unexplained)} task(s) run twice that no process death explains "
                     f"({self.duplicates} duplicate runs in all)")

    @property
    def passed(self) -> bool:
        return not self.violations


class Stage:
    """One scenario's database, daemons and enqueued tasks."""

    def __init__(self, pg: ThrowawayPostgres, proxy: Proxy, workdir: Path,
                 log_pg: ThrowawayPostgres) -> None:
        self.pg, self.proxy, self.workdir = pg, proxy, workdir
        self.db = pg.create_database()
        self.direct, self.proxied = pg.url(self.db), proxy.url(self.db)
        self.log_dsn = log_pg.url(log_pg.create_database(app.SETUP, migrated=False))
        self.daemons: list[Daemon] = []
        self.clients: list[shardq.Client] = []
        self.enqueued: set[int] = set()
        self.two_rows = 0
        self.dumps: list[str] = []  # stack dumps of daemons that hung
        self._next = 0

    def client(self, *, via_proxy: bool = False, **settings: Any) -> shardq.Client:
        """A Client of the scenario's database, closed with the stage."""
        self.clients.append(shardq.Client(self.proxied if via_proxy else self.direct,
                                          **settings))
        return self.clients[-1]

    def payloads(self, count: int, sleep_s: float = 0.0) -> list[dict[str, Any]]:
        """``count`` fresh task payloads, numbered on from the last."""
        start, self._next = self._next, self._next + count
        return [{"n": n, "sleep_s": sleep_s} for n in range(start, start + count)]

    def enqueue(self, count: int, sleep_s: float = 0.0, client: shardq.Client | None = None,
                **options: Any) -> list[int]:
        """Enqueue ``count`` tasks with one enqueue_many; returns their numbers."""
        payloads = self.payloads(count, sleep_s)
        (client or self.client()).enqueue_many(app.QUEUE, payloads, **options)
        numbers = [p["n"] for p in payloads]
        self.enqueued.update(numbers)
        self.sample()
        return numbers

    def daemon(self, *, via_proxy: bool = True, ready: bool = True, **args: str) -> Daemon:
        """Start ``shardq consume`` (flags as ``lease_s="3"``) and, unless ``ready`` is False,
        wait until its workers consume."""
        flags = {"--" + k.replace("_", "-"): v for k, v in args.items()}
        daemon = Daemon(self.proxied if via_proxy else self.direct, self.log_dsn, flags,
                        self.workdir)
        self.daemons.append(daemon)
        if ready:
            daemon.wait_ready(int(args.get("processes", "1")))
        return daemon

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` on the scenario's database, straight to the server."""
        with psycopg.connect(self.direct, autocommit=True, connect_timeout=10) as conn:
            return conn.execute(sql, params).fetchall()

    def log_query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` on the handlers' log database."""
        with psycopg.connect(self.log_dsn, autocommit=True, connect_timeout=10) as conn:
            return conn.execute(sql, params).fetchall()

    def runs(self, outcome: str = "ok") -> int:
        return int(self.log_query("SELECT count(*) FROM chaos_runs WHERE outcome = %s",
                              (outcome,))[0][0])

    def sample(self) -> None:
        """Note how many ids are on two rows now (they vanish once both rows are acked)."""
        rows = self.query("SELECT count(*) FROM (SELECT id FROM shardq.tasks GROUP BY id "
                          "HAVING count(*) > 1) AS twice")
        self.two_rows = max(self.two_rows, int(rows[0][0]))

    def waiting(self) -> int:
        """Tasks not finished: available or locked."""
        return int(self.query("SELECT count(*) FROM shardq.tasks "
                              "WHERE status IN ('available', 'locked')")[0][0])

    def drain(self, timeout_s: float) -> bool:
        """Wait until nothing is available or locked (dead tasks stay); False on timeout."""
        def drained() -> bool:
            self.sample()
            return self.waiting() == 0
        return wait_until(drained, timeout_s, step_s=0.25)

    def unacked_by(self, pids: list[int]) -> set[int]:
        """Tasks that ``pids`` (dead, and no other daemon running) ran (logged) and whose
        rows are still there: not acked."""
        # A log write sent just before the kill may still be running on the log server:
        # wait until the dead processes' sessions are gone, so it has landed or never will.
        wait_until(lambda: not self.log_query(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"), 10)
        ran = self.log_query("SELECT DISTINCT task_id, n FROM chaos_runs "
                             "WHERE outcome = 'ok' AND pid = ANY(%s)", (pids,))
        there = {r[0] for r in self.query("SELECT id FROM shardq.tasks WHERE id = ANY(%s)",
                                          ([r[0] for r in ran],))}
        return {int(n) for task_id, n in ran if task_id in there}

    def locked_numbers(self) -> set[int]:
        """The numbers of the tasks locked now."""
        rows = self.query("SELECT (payload->>'n')::int FROM shardq.tasks WHERE status = 'locked'")
        return {int(r[0]) for r in rows}

    def held(self) -> int:
        return int(self.query("SELECT count(*) FROM shardq.tasks WHERE status = 'locked'")[0][0])

    def figures(self, scenario: str, fault: str) -> Figures:
        """Count everything (see :class:`Figures`); call once the daemons are stopped."""
        self.sample()
        f = Figures(scenario, fault, enqueued=len(self.enqueued))
        ok: dict[int, int] = dict(self.log_query(
            "SELECT n, count(*) FROM chaos_runs WHERE outcome = 'ok' GROUP BY n"))
        ran = {int(r[0]) for r in self.log_query("SELECT DISTINCT n FROM chaos_runs")}
        table = self.query("SELECT (payload->>'n')::int, status FROM shardq.tasks")
        present = {int(n) for n, _ in table}
        f.distinct_run = len(ran & self.enqueued)
        f.duplicated = {n for n, c in ok.items() if c > 1}
        f.duplicates = sum(c - 1 for c in ok.values() if c > 1)
        f.reclaimed = {int(r[0]) for r in self.log_query(
            "SELECT n FROM chaos_runs WHERE outcome = 'ok' GROUP BY n HAVING min(attempt) > 1")}
        f.lost = len(self.enqueued - ran - present)
        f.stuck = sum(1 for _, s in table if s == "locked")
        f.dead = sum(1 for _, s in table if s == "dead")
        f.unfinished = sum(1 for _, s in table if s == "available")
        f.two_rows = self.two_rows
        return f

    def hung(self, daemon: Daemon, when: str) -> str:
        """Dump a hung daemon's threads, kill it, keep the dump; returns a one-line summary."""
        dump = daemon.dump_and_kill()
        self.dumps.append(f"== daemon {daemon.pid}, hung {when}\n{dump}")
        return f"daemon hung {when}, killed; its threads stood in: {summarize_dump(dump)}"

    def close(self) -> None:
        """Stop every daemon (kill -9 whatever still runs) and close the clients."""
        for d in self.daemons:
            d.kill()
        for c in self.clients:
            c.close()
