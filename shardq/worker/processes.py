"""``shardq consume --processes N``: N worker processes under one supervisor.

One Python process runs its claimers and handlers under one GIL, so a worker process
uses about one core however many threads it has.  On a machine with more cores the
daemon scales out with processes: the supervisor spawns N children (each imports the
app afresh and runs its own :class:`~shardq.worker.daemon.Worker`), forwards SIGTERM
and SIGINT to them, and waits for them.  The children run in their own process group,
so a Ctrl-C in a terminal reaches them once, through the supervisor; each stops as a
single-process worker does (gracefully on the first signal, at once on the second).

Only the first child runs janitors (one janitor per machine is plenty: janitors are
safe but redundant in parallel) and samples the queues' figures into its metrics.
With ``--metrics-port P`` child *i* serves metrics on port P + *i*.  If a child exits
on its own, the supervisor stops the others and exits non-zero so that the process
manager restarts the whole group; a child whose supervisor is gone stops by itself.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from shardq.core.config import ClientConfig
from shardq.worker import logs
from shardq.worker.config import WorkerConfig

log = logging.getLogger("shardq.worker")

ORPHAN_CHECK_S = 1.0
JOIN_STEP_S = 0.5


def child_config(config: WorkerConfig, index: int) -> WorkerConfig:
    """The settings of child ``index``: one process, janitors and the queue figures'
    sampling in the first only, a metrics port of its own, and a worker name of its own
    (``NAME-index``) when one was given."""
    return dataclasses.replace(
        config, processes=1, janitors=config.janitors if index == 0 else 0,
        sample_stats=config.sample_stats and index == 0,
        metrics_port=config.metrics_port + index if config.metrics_port else 0,
        worker_name=f"{config.worker_name}-{index}" if config.worker_name else None)


Serve = Callable[[str, ClientConfig, WorkerConfig], int]


def _child(serve: Serve, target: str, client_config: ClientConfig, config: WorkerConfig,
           supervisor: int) -> None:
    os.setpgrp()
    logs.configure(config.log_format)

    def watch_supervisor() -> None:
        # Stop gracefully if the supervisor died without telling us.
        while os.getppid() == supervisor:
            time.sleep(ORPHAN_CHECK_S)
        log.warning("the supervisor is gone; stopping")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch_supervisor, name="shardq-orphan-check", daemon=True).start()
    sys.exit(serve(target, client_config, config))


def supervise(serve: Serve, target: str, client_config: ClientConfig,
              config: WorkerConfig) -> int:
    """Run ``serve`` in ``config.processes`` child processes until a signal; 0 if every
    one stopped cleanly."""
    spawn = multiprocessing.get_context("spawn")
    children = [spawn.Process(target=_child, name=f"shardq-worker-{i}",
                              args=(serve, target, client_config, child_config(config, i),
                                    os.getpid()))
                for i in range(config.processes)]
    # A plain flag, not an Event: a signal handler must take no lock (see
    # shardq.core.signals); this one only sets it and sends signals on.
    stopping = False

    def forward(signum: int, frame: FrameType | None = None) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.pid is not None and child.exitcode is None:
                os.kill(child.pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for child in children:
        child.start()
    if stopping:  # a signal came while they started: they missed it
        forward(signal.SIGTERM)
    log.info("supervising %d worker processes: %s", len(children),
             ", ".join(str(child.pid) for child in children))
    failed = False
    while any(child.exitcode is None for child in children):
        for child in children:
            child.join(JOIN_STEP_S / len(children))
        exited = [c for c in children if c.exitcode is not None]
        if exited and not stopping:
            log.error("worker process %s exited on its own (code %s); stopping the others",
                      exited[0].pid, exited[0].exitcode)
            failed = True
            forward(signal.SIGTERM)
    codes = [child.exitcode for child in children]
    log.info("worker processes stopped (exit codes %s)", codes)
    return 1 if failed or any(code != 0 for code in codes) else 0
