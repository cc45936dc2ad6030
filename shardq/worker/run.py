"""``shardq consume``: load the target, run a :class:`Worker`, stop it on signals."""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from shardq.app import App
from shardq.config import ClientConfig
from shardq.errors import ConfigError
from shardq.worker import logs, processes
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker

log = logging.getLogger("shardq.worker")

EXIT_RESERVE_S = 1.0  # of a shutdown's grace, kept for the process to exit


def load_target(target: str, queues: tuple[str, ...]) -> App:
    """``module:app`` gives that App; ``module:function`` a raw handler for ``--queue``."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(
            f"the target must look like module:app or module:function, got {target!r}")
    sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{module_name!r} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    if isinstance(obj, App):
        return obj
    if callable(obj):
        if not queues:
            raise ConfigError("a function target needs at least one --queue to consume")
        app = App()
        for queue in queues:
            app.handler(queue)(obj)
        return app
    raise ConfigError(f"{target!r} is neither a shardq.App nor a function")


def run(target: str, client_config: ClientConfig, config: WorkerConfig) -> int:
    """Run the worker until SIGTERM/SIGINT: in this process, or in ``config.processes``
    supervised processes (see :mod:`shardq.worker.processes`)."""
    logs.configure(config.log_format)
    if config.processes > 1:
        load_target(target, config.queue)  # a bad target fails here, not N times
        return processes.supervise(serve, target, client_config, config)
    return serve(target, client_config, config)


def serve(target: str, client_config: ClientConfig, config: WorkerConfig) -> int:
    """Run one worker in this process until a signal, then end the process (exit 0 once
    the worker stopped gracefully; a second signal exits at once, with 1)."""
    app = load_target(target, config.queue)
    worker = Worker(app, client_config, config)
    stop = threading.Event()
    signals_seen = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            log.warning("second %s: exiting now; the janitor will recover held tasks",
                        signal.Signals(signum).name)
            os._exit(1)
        log.info("%s: finishing running tasks (up to %.0fs); signal again to exit at once",
                 signal.Signals(signum).name, config.shutdown_grace_s)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker.start()
    while not stop.wait(3600):
        pass
    # The process must be gone within the grace: keep a moment of it for the exit itself.
    grace = config.shutdown_grace_s
    worker.stop(grace - min(EXIT_RESERVE_S, grace / 10))
    # Everything is settled or given back.  Leave without the interpreter's teardown,
    # which would wait on threads still blocked on a silent network.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
