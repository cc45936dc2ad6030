"""The ``shardq`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence

from shardq import embedded, migrate
from shardq.client import Client
from shardq.config import ClientConfig, add_arguments, from_arguments
from shardq.errors import ShardqError
from shardq.janitor import Janitor

Handler = Callable[[argparse.Namespace], int]


def _client(args: argparse.Namespace) -> Client:
    return Client(config=from_arguments(ClientConfig, args))


def cmd_migrate(args: argparse.Namespace) -> int:
    """Create or upgrade the schema (or print its DDL with --sql)."""
    config = from_arguments(ClientConfig, args)
    dsn = config.dsn
    if dsn is None and not args.sql:
        dsn = embedded.ensure_started()
    migrate.upgrade(dsn, bucket_count=config.bucket_count, sql=args.sql,
                    dialect=args.dialect, revision=args.revision)
    return 0


def cmd_janitor(args: argparse.Namespace) -> int:
    """Run the janitor: one pass with --once, else until interrupted."""
    with _client(args) as client:
        if args.once:
            print(json.dumps(vars(client.run_janitor_once())))
            return 0
        janitor = Janitor(client, interval_s=args.interval_s)
        janitor.start()
        try:
            while janitor.running:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        finally:
            janitor.stop()
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    """Manage the embedded PostgreSQL."""
    if args.action == "url":
        print(embedded.ensure_started())
    elif args.action == "stop":
        print("stopped" if embedded.stop() else "not running")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print a queue's counts as JSON."""
    with _client(args) as client:
        print(json.dumps(client.stats(args.queue)))
    return 0


def cmd_task(args: argparse.Namespace) -> int:
    """Show one task's state and history."""
    with _client(args) as client:
        info = client.get(args.id)
    if info is None:
        print(f"no task {args.id} (finished, purged or never enqueued)", file=sys.stderr)
        return 1
    for key, value in vars(info).items():
        print(f"{key:>22}: {value}")
    return 0


def cmd_dead(args: argparse.Namespace) -> int:
    """List, retry or purge dead tasks."""
    with _client(args) as client:
        if args.action == "list":
            for info in client.dead(args.queue, limit=args.limit):
                error = (info.last_error or "").strip().splitlines()
                print(json.dumps({"id": str(info.id), "died_at": info.exec_time.isoformat(),
                                  "key": info.key, "attempts": info.attempts,
                                  "times_requeued": info.times_requeued,
                                  "last_error": error[-1] if error else None}))
        elif args.action == "retry":
            if bool(args.ids) == bool(args.queue):
                print("shardq: give task ids or --queue", file=sys.stderr)
                return 2
            retried = client.retry_dead(args.ids or None, queue=args.queue)
            print(f"retried {len(retried)} task(s)")
        else:
            print(f"purged {client.purge_dead(args.queue, older_than_s=args.older_than_s)} "
                  "task(s)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Enqueue and consume a batch of no-op tasks and print the rates."""
    from shardq import demo

    with _client(args) as client:
        demo.run(client, tasks=args.tasks, threads=args.threads, limit=args.limit, out=sys.stdout)
    return 0


def cmd_consume(args: argparse.Namespace) -> int:
    """Run a worker for an app or a handler function."""
    from shardq.worker.config import WorkerConfig
    from shardq.worker.run import run

    return run(args.target, from_arguments(ClientConfig, args), from_arguments(WorkerConfig, args))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="shardq", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler: Handler, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        add_arguments(p, ClientConfig)
        p.set_defaults(handler=handler)
        return p

    p = command("migrate", cmd_migrate, "create or upgrade the shardq schema")
    p.add_argument("--sql", action="store_true", help="print the DDL instead of running it")
    p.add_argument("--dialect", choices=["postgresql", "cockroachdb"],
                   help="with --sql and no --dsn: the engine to render for")
    p.add_argument("--revision", default="head", help="target revision (default head)")

    from shardq.worker.config import WorkerConfig

    p = command("consume", cmd_consume, "run a worker: claim tasks and run their handlers")
    p.add_argument("target", help="module:app (a shardq.App) or module:function (a raw handler)")
    add_arguments(p, WorkerConfig)

    p = command("janitor", cmd_janitor, "rescue expired leases and apply due head starts")
    p.add_argument("--once", action="store_true", help="one pass over every bucket, then exit")
    p.add_argument("--interval-s", type=float, default=1.0, help="pause between passes")

    p = sub.add_parser("db", help="the embedded PostgreSQL")
    p.add_argument("action", choices=["url", "stop"], help="print its DSN, or stop it")
    p.set_defaults(handler=cmd_db)

    p = command("stats", cmd_stats, "counts of a queue's tasks by state")
    p.add_argument("queue")

    p = command("task", cmd_task, "one task's state and history")
    p.add_argument("action", choices=["show"])
    p.add_argument("id")

    p = sub.add_parser("dead", help="dead letters: list, retry or purge them")
    p.set_defaults(handler=cmd_dead)
    dead = p.add_subparsers(dest="action", required=True)
    listing = dead.add_parser("list", help="the newest dead tasks of a queue, as JSON lines")
    listing.add_argument("queue")
    listing.add_argument("--limit", type=int, default=100)
    retry = dead.add_parser("retry", help="make dead tasks eligible again, with fresh attempts")
    retry.add_argument("ids", nargs="*", help="task ids (or --queue for all of a queue)")
    retry.add_argument("--queue", dest="queue", default=None)
    purge = dead.add_parser("purge", help="delete a queue's dead tasks")
    purge.add_argument("queue")
    purge.add_argument("--older-than-s", type=float, default=0.0,
                       help="only those dead for longer than this")
    for action in (listing, retry, purge):
        add_arguments(action, ClientConfig)

    p = command("demo", cmd_demo, "enqueue and consume no-op tasks, print throughput")
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--limit", type=int, default=100)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shardq`` command."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler: Handler = args.handler
    try:
        return handler(args)
    except ShardqError as exc:
        print(f"shardq: {exc}", file=sys.stderr)
        return 2
