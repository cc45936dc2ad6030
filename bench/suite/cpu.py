"""What a run costs the machine: CPU time of a process tree and of the PostgreSQL server,
and the machine's load average (what else ran on the box meanwhile)."""

from __future__ import annotations

import contextlib
import math
import os

import psutil
import psycopg

from bench import harness


def tree_usage(root: psutil.Process) -> tuple[float, int]:
    """CPU seconds and resident bytes of ``root`` and its descendants now."""
    cpu, rss = 0.0, 0
    for proc in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            cpu, rss = cpu + times.user + times.system, rss + proc.memory_info().rss
    return cpu, rss


def process_cpu_s(pid: int) -> float:
    """CPU seconds process ``pid`` and its descendants used so far."""
    return tree_usage(psutil.Process(pid))[0]


def server_cpu_s(url: str) -> float:
    """CPU seconds the server's processes used so far (the postmaster and every process
    under it: exited backends are counted in the postmaster's children's times); nan
    when the server does not run on this machine (the suite's embedded one does)."""
    with psycopg.connect(url, autocommit=True) as conn:
        try:  # while this backend lives
            backend = psutil.Process(int(harness.scalar(conn, "SELECT pg_backend_pid()")))
            postmaster = backend.parent() if "postgres" in backend.name() else None
        except psutil.Error:
            return math.nan
    if postmaster is None:
        return math.nan
    total = 0.0
    while True:
        try:  # a child may exit while the tree is walked
            tree = [postmaster, *postmaster.children(recursive=True)]
            break
        except psutil.NoSuchProcess:
            continue
    for proc in tree:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
        if proc.pid == postmaster.pid:
            total += t.children_user + t.children_system  # the backends that exited
    return total


def load_1m() -> float:
    """The machine's 1-minute load average now."""
    return os.getloadavg()[0]
