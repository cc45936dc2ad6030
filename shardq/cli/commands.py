"""The ``shardq`` commands that run the process's work: migrate, janitor, db, task, dead,
periodic, doctor, demo, consume and sql (:mod:`shardq.cli.ops` has the queue views and
controls).  Each imports what it needs when it runs, so the parser
(:mod:`shardq.cli.main`) starts fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from datetime import datetime
from typing import TYPE_CHECKING

from shardq.cli import ops as cli_ops
from shardq.cli.acting import act
from shardq.core.config import ClientConfig, from_arguments
from shardq.core.errors import ConfigError
from shardq.core.redaction import redact
from shardq.core.signals import stop_on_signals
from shardq.text import durable
from shardq.worker.config import WorkerConfig

if TYPE_CHECKING:
    from shardq.client import Client


def _client(args: argparse.Namespace) -> Client:
    from shardq.client import Client  # the driver and its pool: only commands that connect

    return Client(config=from_arguments(ClientConfig, args))


def cmd_migrate(args: argparse.Namespace) -> int:
    """Create or upgrade the schema (or print its DDL with --sql)."""
    from shardq.core import (
        embedded,
        migrate,  # alembic and SQLAlchemy: for this command only
    )

    config = from_arguments(ClientConfig, args)
    dsn = config.dsn
    if (args.read_only or args.spark) and not args.grants:
        raise ConfigError("--read-only and --spark qualify --grants ROLE")
    if args.grants and args.sql:
        return _grants(dsn or embedded.ensure_started(), args, config, dry_run=True)
    if args.sql:
        if dsn is None and args.dialect is None:
            raise ConfigError("--sql needs --dialect postgresql or --dialect cockroachdb (no "
                              "database is needed), or --dsn to render for that database")
        migrate.upgrade(dsn, bucket_count=config.bucket_count, sql=True, dialect=args.dialect,
                        revision=args.revision)
        return 0
    if dsn is None:
        dsn = embedded.ensure_started()
    was = migrate.current(dsn)
    migrate.upgrade(dsn, bucket_count=config.bucket_count, dialect=args.dialect,
                    revision=args.revision)
    now = migrate.current(dsn)
    at = f"{now} (head)" if now == migrate.head() else str(now)
    print(f"schema already at revision {at}" if now == was else
          f"schema upgraded from revision {was} to {at}" if was else
          f"schema created at revision {at}")
    return _grants(dsn, args, config) if args.grants else 0


def _grants(dsn: str, args: argparse.Namespace, config: ClientConfig, *,
            dry_run: bool = False) -> int:
    """``--grants ROLE``: grant it (or print the statements, with ``dry_run``)."""
    from shardq.core import grants

    level = grants.level_of(read_only=args.read_only, spark=args.spark)
    granted = grants.grant(dsn, args.grants, level, dry_run=dry_run,
                           connect_timeout_s=config.connect_timeout_s)
    print(";\n\n".join(granted.statements) + ";" if dry_run else granted.summary())
    return 0


def cmd_janitor(args: argparse.Namespace) -> int:
    """Run the janitor: one pass with --once, else until SIGINT or SIGTERM."""
    if args.once:
        with _client(args) as client:
            print(json.dumps(vars(client.run_janitor_once())))
        return 0
    # Its own handlers, not KeyboardInterrupt: SIGTERM (systemd's, Kubernetes') must stop it
    # gracefully too, and a SIGINT that the parent set to be ignored must still count.
    with stop_on_signals() as stop:
        _janitor_until(args, stop)
    return 0


def _janitor_until(args: argparse.Namespace, stop: threading.Event) -> None:
    from shardq.core.pooler import session_refusal
    from shardq.loops.vacuum import Vacuumer

    with _client(args) as client:
        janitor = client.janitor()
        vacuumer = Vacuumer(client)
        refusal = client.db.transaction_pooled and session_refusal(False, vacuumer.applies)
        if refusal:
            raise ConfigError(refusal)
        janitor.start()
        if vacuumer.applies:
            vacuumer.start()
        try:
            while janitor.running and not stop.wait(1):
                pass
        finally:
            vacuumer.stop()
            janitor.stop()


def cmd_db(args: argparse.Namespace) -> int:
    """Manage the embedded PostgreSQL."""
    from shardq.core import embedded  # the driver: for this command only

    if args.action == "url":
        print(embedded.ensure_started())
    elif args.action == "stop":
        print("stopped" if embedded.stop() else "not running")
    return 0


def cmd_task(args: argparse.Namespace) -> int:
    """Show one task's state and history, or cancel it."""
    if args.action == "cancel":
        return cli_ops.cmd_cancel(args)
    with _client(args) as client:
        info = client.get(args.id)
        history = info.history if info is not None else tuple(client.attempts(args.id))
    if info is None:
        print(f"no task {args.id} (finished, purged or never enqueued)", file=sys.stderr)
        if not history:
            return 1
    else:
        for key, value in vars(info).items():
            if key in ("status", "history", "steps"):  # `state` tells scheduled from available
                continue
            shown = json.dumps(value, ensure_ascii=False) if key == "payload" else value
            shown = redact(shown) if key == "last_error" and shown else shown
            shown = durable.waiting(value) if key == "waiting_for" and value else shown
            print(f"{key:>22}: {shown}")
        if info.steps:
            print(durable.steps_table(info.steps))
    if history:
        print(cli_ops.attempts_table(list(history)))
    return 0


def cmd_dead(args: argparse.Namespace) -> int:
    """List, retry, redrive or purge dead tasks."""
    from shardq.client import Client

    with _client(args) as client:
        if args.action == "list":
            for info in client.dead(args.queue, limit=args.limit):
                error = (info.last_error or "").strip().splitlines()
                print(json.dumps({"id": str(info.id), "died_at": info.exec_time.isoformat(),
                                  "key": info.key, "attempts": info.attempts,
                                  "times_requeued": info.times_requeued,
                                  "last_error": redact(error[-1]) if error else None}))
        elif args.action == "redrive":
            filters = {"error": args.error, "older_than_s": args.older_than_s,
                       "newer_than_s": args.newer_than_s}
            redrive = Client.redrive_dead.make(client, args.queue, dry_run=args.dry_run,
                                               limit=args.limit, **filters)
            # A dry run changes nothing: only a redrive is recorded.
            done = client.perform(redrive) if args.dry_run else act(
                client, "redrive", redrive, lambda d: d.sentence(args.queue),
                queue=args.queue, params={k: v for k, v in filters.items() if v is not None})
            print(done.sentence(args.queue))
        elif args.action == "retry":
            if bool(args.ids) == bool(args.queue):
                print("shardq: give task ids or --queue", file=sys.stderr)
                return 2
            retried = act(client, "retry_dead", Client.retry_dead.make(
                client, args.ids or None, queue=args.queue),
                lambda ids: f"retried {len(ids):,} dead task(s)", queue=args.queue,
                params={"ids": args.ids} if args.ids else None)
            print(f"retried {len(retried)} task(s)")
        elif not args.yes:
            print(f"shardq: purge deletes dead tasks of {args.queue} for good: add --yes",
                  file=sys.stderr)
            return 2
        else:
            purged = act(client, "purge_dead", Client.purge_dead.make(
                client, args.queue, older_than_s=args.older_than_s),
                lambda n: f"purged {n:,} dead task(s)", queue=args.queue,
                params={"older_than_s": args.older_than_s})
            print(f"purged {purged} task(s)")
    return 0


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def cmd_periodic(args: argparse.Namespace) -> int:
    """List the periodic schedules, or fire one now."""
    from shardq.loops import periodic  # croniter and the time zones: for this command only

    with _client(args) as client:
        if args.action == "list":
            for info in periodic.listing(client.statements):
                print(json.dumps({
                    "name": info.name, "expression": info.expression, "tz": info.tz,
                    "queue": info.queue, "missed": info.missed,
                    "last_slot": _iso(info.last_slot), "next_slot": _iso(info.next_slot),
                    "removed_at": _iso(info.removed_at), "error": info.error}))
            return 0
        name = _schedule_named(args.name, [i.name for i in periodic.listing(client.statements)])
        if name is None:
            return 2
        task_id = periodic.run_now(client.statements, name)
    if task_id is None:  # deleted since it was listed
        print(f"shardq: no periodic schedule named {name!r}", file=sys.stderr)
        return 2
    print(task_id)
    return 0


def _schedule_named(name: str, names: list[str]) -> str | None:
    """The schedule ``name`` means: its full name, or the one name that ends in
    ``.name`` (schedules are named module.function); None, said on stderr, otherwise."""
    if name in names:
        return name
    matches = [n for n in names if n.endswith("." + name)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        print(f"shardq: {len(matches)} periodic schedules end in {name!r}: give the full "
              f"name, one of {', '.join(matches)}", file=sys.stderr)
    else:
        print(f"shardq: no periodic schedule named {name!r} (`shardq periodic list` shows "
              "them)", file=sys.stderr)
    return None


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check a live database and print advice; 1 when something needs attention."""
    from shardq.cli import doctor  # the driver and the checks: for this command only
    from shardq.cli.finding import CHECKS

    with _client(args) as client:
        findings = doctor.examine(client, from_arguments(WorkerConfig, args),
                                  args.check or CHECKS)
    for finding in findings:
        print(f"{'ok' if finding.ok else 'WARN':<4}  {finding.check}: {finding.seen}")
        if finding.advice:
            print(f"      advice: {finding.advice}")
    return 0 if all(f.ok for f in findings) else 1


def cmd_demo(args: argparse.Namespace) -> int:
    """Enqueue and consume a batch of no-op tasks and print the rates."""
    from shardq.cli import demo
    from shardq.core import embedded

    with _client(args) as client:
        demo.run(client, tasks=args.tasks, threads=args.threads, limit=args.limit, out=sys.stdout)
        if client.config.dsn is None:
            print(f"the embedded PostgreSQL keeps running, its data in {embedded.data_dir()}; "
                  "`shardq db stop` stops it")
    return 0


def cmd_consume(args: argparse.Namespace) -> int:
    """Run a worker for an app or a handler function."""
    from shardq.worker.run import run  # the whole daemon: for this command only

    return run(args.target, from_arguments(ClientConfig, args), from_arguments(WorkerConfig, args),
               verbose=args.verbose)


def cmd_sql(args: argparse.Namespace) -> int:
    """List the statements of the hot path, or print one whole."""
    from shardq.cli import sqlshow  # the statements' modules: for this command only

    if args.action == "list" or args.name is None:
        print(sqlshow.listing(), end="")
    else:
        print(sqlshow.show(args.name, args.dialect), end="")
    return 0
