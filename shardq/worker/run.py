"""``shardq consume``: load the target, run a :class:`Worker`, stop it on signals."""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any

from shardq.app import App
from shardq.core import tracing
from shardq.core.config import ClientConfig
from shardq.core.errors import ConfigError
from shardq.core.signals import stop_on_signals
from shardq.taskfunction import TaskFunction
from shardq.worker import logs, processes
from shardq.worker.config import WorkerConfig
from shardq.worker.daemon import Worker

log = logging.getLogger("shardq.worker")

EXIT_RESERVE_S = 1.0  # of a shutdown's grace, kept for the process to exit


def load_target(target: str, queues: tuple[str, ...]) -> App:
    """``module:app`` gives that App; ``module:function`` a raw handler for ``--queue``.

    Whatever goes wrong is one :class:`ConfigError` line (the module's own error
    chained to it): a module that does not import, an attribute it lacks or that is
    neither an App nor a function, a ``--queue`` the App has no task for.
    """
    module, obj = _attribute(target, "module:app or module:function")
    if isinstance(obj, App):
        return _with_queues(target, obj, queues)
    if isinstance(obj, TaskFunction):
        owners = [name for name, value in vars(module).items() if value is obj.app]
        hint = f"{module.__name__}:{owners[0]}" if owners else "the App it belongs to"
        raise ConfigError(f"{target!r} is a task of an App, not a raw handler: consume {hint}")
    if callable(obj):
        if not queues:
            raise ConfigError("a function target needs at least one --queue to consume")
        app = App()
        for queue in queues:
            app.handler(queue)(obj)
        return app
    raise ConfigError(f"{target!r} is an object of type {type(obj).__name__}, neither a "
                      f"shardq.App nor a function{_apps_in(module)}")


def load_app(target: str) -> App:
    """The App ``module:app`` names (the dashboard's ``--app``); one :class:`ConfigError`
    line, as :func:`load_target` gives, for anything else."""
    module, obj = _attribute(target, "module:app")
    if not isinstance(obj, App):
        raise ConfigError(f"{target!r} is an object of type {type(obj).__name__}, not a "
                          f"shardq.App{_apps_in(module)}")
    return obj


def _attribute(target: str, shape: str) -> tuple[Any, Any]:
    """The module ``target`` names, imported, and the object it names in it."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"the target must look like {shape}, got {target!r}")
    module = _imported(module_name)
    obj = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{module_name!r} has no attribute {attribute!r}"
                              f"{_apps_in(module)}")
        obj = getattr(obj, part)
    return module, obj


def _imported(module_name: str) -> Any:
    """The target's module, imported from the working directory or the Python path."""
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name + ".").startswith(exc.name + "."):
            raise ConfigError(f"cannot import {module_name!r}: {_failure(exc)}") from exc
        # The target itself is not there (not a module it imports): no traceback to see.
        raise ConfigError(f"cannot import {module_name!r}: no module named {exc.name!r} "
                          f"in {os.getcwd()} or on the Python path") from None
    except Exception as exc:  # the user's module: whatever it raises is theirs to fix
        raise ConfigError(f"cannot import {module_name!r}: {_failure(exc)}") from exc


def _with_queues(target: str, app: App, queues: tuple[str, ...]) -> App:
    """``app``, once every ``--queue`` is one of its queues: a worker would dead-letter
    every task of another queue (it has no handler for them), which another app's
    workers may be there to run."""
    unknown = [q for q in queues if q not in app.queues]
    if unknown:
        raise ConfigError(f"--queue {unknown[0]!r}: {target} has no task on that queue (its "
                          f"queues: {', '.join(app.queues) or 'none'})")
    return app


def _failure(exc: BaseException) -> str:
    """An import's failure on one line: the error and where in the user's code it was."""
    if isinstance(exc, SyntaxError):  # the error is in the file itself, not in a frame
        return f"{type(exc).__name__}: {exc.msg} ({_shown(exc.filename)}, line {exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen")]
    # The deepest line of the user's own code, rather than of a library it called.
    own = [f for f in frames if not f.filename.startswith(_LIBRARIES)] or frames
    where = f" ({_shown(own[-1].filename)}, line {own[-1].lineno})" if own else ""
    return f"{type(exc).__name__}: {exc}{where}"


# Code that is not the user's: the standard library, installed packages, and shardq.
_LIBRARIES = tuple({*(sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib",
                                                            "platlib")),
                    str(Path(__file__).resolve().parent.parent)})


def _shown(filename: str | None) -> str:
    """A file's path relative to the working directory when it is below it."""
    if not filename:
        return "?"
    path = os.path.relpath(filename)
    return filename if path.startswith("..") else path


def _apps_in(module: Any) -> str:
    """`` (the module's Apps: a, b)``, naming its shardq.App objects, or nothing."""
    names = sorted(name for name, value in vars(module).items() if isinstance(value, App))
    return f" (the module's Apps: {', '.join(names)})" if names else ""


def run(target: str, client_config: ClientConfig, config: WorkerConfig, *,
        verbose: bool = False) -> int:
    """Run the worker until SIGTERM/SIGINT: in this process, or in ``config.processes``
    supervised processes (see :mod:`shardq.worker.processes`).

    A target that does not load fails here, once, as one line; ``verbose`` adds the
    traceback of what the user's module raised.
    """
    logs.configure(config.log_format)
    try:
        app = load_target(target, config.queue)
    except ConfigError as exc:
        if exc.__cause__ is None:
            raise
        if verbose:
            traceback.print_exception(exc.__cause__)
            raise
        raise ConfigError(f"{exc}; `shardq -v consume ...` shows the traceback"
                          ) from exc.__cause__
    if config.processes > 1:
        return processes.supervise(serve, target, client_config, config)
    return serve_app(app, client_config, config)


def serve(target: str, client_config: ClientConfig, config: WorkerConfig) -> int:
    """Run one worker in this process until a signal, then end the process (exit 0 once
    the worker stopped gracefully; a second signal exits at once, with 1)."""
    return serve_app(load_target(target, config.queue), client_config, config)


def serve_app(app: App, client_config: ClientConfig, config: WorkerConfig) -> int:
    """Run a :class:`Worker` for ``app`` in this process until a signal, then end the
    process (as :func:`serve` does)."""
    worker = Worker(app, client_config, config)

    def on_signal(sig: signal.Signals, seen: int) -> None:
        if seen > 1:
            log.warning("second %s: exiting now; the janitor will recover held tasks",
                        sig.name)
            os._exit(1)
        log.info("%s: finishing running tasks (up to %.0fs); signal again to exit at once",
                 sig.name, config.shutdown_grace_s)

    # The process ends inside the block (os._exit): a second signal during the shutdown
    # still comes to on_signal.
    with stop_on_signals(on_signal=on_signal) as stop:
        worker.start()
        while not stop.wait(3600):
            pass
        # The process must be gone within the grace: keep a moment of it for the exit.
        grace = config.shutdown_grace_s
        reserve = min(EXIT_RESERVE_S, grace / 10)
        worker.stop(grace - reserve)
        # Everything is settled or given back.  Leave without the interpreter's teardown,
        # which would wait on threads still blocked on a silent network; a tracer's spans
        # still buffered are exported first (the teardown would have done it).
        tracing.flush(reserve)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
