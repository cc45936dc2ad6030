"""A two-node PostgreSQL cluster with synchronous replication under pg_auto_failover.

A monitor and two nodes (``n1``, ``n2``), each a ``pg_autoctl run`` in a process group
of its own, all on 127.0.0.1 on free ports, with their data in a temporary directory.
PostgreSQL refuses to run as root, so as root every process runs as the ``postgres``
user (Popen's ``user=``); ``pg_autoctl``'s configuration and state files go to the
temporary directory too (``XDG_*``), never the user's home.

pg_auto_failover's own timers are for real networks: with its defaults a failover
waits 20 s before it calls a node unhealthy and up to 30 s for the old primary to
step down.  The monitor's are lowered here (:data:`MONITOR_SETTINGS`) and so is each
keeper's network partition timeout, so that a failover takes seconds.

Synchronous replication is pg_auto_failover's default with two nodes
(``number_sync_standbys`` 0 and both nodes in the replication quorum): while the
standby is up, a commit returns once the standby has flushed it
(``synchronous_standby_names = 'ANY 1 (…)'``); while it is down the primary goes on
alone (state ``wait_primary``).

:func:`missing` says why the cluster cannot run here (a skip reason), or None.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from glob import glob
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from tests.helpers import free_port

APT = "apt-get install postgresql-15-auto-failover"
NODES = ("n1", "n2")
READY_S = 90.0
# The monitor's timers (milliseconds): a node not answering a 1 s health check, tried
# once more 0.2 s later, is unhealthy after 1 s; the old primary then has 3 s to step
# down (its keeper's network_partition_timeout, below, is 2 s) before the standby is
# promoted anyway.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 200,
    "pgautofailover.node_considered_unhealthy_timeout": 1000,
    "pgautofailover.primary_demote_timeout": 3000,
    "pgautofailover.startup_grace_period": 1000,
}
KEEPER_SETTINGS = {"timeout.network_partition_timeout": "2"}


def pg_bin() -> Path | None:
    """The bin directory of the PostgreSQL that has pg_auto_failover's extension."""
    for control in sorted(glob("/usr/share/postgresql/*/extension/pgautofailover.control"),
                          reverse=True):
        bin_dir = Path("/usr/lib/postgresql") / Path(control).parts[-3] / "bin"
        if (bin_dir / "pg_ctl").exists():
            return bin_dir
    return None


def missing() -> str | None:
    """Why a cluster cannot be made here, or None."""
    if shutil.which("pg_autoctl") is None or pg_bin() is None:
        return f"pg_auto_failover is not installed ({APT})"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no postgres user to run PostgreSQL as"
    return None


@dataclass
class Node:
    """One node: its name, port, data directory and the ``pg_autoctl run`` serving it."""

    name: str
    port: int
    pgdata: Path
    proc: subprocess.Popen[bytes] | None = None


class Cluster:
    """The monitor and the two nodes (see the module's docstring)."""

    def __init__(self) -> None:
        bin_dir = pg_bin()
        assert bin_dir is not None, missing()
        self.root = Path(tempfile.mkdtemp(prefix="shardq-failover-"))
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self.env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LANG": "C.UTF-8",
                    "XDG_CONFIG_HOME": str(self.root / "config"),
                    "XDG_DATA_HOME": str(self.root / "data"),
                    "XDG_RUNTIME_DIR": str(self.root / "run"),
                    "PG_CONFIG": str(bin_dir / "pg_config"),
                    "HOME": str(self.root)}
        self.monitor = Node("monitor", free_port(), self.root / "monitor")
        self.nodes = {name: Node(name, free_port(), self.root / name) for name in NODES}
        self.admin_dsn = f"postgresql://postgres@127.0.0.1:{self.monitor.port}/pg_auto_failover"

    # -- processes ---------------------------------------------------------------------

    def _command(self, *args: str, timeout_s: float = READY_S) -> str:
        done = subprocess.run(["pg_autoctl", *args], capture_output=True, text=True,
                              timeout=timeout_s, **self._as_postgres())
        if done.returncode:
            raise RuntimeError(f"pg_autoctl {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return str(done.stdout)

    def _as_postgres(self) -> dict[str, Any]:
        options: dict[str, Any] = {"env": self.env, "cwd": self.root}
        if self.as_root:
            options.update(user="postgres", group="postgres", extra_groups=[])
        return options

    def _run(self, node: Node, *create: str) -> None:
        """Start ``pg_autoctl run`` for ``node`` (``create ARGS --run`` to make it first),
        in a process group of its own."""
        argv = [*create, "--run"] if create else ["run"]
        with open(self.root / f"{node.name}.log", "ab") as log:
            node.proc = subprocess.Popen(["pg_autoctl", *argv, "--pgdata", str(node.pgdata)],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, **self._as_postgres())

    def start(self) -> None:
        """Make the monitor and both nodes; return once n1 is the primary and n2 its
        synchronous standby."""
        self._command("create", "monitor", "--pgdata", str(self.monitor.pgdata),
                      "--pgport", str(self.monitor.port), "--hostname", "127.0.0.1",
                      "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl")
        self._run(self.monitor)
        self._wait(self._monitor_up, "the monitor to accept connections")
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            for name, value in MONITOR_SETTINGS.items():
                prefix, _, rest = name.partition(".")
                conn.execute(sql.SQL("ALTER SYSTEM SET {}.{} = {}").format(
                    sql.Identifier(prefix), sql.Identifier(rest), sql.Literal(value)))
            conn.execute("SELECT pg_reload_conf()")
        for node in self.nodes.values():
            # Created and run by one process: a standby's creation waits for its base
            # backup, which the nudge below hurries.
            self._run(node, "create", "postgres", "--pgport", str(node.port),
                      "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--name", node.name,
                      "--dbname", "shardq", "--auth", "trust", "--no-ssl", "--monitor",
                      f"postgresql://autoctl_node@127.0.0.1:{self.monitor.port}"
                      "/pg_auto_failover")
            # pg_basebackup asks for a spread checkpoint (minutes on an idle primary):
            # an explicit CHECKPOINT on the primary makes the one it waits for finish.
            self._wait(lambda: self._settled(len([n for n in self.nodes.values()
                                                  if n.proc is not None])),
                       f"{node.name} to join", nudge=self._checkpoint)
            # The running keeper reloads its configuration when it is set.
            for key, setting in KEEPER_SETTINGS.items():
                self._command("config", "set", "--pgdata", str(node.pgdata), key, setting)

    def kill(self, name: str) -> None:
        """``kill -9`` node ``name`` whole: its keeper and its postmaster (the host died).

        Killing the postmaster alone is not a failover under pg_auto_failover: the
        node's keeper starts it again on the same node at once.  The backends die with
        their postmaster, and every client connection to the node is reset."""
        node = self.nodes[name]
        assert node.proc is not None
        os.killpg(node.proc.pid, signal.SIGKILL)
        node.proc.wait()
        node.proc = None

    def rejoin(self, name: str) -> None:
        """Start a killed node again; return once it is the synchronous standby again
        (pg_auto_failover rewinds it onto the new primary's timeline)."""
        self._run(self.nodes[name])
        self._wait(lambda: self._settled(2), f"{name} to rejoin", nudge=self._checkpoint)

    def rejoin_all(self) -> None:
        """:meth:`rejoin` every killed node."""
        for name, node in self.nodes.items():
            if node.proc is None:
                self.rejoin(name)

    def switchover(self) -> None:
        """``pg_autoctl perform switchover``: the standby becomes the primary (returns
        once the old primary is its standby)."""
        self._command("perform", "switchover", "--pgdata", str(self.monitor.pgdata),
                      "--wait", str(int(READY_S)))
        self._wait(lambda: self._settled(2), "the switchover to settle")

    def close(self) -> None:
        """Kill every process of the cluster and delete its files."""
        for node in [*self.nodes.values(), self.monitor]:
            if node.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.proc.pid, signal.SIGKILL)
                node.proc.wait()
                node.proc = None
        shutil.rmtree(self.root, ignore_errors=True)

    # -- state -------------------------------------------------------------------------

    def dsn(self, dbname: str = "shardq", user: str = "postgres") -> str:
        """The multi-host URL clients use: both nodes, the read-write one wins."""
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values())
        return f"postgresql://{user}@{hosts}/{dbname}?target_session_attrs=read-write"

    def node_dsn(self, name: str, dbname: str = "shardq") -> str:
        """The URL of one node."""
        return f"postgresql://postgres@127.0.0.1:{self.nodes[name].port}/{dbname}"

    def states(self) -> dict[str, tuple[str, str]]:
        """Each node's reported and assigned state, as the monitor sees them."""
        with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=2) as conn:
            rows = conn.execute("SELECT nodename, reportedstate::text, goalstate::text "
                                "FROM pgautofailover.node").fetchall()
        return {str(name): (str(reported), str(goal)) for name, reported, goal in rows}

    def primary(self) -> str:
        """The name of the node the monitor holds primary."""
        [name] = [n for n, (reported, goal) in self.states().items()
                  if goal in ("primary", "wait_primary", "single")]
        return name

    def standby(self) -> str:
        """The other node."""
        primary = self.primary()
        return next(name for name in NODES if name != primary)

    def _settled(self, count: int) -> bool:
        """Whether ``count`` nodes are registered and all reached their assigned
        state: one primary (``single`` alone), the others secondaries."""
        try:
            states = self.states()
        except psycopg.Error:
            return False
        want = {"single"} if count == 1 else {"primary", "secondary"}
        return (len(states) == count
                and all(r == g and r in want for r, g in states.values()))

    def _monitor_up(self) -> bool:
        try:
            psycopg.connect(self.admin_dsn, connect_timeout=2).close()
        except psycopg.Error:
            return False
        return True

    def _checkpoint(self) -> None:
        for node in self.nodes.values():
            try:
                with psycopg.connect(self.node_dsn(node.name, "postgres"), autocommit=True,
                                     connect_timeout=2) as conn:
                    if not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:  # type: ignore[index]
                        conn.execute("CHECKPOINT")
            except psycopg.Error:
                pass

    def _wait(self, check: Any, what: str, nudge: Any = None) -> None:
        deadline = time.monotonic() + READY_S
        while not check():
            for node in [self.monitor, *self.nodes.values()]:
                if node.proc is not None and node.proc.poll() is not None:
                    raise RuntimeError(f"pg_autoctl of {node.name} exited waiting for {what}:\n"
                                       + self.log(node.name)[-3000:])
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {READY_S:.0f} s for {what}; states "
                                   f"{self.states() if self._monitor_up() else 'unknown'}")
            if nudge is not None:
                nudge()
            time.sleep(0.5)

    def log(self, name: str) -> str:
        """What ``pg_autoctl run`` of ``name`` wrote."""
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""
