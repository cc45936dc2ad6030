"""Durable calls of a running task (``shardq.current().step(...)`` and the rest).

Each call is keyed by its name, unique within the task: a replay of the task (a
retry, a crash, a wake-up) finds the calls that already ran checkpointed and returns
what they came to without running them again.  Names, not call order, match a replay
to its checkpoints, so calls made concurrently (``asyncio.gather``) replay alike.

A call that has to wait (a sleep, an event, children) *parks* the task: it raises
:class:`Park`, which the worker turns into a park of the task (it gives back its slot,
lease and connection, and is claimed again when due, see
:mod:`shardq.ops.durable`).  :class:`Park` derives from ``BaseException``, so a
handler's ``except Exception`` does not swallow it.

Each call is written once, as a generator that yields what it needs (a plan to run,
or the user's function to call) to one of two drivers: :meth:`Runtime.run` for
function handlers, :meth:`Runtime.arun` for coroutine handlers.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import ChildDied, DurableError, EventTimeout, InvalidTask, WaitTimeout
from shardq.core.plan import Plan
from shardq.core.task import Task
from shardq.flows.canvas import Signature
from shardq.ops import durable
from shardq.ops.durable import Checkpoint, Parking

MAX_NAME = 256
MAX_CHILDREN = 10_000  # children one wait waits for at most


class Park(BaseException):  # a signal to the worker, not an error
    """Raised by a durable call that waits: the worker parks the task."""

    def __init__(self, parking: Parking) -> None:
        super().__init__(parking.note)
        self.parking = parking


@dataclass(frozen=True, slots=True)
class Call:
    """Call the user's ``fn`` (awaited if it returns an awaitable, in a coroutine handler)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


Need: TypeAlias = Plan[Any] | Call
Flow: TypeAlias = Generator[Need, Any, Any]


class Runtime:
    """The durable calls of one run of one task, on a client that runs plans."""

    def __init__(self, client: Any, task: Task) -> None:
        self.client, self.task = client, task
        self.st = client.statements
        self._loaded: durable.Loaded | None = None
        self._loaded_at = 0.0  # time.monotonic() when they were read
        self._names: set[str] = set()
        self.spawned: set[UUID] = set()  # children spawned by this run

    # -- drivers ----------------------------------------------------------------

    def run(self, flow: Flow) -> Any:
        """Drive ``flow`` in this thread (a function handler)."""
        result: Any = None
        while True:
            try:
                need = flow.send(result)
            except StopIteration as stop:
                return stop.value
            result = (need.fn(*need.args, **need.kwargs) if isinstance(need, Call)
                      else self.client.perform(need))

    async def arun(self, flow: Flow) -> Any:
        """Drive ``flow`` on the event loop (a coroutine handler): statements run in a
        thread, so the loop serves the other slots meanwhile."""
        result: Any = None
        while True:
            try:
                need = flow.send(result)
            except StopIteration as stop:
                return stop.value
            if isinstance(need, Call):
                result = need.fn(*need.args, **need.kwargs)
                if inspect.isawaitable(result):
                    result = await result
            else:
                result = await asyncio.to_thread(self.client.perform, need)

    # -- the calls ----------------------------------------------------------------

    def step(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Flow:
        """Run ``fn`` once; its value is checkpointed before the handler goes on."""
        if not callable(fn):
            raise DurableError(f"step {name!r}: {fn!r} is not callable")
        found = yield from self._begin(name, "step")
        if found is not None and found.state == "done":
            return found.decoded
        value = yield Call(fn, args, kwargs)
        try:
            text = validate.payload_json(value, self.st.config.max_payload_bytes)
        except InvalidTask as exc:
            raise DurableError(f"step {name!r} returned a value its checkpoint cannot keep: "
                               f"{str(exc).removeprefix('payload ')}") from None
        stored, _ = yield durable.save(self.st, self.task, name, "step", "done", text, None)
        return stored.decoded

    def sleep_until(self, name: str, when: datetime | None, seconds: float | None) -> Flow:
        """Park until ``when`` (or ``seconds`` after the first time this call ran)."""
        found = yield from self._begin(name, "sleep")
        if found is not None and found.state == "done":
            return None
        until = found.until if found is not None and found.until is not None else (
            _aware(when) if when is not None else self._now() + timedelta(seconds=seconds or 0))
        if self._now() >= until:
            yield durable.save(self.st, self.task, name, "sleep", "done", None, until)
            return None
        if found is None:
            yield durable.save(self.st, self.task, name, "sleep", "waiting", None, until)
        raise Park(Parking("sleep", until, note=f"sleep {name!r} until {until.isoformat()}"))

    def wait_event(self, name: str, event: str, timeout_s: float | None) -> Flow:
        """The payload of ``event``, parked until it is emitted or the timeout."""
        event = durable.event_name(event)
        found = yield from self._begin(name, "event")
        if found is not None and found.state == "done":
            return found.decoded
        if found is not None and found.state == "timed_out":
            raise EventTimeout(f"event {event!r} was not emitted within the timeout of "
                               f"wait_event {name!r}")
        until = self._deadline(found, timeout_s)
        emitted, payload = yield durable.event(self.st, event)
        if emitted:
            stored, _ = yield durable.save(self.st, self.task, name, "event", "done", payload,
                                           until)
            return stored.decoded
        if until is not None and self._now() >= until:
            yield durable.save(self.st, self.task, name, "event", "timed_out", None, until)
            raise EventTimeout(f"event {event!r} was not emitted within the timeout of "
                               f"wait_event {name!r}")
        if found is None:
            yield durable.save(self.st, self.task, name, "event", "waiting",
                               json.dumps({"event": event}), until)
        raise Park(Parking("event", until, event=event,
                           note=f"wait_event {name!r} for {event!r}" + _until(until)))

    def spawn(self, name: str, sig: Signature) -> Flow:
        """Enqueue ``sig`` as a child, once; its id."""
        if not isinstance(sig, Signature):
            raise DurableError(f"spawn {name!r} takes a signature (fn.s(...)), got {sig!r:.80}")
        found = yield from self._begin(name, "spawn")
        if found is not None:
            return UUID(found.decoded)
        child = self.st.dialect.new_ids(1)[0]
        spawned: UUID = yield durable.spawn(self.st, self.task, name, sig, child)
        self.spawned.add(spawned)
        return spawned

    def wait(self, name: str, child_ids: Sequence[UUID | str], timeout_s: float | None) -> Flow:
        """The results of children ``child_ids``, in order, parked until all ended."""
        found = yield from self._begin(name, "wait")
        if found is not None and found.state == "done":
            return found.decoded
        if found is not None and found.state == "timed_out":
            raise WaitTimeout(f"the children of wait {name!r} did not all finish within "
                              "its timeout")
        ids = self._children(name, child_ids)
        until = self._deadline(found, timeout_s)
        rows = yield durable.children(self.st, self.task.id, ids)
        results, running = _results(rows)
        if not running:
            stored, _ = yield durable.save(self.st, self.task, name, "wait", "done",
                                           json.dumps(results), until)
            return stored.decoded
        if until is not None and self._now() >= until:
            yield durable.save(self.st, self.task, name, "wait", "timed_out", None, until)
            raise WaitTimeout(f"{running} of the {len(ids)} children of wait {name!r} had "
                              "not finished at its timeout")
        if found is None:
            yield durable.save(self.st, self.task, name, "wait", "waiting",
                               json.dumps({"children": [str(i) for i in ids]}), until)
        raise Park(Parking("children", until, seen=rows[0][-1],
                           note=f"wait {name!r} for {running} of {len(ids)} children"
                                + _until(until)))

    # -- helpers ------------------------------------------------------------------

    def _begin(self, name: str, kind: str) -> Generator[Need, Any, Checkpoint | None]:
        """Claim ``name`` for this run and return its checkpoint, if any."""
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME:
            raise DurableError(f"a durable call's name is text of 1 to {MAX_NAME} "
                               f"characters, got {name!r:.80}")
        if name in self._names:
            raise DurableError(f"the name {name!r} is used twice in one run of task "
                               f"{self.task.id}: each durable call needs a name of its own")
        self._names.add(name)
        if self._loaded is None:
            self._loaded = yield durable.load(self.st, self.task.id)
            self._loaded_at = time.monotonic()
        found = self._loaded.checkpoints.get(name)
        if found is not None and found.kind != kind:
            raise DurableError(f"{name!r} was a {found.kind} when task {self.task.id} ran "
                               f"before, and is a {kind} now: give the {kind} a new name")
        return found

    def _now(self) -> datetime:
        """The server's clock: as read with the checkpoints, plus the time since."""
        assert self._loaded is not None
        return self._loaded.now + timedelta(seconds=time.monotonic() - self._loaded_at)

    def _deadline(self, found: Checkpoint | None, timeout_s: float | None) -> datetime | None:
        """A wait's deadline: the one its first run fixed, else ``timeout_s`` from now."""
        if found is not None:
            return found.until
        timeout = validate.seconds("timeout_s", timeout_s)
        return None if timeout is None else self._now() + timedelta(seconds=timeout)

    def _children(self, name: str, child_ids: Sequence[UUID | str]) -> list[UUID]:
        """``child_ids`` as ids of this task's children (spawned by it)."""
        if isinstance(child_ids, str | UUID) or not 1 <= len(child_ids) <= MAX_CHILDREN:
            raise DurableError(f"wait {name!r} takes a list of 1 to {MAX_CHILDREN:,} child "
                               f"ids, got {child_ids!r:.80}")
        assert self._loaded is not None
        mine = {cp.decoded for cp in self._loaded.checkpoints.values() if cp.kind == "spawn"}
        ids = []
        for child in child_ids:
            try:
                cid = child if isinstance(child, UUID) else UUID(str(child))
            except ValueError:
                raise DurableError(f"wait {name!r}: {child!r:.80} is not a task id") from None
            if str(cid) not in mine and cid not in self.spawned:
                raise DurableError(f"wait {name!r}: task {cid} is not a child of task "
                                   f"{self.task.id} (spawn it with ctx.spawn)")
            ids.append(cid)
        return ids


def _results(rows: list[Any]) -> tuple[list[Any], int]:
    """Children's results in order, and how many still run; a dead child, or one that
    ended without a result, raises :class:`ChildDied`."""
    results, running = [], 0
    for child, status, last_error, value, error, kept, _folded in rows:
        if status == "dead":
            raise ChildDied(child, f"died: {last_error}")
        if status is not None:
            running += 1
        elif not kept:
            raise ChildDied(child, "ended without a result: it was cancelled, or its result "
                                   "expired")
        elif error is not None:
            raise ChildDied(child, f"succeeded, but its result is missing: {error}")
        else:
            results.append(json.loads(value) if value is not None else None)
    return results, running


def _aware(when: datetime) -> datetime:
    if not isinstance(when, datetime):
        raise DurableError(f"sleep_until takes a datetime, got {when!r:.80}")
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _until(until: datetime | None) -> str:
    return "" if until is None else f" until {until.isoformat()}"
