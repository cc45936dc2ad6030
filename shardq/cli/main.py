"""The ``shardq`` command line: its parser (every subcommand and flag) and :func:`main`.

The commands (:mod:`shardq.cli.commands`, :mod:`shardq.cli.ops`) import what they need
when they run (the client, the migrations, the embedded server, the worker): ``shardq
--help`` and the quick commands then start in a fraction of the time that importing
everything at once costs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from shardq.cli import console as cli_console
from shardq.cli import flows as cli_flows
from shardq.cli import ops as cli_ops
from shardq.cli.commands import (
    cmd_consume,
    cmd_db,
    cmd_dead,
    cmd_demo,
    cmd_doctor,
    cmd_janitor,
    cmd_migrate,
    cmd_periodic,
    cmd_sql,
    cmd_task,
)
from shardq.cli.finding import CHECKS as DOCTOR_CHECKS
from shardq.cli.reshard import cmd_reshard
from shardq.core.config import DEFAULT_DEAD_LIST, ClientConfig, add_arguments
from shardq.core.errors import ShardqError
from shardq.core.validate import MAX_CLAIM
from shardq.worker.config import WorkerConfig

if TYPE_CHECKING:
    pass

Handler = Callable[[argparse.Namespace], int]
MAX_DEMO_TASKS = 10_000_000
MAX_DEMO_THREADS = 64
SIGPIPE_STATUS = 141  # what a shell reports for a tool that a closed pipe ended (128 + 13)
INTERRUPTED_STATUS = 130  # and for one that Ctrl-C ended (128 + SIGINT)
DESCRIPTION = """\
shardq: a task queue that lives in PostgreSQL (or CockroachDB). With no --dsn and no
SHARDQ_DSN, commands use an embedded PostgreSQL that keeps running between them
(`shardq db stop` stops it). Try `shardq demo`; `shardq COMMAND --help` shows a
command's options, and `--help-all` its tuning settings too."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the CLI."""

    def error(self, message: str) -> NoReturn:
        """Print ``shardq: <message>`` and exit 2."""
        self.exit(2, f"shardq: {message} (see `{self.prog} --help`)\n")


def count(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high``."""
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {raw!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


class Version(argparse.Action):
    """``--version``: ``shardq X.Y.Z``, the installed distribution's version (read only
    when asked for: the metadata lookup would slow every command's start)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("shardq")
        except PackageNotFoundError:  # a checkout on sys.path that was never installed
            found = "(not installed)"
        print(f"shardq {found}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = Parser(prog="shardq", description=DESCRIPTION,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--version", action=Version, nargs=0,
                        help="print shardq's version and exit")
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
    p.add_argument("--grants", metavar="ROLE",
                   help="then grant ROLE the use of the schema, as workers and producers need "
                        "it (run as the schema's owner); with --sql, print the grants instead")
    p.add_argument("--read-only", action="store_true",
                   help="with --grants: reading only, as a dashboard needs")
    p.add_argument("--spark", action="store_true",
                   help="with --grants: also CREATE on the schema shardq, where Spark's "
                        "staged writes make their staging table")

    p = command("reshard", cmd_reshard,
                "change the bucket count of a live schema (--bucket-count N), or show it "
                "and a reshard's progress (--status)")
    p.add_argument("--status", action="store_true",
                   help="print the layout in use and the progress of a reshard, then exit")
    p.add_argument("--json", action="store_true", help="with --status: as one JSON object")

    p = command("consume", cmd_consume, "run a worker: claim tasks and run their handlers")
    p.add_argument("target", help="module:app (a shardq.App) or module:function (a raw handler)")
    add_arguments(p, WorkerConfig)

    p = command("janitor", cmd_janitor,
                "rescue expired leases, apply due head starts, delete expired results")
    p.add_argument("--once", action="store_true", help="one pass over every bucket, then exit")

    p = sub.add_parser("db", help="the embedded PostgreSQL")
    p.add_argument("action", choices=["url", "stop"], help="print its DSN, or stop it")
    p.set_defaults(handler=cmd_db)

    p = command("task", cmd_task, "one task's state and history")
    p.add_argument("action", choices=["show", "cancel"],
                   help="show: state and history; cancel: remove it if waiting, stop it if "
                        "running")
    p.add_argument("id")

    cli_flows.add_commands(command)
    cli_ops.add_commands(sub, command)
    cli_console.add_commands(command)

    p = sub.add_parser("dead", help="dead letters: list, retry, redrive or purge them")
    p.set_defaults(handler=cmd_dead)
    dead = p.add_subparsers(dest="action", required=True)
    listing = dead.add_parser("list", help="the newest dead tasks of a queue, as JSON lines")
    listing.add_argument("queue")
    listing.add_argument("--limit", type=int, default=DEFAULT_DEAD_LIST)
    retry = dead.add_parser("retry", help="make dead tasks eligible again, with fresh attempts")
    retry.add_argument("ids", nargs="*", help="task ids (or --queue for all of a queue)")
    retry.add_argument("--queue", dest="queue", default=None)
    redrive = dead.add_parser(
        "redrive", help="retry a queue's dead tasks chosen by error and time of death, in "
                        "bounded calls; --dry-run counts them first")
    redrive.add_argument("queue")
    redrive.add_argument("--error", metavar="TEXT",
                         help="only those whose last error contains TEXT (any case)")
    redrive.add_argument("--older-than-s", type=float, metavar="N",
                         help="only those dead for longer than N seconds")
    redrive.add_argument("--newer-than-s", type=float, metavar="N",
                         help="only those dead for less than N seconds")
    redrive.add_argument("--dry-run", action="store_true",
                         help="count them (up to 10,000) and change nothing")
    redrive.add_argument("--limit", type=int, default=1000, metavar="N",
                         help="at most this many (up to 10,000); run again for the rest")
    purge = dead.add_parser("purge", help="delete a queue's dead tasks (needs --yes)")
    purge.add_argument("queue")
    purge.add_argument("--older-than-s", type=float, default=0.0,
                       help="only those dead for longer than this")
    purge.add_argument("--yes", action="store_true", help="really delete them")
    for action in (listing, retry, redrive, purge):
        add_arguments(action, ClientConfig)

    p = sub.add_parser("periodic", help="periodic schedules: list them, or fire one now")
    p.set_defaults(handler=cmd_periodic)
    schedules = p.add_subparsers(dest="action", required=True)
    listing = schedules.add_parser(
        "list", help="every schedule as JSON lines: expression, queue, last and next slot")
    fire = schedules.add_parser("run", help="enqueue a schedule's task now, once")
    fire.add_argument("name", help="the schedule's name (module.function), or its function's "
                                   "name when no other schedule's name ends in it")
    for action in (listing, fire):
        add_arguments(action, ClientConfig)

    p = sub.add_parser("sql", help="the statements shardq sends: list them, or print one")
    p.set_defaults(handler=cmd_sql)
    statements = p.add_subparsers(dest="action", required=True)
    statements.add_parser("list", help="each statement's name, its engines and what it does")
    show = statements.add_parser(
        "show", help="print a statement whole, as the server receives it, its bound values "
                     "named; with no name, list them")
    show.add_argument("name", nargs="?", help="the statement (`shardq sql list` names them)")
    show.add_argument("--dialect", choices=["postgresql", "cockroachdb"], default="postgresql",
                      help="the engine it is sent to (default postgresql)")

    p = command("doctor", cmd_doctor, "check a live database: autovacuum, index bloat, "
                "connections, LISTEN through a pooler, server version; print advice")
    add_arguments(p, WorkerConfig)  # the worker settings whose connections are counted
    p.add_argument("--check", action="append", choices=DOCTOR_CHECKS, metavar="NAME",
                   help="run this check only (repeatable): " + ", ".join(
                       repr(c) for c in DOCTOR_CHECKS))

    p = command("demo", cmd_demo, "enqueue and consume no-op tasks, print throughput")
    p.add_argument("--tasks", type=count(1, MAX_DEMO_TASKS), default=20_000,
                   help=f"tasks to enqueue (1 to {MAX_DEMO_TASKS:,})")
    p.add_argument("--threads", type=count(1, MAX_DEMO_THREADS), default=4,
                   help=f"claiming threads (1 to {MAX_DEMO_THREADS})")
    p.add_argument("--limit", type=count(1, MAX_CLAIM), default=100,
                   help=f"tasks per claim (1 to {MAX_CLAIM:,})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shardq`` command."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler: Handler = args.handler
    try:
        status = handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit after main returned
    except ShardqError as exc:
        print(f"shardq: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `shardq ... | head`: the reader had enough; stop quietly
        # Python would flush stdout again at exit and complain: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return SIGPIPE_STATUS
    except KeyboardInterrupt:
        return INTERRUPTED_STATUS
    return status
