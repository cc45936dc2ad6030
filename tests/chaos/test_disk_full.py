"""A full disk under a running worker: the server's data directory (or the tablespace of
shardq's database) on a small file system, a tmpfs the test mounts, that the test fills
up with a ballast file, then empties again.

- **WAL apart** (``initdb --waldir`` on another volume), or only the tablespace on the
  small file system: the server stays up.  Enqueues are refused with
  :class:`shardq.DiskFull`, each batch whole.  The worker acks the tasks it holds (a
  delete needs no room) but claims next to nothing: a claim writes a new version of
  each row it takes.  Once the ballast is deleted, the same worker and client go on,
  with no restart of either.
- **WAL on the full disk**: PostgreSQL PANICs when it cannot write WAL (or a
  checkpoint's files), and its crash recovery, which writes WAL too, fails: the server
  stays down until there is room and it is started again.  The same worker then comes
  back by itself.

In each, every enqueue that returned runs, and no batch that was refused left a task.
Mounting needs root (CAP_SYS_ADMIN); elsewhere these tests skip, saying so.
"""

from __future__ import annotations

import errno
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import shardq
from shardq.core.config import ClientConfig
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker
from tests.chaos.pg import ThrowawayPostgres
from tests.helpers import wait_for

pytestmark = [pytest.mark.server, pytest.mark.timeout(240)]

FS_SIZE_MB = 160  # room for a cluster's catalogs and a database, plus its WAL in layout 2
QUEUE = "full"
BATCH = 200  # tasks of one enqueue_many
MOST_BATCHES = 300  # the producer's bound: the disk fills long before
BACKLOG = 20  # batches waiting when the disk fills
FULL_S = 5  # how long the disk stays full once the held tasks were acked
FILE_LIMIT_BYTES = 24 << 20  # past a WAL segment (16 MiB), which must still be written


@pytest.fixture
def small_fs() -> Iterator[Path]:
    """An empty tmpfs of FS_SIZE_MB, unmounted after the test."""
    where = Path(tempfile.mkdtemp(prefix="shardq-smallfs-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE_MB}m", "tmpfs",
                              str(where)], capture_output=True, text=True)
    if mounted.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs to fill (needs root, CAP_SYS_ADMIN): "
                    f"{mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=False)
        where.rmdir()


def fill(fs: Path) -> Path:
    """Write a ballast file until the file system has no byte left; returns its path."""
    ballast = fs / "ballast"
    try:
        with open(ballast, "wb") as f:
            for size in (1 << 20, 4096):
                try:
                    while True:
                        f.write(b"\0" * size)
                        f.flush()
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
    except OSError as exc:  # the last buffered bytes, flushed at close
        if exc.errno != errno.ENOSPC:
            raise
    return ballast


class Runs:
    """A worker's handler that records each run by its payload's (batch, n)."""

    def __init__(self) -> None:
        self.app = shardq.App()
        self.seen: Counter[tuple[int, int]] = Counter()
        self._lock = threading.Lock()
        self.app.handler(QUEUE)(self.handle)

    def handle(self, payload: dict[str, int]) -> None:
        with self._lock:
            self.seen[(payload["b"], payload["n"])] += 1
        time.sleep(0.002)  # a backlog takes a few seconds to drain

    def batch(self, b: int) -> set[int]:
        with self._lock:
            return {n for (batch, n) in self.seen if batch == b}

    def count(self) -> int:
        with self._lock:
            return len(self.seen)

    def twice(self) -> int:
        with self._lock:
            return sum(1 for times in self.seen.values() if times > 1)


def payloads(b: int) -> list[dict[str, int]]:
    return [{"b": b, "n": n} for n in range(BATCH)]


def produce(client: shardq.Client, first: int, until: Callable[[list[int]], bool]
            ) -> tuple[list[int], list[int], list[Exception]]:
    """Enqueue batches from ``first`` on until ``until(refused)`` (asked after each
    refusal);
    returns the batches that returned, those refused, and the errors."""
    returned: list[int] = []
    refused: list[int] = []
    errors: list[Exception] = []
    for b in range(first, first + MOST_BATCHES):
        try:
            client.enqueue_many(QUEUE, payloads(b))
            returned.append(b)
        except shardq.DatabaseError as exc:
            refused.append(b)
            errors.append(exc)
            if until(refused):
                break
            time.sleep(0.1)
    return returned, refused, errors


def locked(url: str) -> int:
    """Claimed tasks not yet settled."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM shardq.tasks WHERE status = 'locked'"
                           ).fetchone()
    assert row is not None
    return int(row[0])


def worker_of(runs: Runs, url: str) -> Worker:
    return Worker(runs.app, ClientConfig(dsn=url), WorkerConfig(listen=False, concurrency=4))


def assert_all_ran_once_there_is_room(runs: Runs, returned: list[int],
                                      refused: list[int]) -> float:
    """Every returned batch runs whole and no refused batch runs at all; returns how long
    the returned ones took to run from now."""
    start = time.monotonic()
    wait_for(lambda: all(len(runs.batch(b)) == BATCH for b in returned), timeout=120,
             what="every task that was enqueued to run")
    took = time.monotonic() - start
    assert all(runs.batch(b) == set() for b in refused)  # none half-written
    return took


@pytest.mark.parametrize("layout", ["data directory", "tablespace"])
def test_with_wal_apart_a_full_disk_refuses_whole_batches_and_nothing_is_lost(
        small_fs: Path, layout: str) -> None:
    """The data directory on the small file system, its WAL apart; or the data directory
    and WAL on a large one, and the database's tablespace on the small one."""
    if layout == "data directory":
        pg = ThrowawayPostgres(data_dir=small_fs / "data", wal_apart=True)
    else:
        pg = ThrowawayPostgres()
    runs = Runs()
    worker: Worker | None = None
    try:
        if layout == "tablespace":
            pg.create_tablespace("small", small_fs / "tablespace")
        url = pg.url(pg.create_database(tablespace="small" if layout == "tablespace"
                                        else "pg_default"))
        worker = worker_of(runs, url)
        worker.start()
        with shardq.Client(url) as client:
            backlog = list(range(-BACKLOG, 0))
            for b in backlog:
                client.enqueue_many(QUEUE, payloads(b))
            wait_for(lambda: runs.count() >= BATCH, what="the worker to be draining")
            ballast = fill(small_fs)
            held = locked(url)
            returned, refused, errors = produce(client, 1, lambda refused: len(refused) >= 5)
            assert refused, "the disk never filled"
            error = errors[-1]
            assert isinstance(error, shardq.DiskFull), error
            assert "\n" not in str(error)
            assert str(error).startswith("no room on the database server's disk (could not "
                                         "extend file")
            assert isinstance(error.__cause__, psycopg.Error)
            assert error.__cause__.sqlstate == "53100"
            # A refused batch left no task (counted while the disk is still full).
            with psycopg.connect(url) as conn:
                left = conn.execute(
                    "SELECT count(*) FROM shardq.tasks WHERE (payload->>'b')::int = ANY(%s)",
                    (refused,)).fetchone()
            assert left == (0,)
            # The worker acks what it holds: a delete needs no room.
            wait_for(lambda: locked(url) == 0, timeout=30, what="the held tasks' acks")
            ran_full, waiting = runs.count(), BACKLOG * BATCH - runs.count()
            time.sleep(FULL_S)
            print(f"\n{layout}, wal apart: {len(returned)} batches of {BATCH} returned after the "
                  f"fill, {len(refused)} refused ({type(error).__name__}); the {held} "
                  f"tasks held at the fill acked; with "
                  f"{waiting} tasks waiting, {runs.count() - ran_full} ran in the "
                  f"{FULL_S} s the disk stayed full")
            ballast.unlink()  # room again, and neither client nor worker restarted
            took = assert_all_ran_once_there_is_room(runs, [*backlog, *returned], refused)
            later = client.enqueue_many(QUEUE, payloads(MOST_BATCHES + 1))
            assert len(later) == BATCH
            wait_for(lambda: len(runs.batch(MOST_BATCHES + 1)) == BATCH,
                     what="a batch enqueued after the disk had room again")
        print(f"{layout}, wal apart: all ran {took:.1f} s after the ballast was deleted; "
              f"{runs.twice()} task(s) ran twice")
    finally:
        if worker is not None:
            worker.stop(5)
        pg.close()


def test_with_wal_on_the_full_disk_the_server_stops_and_the_worker_comes_back(
        small_fs: Path) -> None:
    pg = ThrowawayPostgres(data_dir=small_fs / "data")
    runs = Runs()
    worker: Worker | None = None
    try:
        url = pg.url(pg.create_database())
        worker = worker_of(runs, url)
        worker.start()
        with shardq.Client(url, connect_timeout_s=2) as client:
            backlog = list(range(-BACKLOG, 0))
            for b in backlog:
                client.enqueue_many(QUEUE, payloads(b))
            wait_for(lambda: runs.count() >= BATCH, what="the worker to be draining")
            ballast = fill(small_fs)
            returned, refused, errors = produce(
                client, 1, lambda refused: not pg.postmaster_alive() or len(refused) >= 20)
            if pg.postmaster_alive():  # WAL has not yet needed a new segment: make it so
                switch_wal_until_down(pg, url)
            wait_for(lambda: not pg.postmaster_alive(), timeout=30,
                     what="the server to stop (its recovery finds no room for WAL)")
            log = pg.log_tail(100_000)
            # WAL's writer, or a checkpoint's files: whichever first finds no room.
            assert "PANIC:  could not write to file" in log
            assert "No space left on device" in log
            assert "due to startup process failure" in log  # "shutting down", "aborting startup"
            kinds = ", ".join(sorted({type(e).__name__ for e in errors}))
            print(f"\nwal on the full disk: {len(returned)} batches returned after the fill, "
                  f"{len(refused)} refused ({kinds}); "
                  f"{BACKLOG * BATCH - runs.count()} tasks waiting when the server stopped")
            time.sleep(FULL_S)  # down until an operator makes room and starts it
            ballast.unlink()
            pg.start()
            took = assert_all_ran_once_there_is_room(runs, [*backlog, *returned], refused)
            later = client.enqueue_many(QUEUE, payloads(MOST_BATCHES + 1))
            wait_for(lambda: len(runs.batch(MOST_BATCHES + 1)) == BATCH,
                     what="a batch enqueued after the restart")
            assert len(later) == BATCH
        print(f"wal on the full disk: all ran {took:.1f} s after the restart; "
              f"{runs.twice()} task(s) ran twice")
    finally:
        if worker is not None:
            worker.stop(5)
        pg.close()


def test_a_file_past_the_servers_size_limit_is_no_room_either() -> None:
    """A write past a quota or a size limit fails with EFBIG, not ENOSPC: PostgreSQL says
    it "could not extend file" under SQLSTATE XX000 (internal error), and shardq calls it
    DiskFull all the same.  The limit (RLIMIT_FSIZE) stands for the quota: mounting is
    not needed."""
    pg = ThrowawayPostgres(file_limit_bytes=FILE_LIMIT_BYTES)
    try:
        url = pg.url(pg.create_database())
        with shardq.Client(url) as client:
            _, refused, errors = produce_large(client)
        assert refused, "the table never reached the limit"
        error = errors[0]
        assert isinstance(error, shardq.DiskFull), error
        assert isinstance(error.__cause__, psycopg.Error)
        assert error.__cause__.sqlstate == "XX000"
        assert "could not extend file" in str(error)
        assert "File too large" in str(error)
        assert "\n" not in str(error)
    finally:
        pg.close()


def produce_large(client: shardq.Client) -> tuple[list[int], list[int], list[Exception]]:
    """Enqueue batches of about 1 MB until the first refusal."""
    returned: list[int] = []
    for b in range(MOST_BATCHES):
        try:
            client.enqueue_many(QUEUE, [{"b": b, "pad": "x" * 1000}] * 1000)
        except shardq.DatabaseError as exc:
            return returned, [b], [exc]
        returned.append(b)
    return returned, [], []


def switch_wal_until_down(pg: ThrowawayPostgres, url: str) -> None:
    """Ask for new WAL segments (``pg_switch_wal()``, each after a write) until the server
    cannot create one and goes down."""
    deadline = time.monotonic() + 30
    while pg.postmaster_alive() and time.monotonic() < deadline:
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
                conn.execute("DELETE FROM shardq.workers WHERE false")
                conn.execute("SELECT pg_switch_wal()")
                conn.execute("CHECKPOINT")
        except psycopg.Error:
            time.sleep(0.2)
