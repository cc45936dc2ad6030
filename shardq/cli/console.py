"""The dashboard's commands of the ``shardq`` CLI: ``dashboard`` (serve it),
``dashboard user add|remove|list`` (its named credentials) and ``audit`` (the trail of
actions), registered by :func:`shardq.cli.main.build_parser`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import datetime

from shardq.cli.ops import moment
from shardq.core.config import ClientConfig, add_arguments, from_arguments
from shardq.core.errors import ConfigError
from shardq.web.config import DashboardConfig, read_token
from shardq.web.roles import ROLES

Handler = Callable[[argparse.Namespace], int]


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Serve the web dashboard until interrupted (or, with ``user``, manage its users)."""
    if getattr(args, "user_action", None):
        return cmd_user(args)
    try:
        from shardq.web.app import create_app
        from shardq.web.serve import listen, serve, stopped_by_signals
    except ImportError as exc:
        raise ConfigError(f"shardq dashboard needs the web extra ({exc.name} is missing): "
                          "pip install 'shardq[web]'") from exc
    from shardq.client import Client

    config = from_arguments(DashboardConfig, args)
    token = read_token(config.token_file) if config.token_file else None
    tasks = None
    if args.app:
        from shardq.worker.run import load_app  # the user's module: only when named

        tasks = load_app(args.app)
    # Bound first, so that a port in use is one line and nothing is announced.
    with listen(config.host, config.port) as sock, stopped_by_signals() as stop, \
            Client(config=from_arguments(ClientConfig, args)) as client:
        app = create_app(client, config, token=token, app=tasks)
        mode = ("actions need the token" if token else
                f"users of {config.users_file}" if config.users_file else
                f"users named by the proxy's {config.proxy_user_header}"
                if config.proxy_user_header else
                "read-only" if config.read_only else "read-only: no --token-file given")
        scheme = "https" if config.tls_cert_file else "http"
        print(f"shardq dashboard on {scheme}://{config.host}:{config.port}/ ({mode})",
              file=sys.stderr, flush=True)
        serve(app, sock, stop, config)
    return 0


def cmd_user(args: argparse.Namespace) -> int:
    """``shardq dashboard user add|remove|list``."""
    from shardq.web import users

    if args.user_action == "add":
        token = users.add(args.users, args.name, args.role, replace=args.replace)
        print(f"{'gave' if args.replace else 'added'} {args.name} ({args.role}) in "
              f"{args.users}; its token, shown once:", file=sys.stderr)
        print(token)
    elif args.user_action == "remove":
        if not users.remove(args.users, args.name):
            print(f"shardq: no user {args.name} in {args.users}", file=sys.stderr)
            return 1
        print(f"removed {args.name} from {args.users}: its sessions end at their next "
              "request")
    else:
        for found in users.read(args.users).values():
            print(f"{found.name}\t{found.role}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """``shardq audit``: the trail of actions, newest first."""
    from shardq.client import Client
    from shardq.ops import audit
    with Client(config=from_arguments(ClientConfig, args)) as client:
        st = client.statements
        rows = st.perform(audit.listing(st, actor=args.actor, action=args.action,
                                        queue=args.queue, before=args.before,
                                        limit=args.limit))
    for r in rows:
        if args.json:
            print(json.dumps({k: v.isoformat() if isinstance(v, datetime) else v
                              for k, v in vars(r).items()}, default=str))
            continue
        target = r.queue or (str(r.task_id) if r.task_id else "")
        print(f"{r.at.isoformat(timespec='seconds')}  {r.actor} ({r.role}, {r.via})  "
              f"{r.action} {target}  {r.outcome}: {r.detail or ''}"
              + (f"  from {r.address}" if r.address else ""))
    return 0


def add_commands(command: Callable[[str, Handler, str], argparse.ArgumentParser]) -> None:
    """Register ``dashboard`` and ``audit`` (``command`` adds one with the client's
    settings)."""
    p = command("dashboard", cmd_dashboard, "serve the web dashboard: queues, dead letters, "
                "tasks and a JSON API (pip install 'shardq[web]'); `dashboard user` manages "
                "its users")
    add_arguments(p, DashboardConfig)
    p.add_argument("--app", metavar="MODULE:APP",
                   help="the shardq.App whose tasks' redact rules mask their payloads")
    people = p.add_subparsers(dest="dashboard_command", metavar="{user}")
    user = people.add_parser("user", help="the dashboard's named credentials (--users-file)")
    acts = user.add_subparsers(dest="user_action", required=True)
    add = acts.add_parser("add", help="add a user with a role; prints its new token once, "
                                      "on the last line")
    add.add_argument("name")
    add.add_argument("--role", required=True, choices=ROLES)
    add.add_argument("--replace", action="store_true",
                     help="give an existing user a new token (its sessions end)")
    remove = acts.add_parser("remove", help="remove a user: its sessions end")
    remove.add_argument("name")
    listing = acts.add_parser("list", help="the users and their roles")
    for q in (add, remove, listing):
        q.add_argument("--users", required=True, metavar="FILE",
                       help="the users file (made, readable by its owner only, by add)")

    p = command("audit", cmd_audit, "the audit trail: every action through the dashboard, "
                                    "its JSON API or the CLI, newest first")
    p.add_argument("--actor", help="only those of this user")
    p.add_argument("--action", help="only this action (pause, purge, login, ...)")
    p.add_argument("--queue", help="only those on this queue")
    p.add_argument("--before", type=moment, help="only those before this time (ISO)")
    p.add_argument("--limit", type=int, default=100, help="at most this many (up to 1000)")
    p.add_argument("--json", action="store_true", help="JSON lines for scripts")

