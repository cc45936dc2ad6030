"""The operator's commands of the ``shardq`` CLI: ``stats``, ``top``, ``workers``,
``queue pause|resume|purge|limit`` and ``task cancel`` (registered by
:func:`shardq.cli.main.build_parser`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from shardq.cli.acting import act
from shardq.core.config import ClientConfig, add_arguments, from_arguments
from shardq.core.errors import ConfigError, InvalidTask, UnknownQueue
from shardq.core.redaction import redact
from shardq.text import durable

if TYPE_CHECKING:
    from shardq.client import Client
    from shardq.core.task import Attempt

Handler = Callable[[argparse.Namespace], int]
MAX_BUDGET_S = 86_400 * 365
PURGE_BATCH = 10_000  # waiting tasks `queue purge` deletes per transaction


def budget(raw: str) -> float:
    """An argparse type: a number of seconds from 0 (none) to a year."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {raw!r}") from None
    if not 0 <= value <= MAX_BUDGET_S:
        raise argparse.ArgumentTypeError(f"must be between 0 and a year, got {value}")
    return value


def moment(raw: str) -> datetime:
    """An argparse type: an ISO 8601 time with its offset (``2026-12-01T09:00:00+00:00``)."""
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {raw!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{raw!r} names no time zone: add one, e.g. "
                                         f"{raw}+00:00")
    return value


def _typed(parser: str, name: str) -> Callable[[str], Any]:
    """An argparse type from the parser ``parser`` of :mod:`shardq.text.limits`."""
    def typed(raw: str) -> Any:
        from shardq.text import limits  # the driver comes with it: not for --help

        try:
            return getattr(limits, parser)(raw, name)
        except InvalidTask as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return typed


def _client(args: argparse.Namespace) -> Client:
    from shardq.client import Client  # the driver and its pool: only commands that connect

    return Client(config=from_arguments(ClientConfig, args))


def cmd_stats(args: argparse.Namespace) -> int:
    """Print one queue's figures, or every queue's: a table, or JSON with --json."""
    from shardq.cli import table
    from shardq.ops import queuestats  # rich and the figures: this command only
    from shardq.text import layout

    slo = args.slo_s or None
    with _client(args) as client:
        st = client.statements
        if args.queue:
            figures = [st.perform(queuestats.stats(st, args.queue, slo))]
        else:
            figures = st.perform(queuestats.queues(st, slo))
        buckets = layout.line(client.reshard_status())
    if not args.json:
        table.show(figures)
        print(f"buckets: {buckets}")
    elif args.queue:
        print(json.dumps(figures[0].as_dict()))
    else:
        print(json.dumps({f.queue: f.as_dict() for f in figures}))
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    """A live view of every queue's figures, refreshed every second; q quits."""
    if not sys.stdin.isatty():
        raise ConfigError("shardq top needs a terminal (use `shardq stats --json` in scripts)")
    from shardq.cli import table
    from shardq.ops import queuestats  # rich and the figures: this command only

    with _client(args) as client:
        st = client.statements
        table.top(lambda: st.perform(queuestats.queues(st, args.slo_s or None)))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """``shardq task cancel ID``: remove a waiting task, or stop a running one."""
    from shardq.client import Client

    with _client(args) as client:
        done = act(client, "cancel", Client.cancel.make(client, args.id),
                   lambda d: f"cancelled (it was {d.status})" if d.status else
                   "nothing to cancel", task_id=args.id)
    if done.status is None:
        print(f"shardq: no waiting or running task {args.id} (finished, dead or never "
              "enqueued)", file=sys.stderr)
        return 1
    print(f"cancelled {done.task_id} ("
          + ("running: its handler is told at the next heartbeat" if done.was_running
             else "waiting: removed") + ")")
    return 0


def attempts_table(history: list[Attempt]) -> str:
    """A task's attempts as a plain table: number, claimed, duration, outcome, worker,
    error (its last line, redacted)."""
    lines = ["attempts:", f"{'#':>4}  {'claimed at':<32}  {'took':>9}  {'outcome':<20}  "
             "worker / error"]
    for a, outcome in zip(history, durable.outcomes(history), strict=True):
        took = "" if a.duration_s is None else f"{a.duration_s:.3f}s"
        claimed = a.claimed_at.isoformat() if a.claimed_at else "-"
        lines.append(f"{a.attempt:>4}  {claimed:<32}  {took:>9}  {outcome:<20}  "
                     f"{a.worker or '-'}")
        # A parked attempt's error says what the task waits for.
        error = (a.error or "").strip().splitlines()
        if error:
            lines.append(f"{'':>73}{redact(error[-1])}")
    return "\n".join(lines)


def cmd_workers(args: argparse.Namespace) -> int:
    """``shardq workers``: the registered worker processes, as a table or JSON lines."""
    with _client(args) as client:
        found = client.workers()
    for w in found:
        if args.json:
            print(json.dumps({"id": str(w.id), "name": w.name, "host": w.host, "pid": w.pid,
                              "queues": w.queues, "started_at": w.started_at.isoformat(),
                              "last_seen_at": w.last_seen_at.isoformat(), "alive": w.alive,
                              "holding": w.holding}))
        else:
            print(f"{w.name:<28} {'alive' if w.alive else 'stale':<6} holding {w.holding:>5}  "
                  f"last seen {w.last_seen_at.isoformat()}  queues {','.join(w.queues)}  "
                  f"{w.id}")
    if not found and not args.json:
        print("no workers registered", file=sys.stderr)
    return 0


def cmd_queue(args: argparse.Namespace) -> int:
    """Pause, resume, purge or limit one queue."""
    if args.action == "limit":
        return cmd_limit(args)
    from shardq.client import Client
    from shardq.ops import control

    q = args.queue
    with _client(args) as client:
        if args.action == "pause":
            until = args.until if args.for_s is None else \
                datetime.now(UTC) + timedelta(seconds=args.for_s)
            try:
                since = act(client, "pause", Client.pause.make(client, q, until=until,
                                                               create=args.create),
                            lambda at: f"{q} paused (since {at.isoformat()})"
                            + (f" until {until.isoformat()}" if until else ""), queue=q,
                            params={"until": until.isoformat()} if until else None)
            except UnknownQueue as exc:  # the API's hint names create=True: give the flag
                raise UnknownQueue(exc.queue, exc.known, "to pause it before its first "
                                   "task, add --create") from None
            print(f"queue {args.queue} paused since {since.isoformat()}"
                  + (f" until {until.isoformat()}" if until else ""))
        elif args.action == "resume":
            was = act(client, "resume", Client.resume.make(client, q),
                      lambda was: f"{q} resumed" if was else f"{q} was not paused", queue=q)
            print(f"queue {q} " + ("resumed" if was else "was not paused"))
        elif not args.yes:
            print(f"shardq: purge deletes every waiting task of {args.queue}: add --yes",
                  file=sys.stderr)
            return 2
        else:
            # In bounded batches, each with its record: no transaction holds a whole
            # queue's deletions.
            purged, batch = 0, PURGE_BATCH
            while batch == PURGE_BATCH:
                batch = act(client, "purge", control.purge(client.statements, q, PURGE_BATCH),
                            lambda n: f"purged {n:,} waiting task(s) of {q}", queue=q)
                purged += batch
            print(f"purged {purged} waiting task(s) of {q}")
    return 0


LIMIT_OPTIONS = ("max_running", "max_running_per_group", "rate", "rate_per_group")


def cmd_limit(args: argparse.Namespace) -> int:
    """``shardq queue limit QUEUE [...]``: change the limits given (the others stay; with
    --clear, every one not given goes), then print them; with no option, print them."""
    from shardq.client import Client
    from shardq.ops.flow import Limits
    from shardq.text import limits

    changes = {name: getattr(args, name) for name in LIMIT_OPTIONS
               if getattr(args, name) is not None}
    with _client(args) as client:
        found = client.limits(args.queue)
        if changes or args.clear:
            new = limits.merged(Limits() if args.clear else found.limits, **changes)
            try:
                act(client, "limits", Client.set_limits.make(
                    client, args.queue, max_running=new.max_running,
                    max_running_per_group=new.max_running_per_group, rate=new.rate,
                    rate_per_group=new.rate_per_group, create=args.create),
                    lambda set_: "limits set: " + (limits.summary_of(set_) or "none"),
                    queue=args.queue, params={k: str(v) for k, v in changes.items()})
            except UnknownQueue as exc:  # the API's hint names create=True: give the flag
                raise UnknownQueue(exc.queue, exc.known, "to limit it before its first "
                                   "task, add --create") from None
            found = client.limits(args.queue)
    if args.json:
        print(json.dumps({"queue": args.queue, **dataclasses.asdict(found.limits),
                          "running": found.running,
                          "running_most_group": found.running_most_group}))
        return 0
    print(f"queue {args.queue}: " + ("limits" if found.limits.any else "no limits"))
    for line in limits.lines(found) if found.limits.any else []:
        print("  " + line)
    return 0


def add_commands(sub: Any,
                 command: Callable[[str, Handler, str], argparse.ArgumentParser]) -> None:
    """Register ``stats``, ``top`` and ``queue`` on the CLI's subparsers ``sub``
    (``command`` adds one with the client settings)."""


    p = command("stats", cmd_stats, "a queue's figures (or every queue's): counts, rates, "
                                    "lag, drain and SLO forecasts")
    p.add_argument("queue", nargs="?", help="one queue (default: every queue)")
    p.add_argument("--json", action="store_true", help="JSON for scripts instead of a table")
    p.add_argument("--slo-s", type=budget, default=0.0,
                   help="process-by budget per task: adds the SLO forecasts")

    p = command("workers", cmd_workers, "the worker processes: alive or stale, the tasks "
                                        "each holds, when each was last seen")
    p.add_argument("--json", action="store_true", help="JSON lines for scripts")

    p = command("top", cmd_top, "a live view of every queue, refreshed every second (q quits)")
    p.add_argument("--slo-s", type=budget, default=0.0,
                   help="process-by budget per task: adds the SLO forecasts")

    p = sub.add_parser("queue", help="queue control: pause, resume, purge or limit a queue")
    p.set_defaults(handler=cmd_queue)
    control = p.add_subparsers(dest="action", required=True)
    actions = [control.add_parser("pause", help="hand out no task of the queue (it still "
                                                "accepts new ones)"),
               control.add_parser("resume", help="hand out the queue's tasks again"),
               control.add_parser("purge", help="delete every waiting task of the queue "
                                                "(running and dead ones stay)")]
    actions[0].add_argument("--create", action="store_true",
                            help="pause a queue shardq does not know yet (no tasks so far)")
    end = actions[0].add_mutually_exclusive_group()
    end.add_argument("--until", type=moment, metavar="TIME",
                     help="hand out its tasks again from this ISO 8601 time with its "
                          "offset (2026-12-01T09:00:00+00:00), with no resume")
    end.add_argument("--for-s", type=budget, metavar="SECONDS",
                     help="the same, this many seconds from now")
    actions[2].add_argument("--yes", action="store_true", help="really delete them")
    actions.append(_limit_parser(control))
    for action in actions:
        action.add_argument("queue")
        add_arguments(action, ClientConfig)


def _limit_parser(control: Any) -> argparse.ArgumentParser:
    """``shardq queue limit``'s options."""
    p: argparse.ArgumentParser = control.add_parser(
        "limit", help="show or change the queue's limits: running at once, per group, "
                      "rates (workers apply a change at their next claim)",
        description="Show the queue's limits and how much of each is in use; with options, "
                    "change those given first (the others stay). NONE removes one limit.")
    p.add_argument("--max-running", type=_typed("running", "the value"),
                   metavar="N|none", help="tasks of the queue running at once, across "
                                          "every worker")
    p.add_argument("--max-running-per-group", metavar="N|none",
                   type=_typed("running", "the value"),
                   help="tasks of one group running at once")
    p.add_argument("--rate", type=_typed("rate", "the value"),
                   metavar="COUNT/PERIOD_S[/BURST]|none",
                   help="claims per period, spread evenly: at most BURST + COUNT x t / "
                        "PERIOD_S in any t seconds (BURST defaults to a twentieth of COUNT)")
    p.add_argument("--rate-per-group", type=_typed("rate", "the value"),
                   metavar="COUNT/PERIOD_S[/BURST]|none", help="the same for each group")
    p.add_argument("--clear", action="store_true",
                   help="remove every limit not given with this command")
    p.add_argument("--create", action="store_true",
                   help="limit a queue shardq does not know yet (no tasks so far)")
    p.add_argument("--json", action="store_true", help="print the limits as JSON")
    return p
