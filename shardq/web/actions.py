"""The operator's actions, shared by the dashboard (pages and JSON API) and the CLI:
each bounded, so that one request stays short, and each audited.

Every action runs with its record in the audit trail in one transaction
(:func:`shardq.ops.audit.audited`): ``who`` says who acts, through which door, from
where.  Actions over a whole queue (purge it, retry, redrive or purge its dead letters) do at
most :data:`ACTION_ROWS` tasks a call and say whether more remain; the API's caller (or
the page's button, pressed again) repeats them.  Their
arguments may come as posted text (a page's form) or JSON values (the API).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from shardq.core import validate
from shardq.core.errors import InvalidTask
from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.ops import audit, control, deadletters, flow, graphs
from shardq.text import limits

ACTION_ROWS = 1000
T = TypeVar("T")


@dataclass(frozen=True)
class Done:
    """What an action did: a sentence for people, a count, and whether more remain."""

    message: str
    count: int = 0
    more: bool = False


def run(st: Statements, who: audit.Actor, action: str, steps: Plan[Done], *,
        queue: str | None = None, task_id: UUID | str | None = None,
        params: Mapping[str, Any] | None = None) -> Done:
    """Run an action's plan with its audit record, in one transaction."""
    entry = audit.Entry(who, action, queue, task_id, dict(params or {}))
    return st.perform(audit.audited(st, steps, entry, lambda done: done.message))


def pause(st: Statements, who: audit.Actor, queue: str, until: str | None = None) -> Done:
    """Pause ``queue``: until resumed, or until ``until`` (ISO 8601 text with its offset,
    ``2026-12-01T09:00:00+00:00``; empty or None: until resumed)."""
    end = _moment("until", until) if until else None

    def steps() -> Steps[Done]:
        at = yield from control.pause(st, queue, until=end).steps()
        return Done(f"{queue} paused (since {at:%Y-%m-%d %H:%M:%S %Z}"
                    + (f", until {end.isoformat()})" if end else ")"), 1)
    return run(st, who, "pause", plan(steps), queue=queue,
               params={"until": end.isoformat()} if end else None)


def resume(st: Statements, who: audit.Actor, queue: str) -> Done:
    """Resume ``queue``."""
    def steps() -> Steps[Done]:
        was = yield from control.resume(st, queue).steps()
        return Done(f"{queue} resumed" if was else f"{queue} was not paused", int(was))
    return run(st, who, "resume", plan(steps), queue=queue)


def purge(st: Statements, who: audit.Actor, queue: str) -> Done:
    """Delete up to :data:`ACTION_ROWS` waiting tasks of ``queue``."""
    def steps() -> Steps[Done]:
        n = yield from control.purge(st, queue, ACTION_ROWS).steps()
        more = n >= ACTION_ROWS
        return Done(f"purged {n:,} waiting task(s) of {queue}"
                    + ("; more remain: purge again" if more else ""), n, more)
    return run(st, who, "purge", plan(steps), queue=queue)


LIMIT_FIELDS = ("max_running", "max_running_per_group", "rate", "rate_per_group")


def limit(st: Statements, who: audit.Actor, queue: str, fields: Mapping[str, str | None], *,
          create: bool = False) -> Done:
    """Change ``queue``'s limits named in ``fields`` (as written in
    :mod:`shardq.text.limits`; empty or ``none`` removes one); the others stay.  A
    queue shardq does not know is refused (:class:`~shardq.UnknownQueue`) unless
    ``create``, as by :meth:`shardq.Client.set_limits`."""
    unknown = set(fields) - set(LIMIT_FIELDS)
    if unknown:
        raise InvalidTask(f"no limit named {sorted(unknown)[0]!r}: the limits are "
                          + ", ".join(LIMIT_FIELDS))
    changes: dict[str, Any] = {}
    for name, text in fields.items():
        parse = limits.rate if name.startswith("rate") else limits.running
        changes[name] = parse(str(text or ""), name)

    def steps() -> Steps[Done]:
        old = (yield from flow.control(st, queue).steps()).limits
        new = yield from flow.set_limits(st, queue, limits.merged(old, **changes),
                                         create=create).steps()
        shown = limits.summary_of(new)
        return Done(f"{queue}: " + (f"limits set ({shown})" if shown else "no limits"), 1)
    return run(st, who, "limits", plan(steps), queue=queue,
               params={k: v for k, v in fields.items()})


def cancel(st: Statements, who: audit.Actor, task_id: UUID | str) -> Done:
    """Cancel one waiting or running task."""
    def steps() -> Steps[Done]:
        result = yield from control.cancel(st, task_id).steps()
        if result.status is None:
            return Done(f"task {result.task_id} was not waiting or running: nothing "
                        "cancelled")
        return Done(f"task {result.task_id} cancelled (it was {result.status})", 1)
    return run(st, who, "cancel", plan(steps), task_id=validate.task_id(task_id))


def cancel_flow(st: Statements, who: audit.Actor, flow_id: UUID | str) -> Done | None:
    """Cancel every task of a flow that has not finished; None when no flow has the id
    (nothing is recorded then)."""
    if st.perform(graphs.get(st, flow_id, 0)) is None:
        return None

    def steps() -> Steps[Done]:
        n = yield from graphs.cancel(st, flow_id).steps()
        if n:
            return Done(f"flow {flow_id} cancelled: {n:,} task(s) that had not finished", n)
        return Done(f"flow {flow_id} had ended: nothing cancelled")
    return run(st, who, "cancel_flow", plan(steps), params={"flow_id": str(flow_id)})


def retry_dead(st: Statements, who: audit.Actor, queue: str | None,
               ids: Iterable[UUID | str] | None) -> Done:
    """Make dead tasks eligible again: those ``ids``, or the newest
    :data:`ACTION_ROWS` of ``queue``."""
    return _dead(st, who, "retry_dead", queue, ids, "retried")


def purge_dead(st: Statements, who: audit.Actor, queue: str | None,
               ids: Iterable[UUID | str] | None) -> Done:
    """Delete dead tasks: those ``ids``, or the newest :data:`ACTION_ROWS` of ``queue``."""
    return _dead(st, who, "purge_dead", queue, ids, "purged")


def redrive(st: Statements, who: audit.Actor, queue: str, *, error: str | None = None,
            older_than_s: float | str | None = None, newer_than_s: float | str | None = None,
            dry_run: bool | str = False) -> Done:
    """Make eligible again up to :data:`ACTION_ROWS` dead tasks of ``queue`` whose last
    error contains ``error`` and that died more than ``older_than_s`` and less than
    ``newer_than_s`` seconds ago (empty: no such bound); with ``dry_run``, count them
    (up to 10,000) and change nothing.  See :meth:`shardq.Client.redrive_dead`."""
    if error is not None and not isinstance(error, str):
        raise InvalidTask(f"error must be text, got {error!r:.60}")
    older, newer = _seconds("older_than_s", older_than_s), _seconds("newer_than_s", newer_than_s)
    filters = {"error": error or None, "older_than_s": older, "newer_than_s": newer}
    counting = dry_run is True or str(dry_run).lower() in ("1", "true", "yes", "on")
    redrive = deadletters.redrive(st, queue, error=error or None, older_than_s=older,
                                  newer_than_s=newer, dry_run=counting, limit=ACTION_ROWS)
    if counting:  # a count changes nothing: not recorded
        done = st.perform(redrive)
        return Done(done.sentence(queue), done.count, done.more)

    def steps() -> Steps[Done]:
        done = yield from redrive.steps()
        return Done(done.sentence(queue), done.count, done.more)
    return run(st, who, "redrive", plan(steps), queue=queue,
               params={k: v for k, v in filters.items() if v is not None})


def _moment(name: str, text: object) -> datetime:
    """ISO 8601 text with its offset as an aware datetime; InvalidTask otherwise."""
    try:
        value = datetime.fromisoformat(str(text))
    except ValueError:
        raise InvalidTask(f"{name} must be an ISO 8601 time with its offset "
                          f"(2026-12-01T09:00:00+00:00), got {text!r:.60}") from None
    if value.tzinfo is None:
        raise InvalidTask(f"{name} names no time zone: add its offset, e.g. {text}+00:00")
    return value


def _seconds(name: str, value: float | str | None) -> float | None:
    """A number of seconds from JSON or a form's text (empty or None: none)."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, bool):  # JSON's true is no number of seconds
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        raise InvalidTask(f"{name} must be a number of seconds, got {value!r:.60}") from None


def _dead(st: Statements, who: audit.Actor, action: str, queue: str | None,
          ids: Iterable[UUID | str] | None, verb: str) -> Done:
    if (ids is None) == (queue is None):
        raise InvalidTask("give the ids of dead tasks or a queue, not both")
    chosen: list[UUID | str] = []
    if ids is not None:
        chosen = validate.as_list(ids, "ids") if isinstance(ids, Iterable) else []
        if not 1 <= len(chosen) <= ACTION_ROWS:
            raise InvalidTask(f"give 1 to {ACTION_ROWS} ids, got {len(chosen)}")
        chosen = [validate.task_id(i) for i in chosen]

    def steps() -> Steps[Done]:
        picked, full = chosen, False
        if queue is not None:
            dead = yield from deadletters.listing(st, queue, ACTION_ROWS).steps()
            picked, full = [t.id for t in dead], len(dead) == ACTION_ROWS
        act = (deadletters.retry(st, picked, None) if action == "retry_dead"
               else deadletters.delete(st, picked))
        done = (yield from act.steps()) if picked else []
        more = full and bool(done)
        return Done(f"{verb} {len(done):,} dead task(s)"
                    + ("; more remain: again" if more else ""), len(done), more)
    params = {"ids": [str(i) for i in chosen]} if ids is not None else {}
    return run(st, who, action, plan(steps), queue=queue, params=params)
