"""Running suspect tasks in a process of their own.

A task whose last lease expired without a result may be what killed its worker (a
segfault, an OOM kill, ``os._exit`` in a library).  Run beside other handlers, it
would take them down with it each time, and the healthy tasks would burn their
attempts with it.  So a worker runs a suspect task's handler alone, in a child process,
while it goes on claiming and running every other task.  If the suspect kills its
process again, that attempt fails with an error that starts ``process died:`` (which
keeps the task suspect), and nothing else is lost; a task that keeps doing it dies
after its ``max_attempts`` like any failing task.

The child is a fresh interpreter (the ``spawn`` method: forking a process that has
threads and open connections is unsafe).  It imports the handler's module and finds
the handler by its qualified name, so the handler must be defined at a module's top
level; one that is not (a function defined inside another) runs in the worker like
any task, with a warning.  The child runs with the task bound as
:func:`shardq.current`; it is killed when the task's lease is lost or the worker gives
the task back, and (on Linux) when the worker's process dies.  A durable task's calls
(``ctx.step`` and the rest) reach the database there through a client of the child's
own, opened at its first call; a call that parks the task is sent back as a park.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import multiprocessing
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from shardq.app import Handler
from shardq.client import Client
from shardq.core.plan import Plan
from shardq.core.statements import Statements
from shardq.core.task import Task
from shardq.durable import Park
from shardq.handler import Context, Fail, Retry, bind, current
from shardq.ops.results import Encoded, encode
from shardq.worker.frames import handler_traceback

log = logging.getLogger("shardq.worker")

POLL_S = 0.2  # how soon a lost lease or a shutdown stops a suspect's process
DIED = "process died:"  # the prefix that keeps a task suspect (sql/suspect.sql)
_SPAWN = multiprocessing.get_context("spawn")


class ChildFailed(Exception):
    """The suspect's handler failed in its process; ``text`` is the error to store."""

    def __init__(self, text: str) -> None:
        super().__init__(text.strip().splitlines()[-1] if text.strip() else "failed")
        self.text = text


class ProcessDied(ChildFailed):
    """The suspect's process ended without an outcome: the handler killed it.  Its text
    starts with :data:`DIED`, which keeps the task suspect."""


@dataclass(frozen=True)
class Ref:
    """Where a child process finds a handler: its module and qualified name, and whether
    it takes the raw payload."""

    module: str
    qualname: str
    raw: bool


def ref_of(fn: Callable[..., Any], raw: bool) -> Ref | None:
    """The reference a child can import ``fn`` by, or None when it cannot (``fn`` is not
    reachable by its qualified name from its module: a nested function, say)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if module is None or "<" in qualname or module not in sys.modules:
        return None
    try:
        found = _find(sys.modules[module], qualname)
    except AttributeError:
        return None
    return Ref(module, qualname, raw) if _unwrap(found) is fn else None


def _find(module: Any, qualname: str) -> Any:
    found = module
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _unwrap(found: Any) -> Any:
    # @app.task leaves a TaskFunction at the function's name; the function is its .fn.
    inner = getattr(found, "fn", None)
    return inner if callable(inner) else found


def run_alone(ref: Ref, context: Context) -> Encoded | None:
    """Run a suspect's handler in a child process and wait for it.

    Returns what the handler returned, encoded in the child as a result keeps it
    (:func:`shardq.ops.results.encode`, so that any value crosses the pipe); raises
    :class:`Retry` or :class:`Fail` as the handler did, :class:`ChildFailed` (with the
    child's traceback) for any other error, :class:`ProcessDied` when the process ended
    without an outcome.  When ``context`` is cancelled meanwhile (the lease was lost, or
    the worker gave the task back), the process is killed and this returns None: the
    caller drops the result of a cancelled context anyway.
    """
    mine, theirs = _SPAWN.Pipe(duplex=False)
    dsn = context.client.db.dsn if context.client is not None else None
    process = _SPAWN.Process(target=_child, args=(ref, context.task, theirs, dsn),
                             name=f"shardq-suspect-{context.task.id}")
    process.start()
    theirs.close()
    try:
        while not mine.poll(POLL_S):
            if context.cancelled:
                return None
            if not process.is_alive() and not mine.poll(0):
                raise ProcessDied(_death(process.exitcode))
        try:
            outcome = mine.recv()
        except EOFError:  # the pipe closed without a word: the process is gone
            process.join()
            raise ProcessDied(_death(process.exitcode)) from None
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        mine.close()
    _raise(outcome)
    encoded: Encoded = outcome[1]
    return encoded


def _death(exitcode: int | None) -> str:
    how = (f"was killed by {signal.Signals(-exitcode).name}"
           if exitcode is not None and exitcode < 0 else f"exited with code {exitcode}")
    return (f"{DIED} the handler's process {how} before the task finished; it runs alone "
            "again next time")


def _raise(outcome: tuple[Any, ...]) -> None:
    kind = outcome[0]
    if kind == "park":
        raise Park(outcome[1])
    if kind == "retry":
        raise Retry(outcome[2], outcome[1])
    if kind == "fail":
        raise Fail(outcome[1])
    if kind == "error":
        raise ChildFailed(outcome[1])


class _ChildClient:
    """The child's client for a durable task's calls, opened at the first one (most
    suspects make none)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.opened: Client | None = None

    def _client(self) -> Client:
        if self.opened is None:
            self.opened = Client(self.dsn)
        return self.opened

    @property
    def statements(self) -> Statements:
        """The statements of the child's client."""
        return self._client().statements

    def perform(self, plan: Plan[Any]) -> Any:
        """Run ``plan`` on the child's client."""
        return self._client().perform(plan)


def _child(ref: Ref, task: Task, conn: Connection, dsn: str | None) -> None:
    """The child process: run the handler once and send back how it ended."""
    _die_with_parent()
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    client = _ChildClient(dsn) if dsn is not None else None
    bind(Context(task, client=client, is_async=False))
    try:
        fn = _unwrap(_find(importlib.import_module(ref.module), ref.qualname))
        handler = Handler(fn, task.queue, None, raw=ref.raw)
        if handler.is_async:
            current().is_async = True
            result = asyncio.run(handler.call(task.payload))
        else:
            result = handler.call(task.payload)
        conn.send(("ok", encode(result)))
    except Park as exc:  # a durable call waits: the worker parks the task
        conn.send(("park", exc.parking))
    except Retry as exc:
        conn.send(("retry", str(exc), exc.in_s))
    except Fail as exc:
        conn.send(("fail", str(exc)))
    except BaseException as exc:  # the handler's failure is the task's
        conn.send(("error", handler_traceback(exc)))
    finally:
        conn.close()
        if client is not None and client.opened is not None:
            client.opened.close()


def _die_with_parent() -> None:
    """On Linux, have the kernel kill this process when the worker's thread that started
    it ends (the worker died): a suspect must not outlive the lease it runs under."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
