"""``shardq flow show|cancel ID``: a flow's state, counts and tasks, or its cancellation
(registered by :func:`shardq.cli.main.build_parser`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from shardq.cli.acting import act
from shardq.core.config import ClientConfig, from_arguments
from shardq.core.redaction import redact

if TYPE_CHECKING:
    from shardq.client import Client
    from shardq.flows.nodes import Flow

Handler = Callable[[argparse.Namespace], int]
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
BAR_WIDTH = 30
STATES = ("waiting", "pending", "running", "succeeded", "dead", "cancelled")
FINISHED = ("succeeded", "dead", "cancelled")
GONE = "ended longer ago than its keep_result_s, or never enqueued"


def _client(args: argparse.Namespace) -> Client:
    from shardq.client import Client  # the driver and its pool: only commands that connect

    return Client(config=from_arguments(ClientConfig, args))


def cmd_flow(args: argparse.Namespace) -> int:
    """Show one flow (a table, or JSON with --json), or cancel it."""
    from shardq.client import Client

    with _client(args) as client:
        if args.action == "cancel":
            cancelled = act(client, "cancel_flow", Client.cancel_flow.make(client, args.id),
                            lambda n: f"cancelled {n:,} task(s) of the flow",
                            params={"flow_id": args.id})
            flow = None if cancelled else client.flow(args.id, limit=0)
        else:
            flow = client.flow(args.id, limit=args.limit)
    if args.action == "cancel" and cancelled:
        print(f"cancelled {cancelled} task(s) of flow {args.id}")
        return 0
    if flow is None:
        print(f"shardq: no flow {args.id} ({GONE})", file=sys.stderr)
        return 1
    if args.action == "cancel":
        print(f"shardq: flow {args.id} had ended ({flow.state}): nothing to cancel",
              file=sys.stderr)
        return 1
    print(json.dumps(flow.as_dict()) if args.json else shown(flow, args.limit))
    return 0


def shown(flow: Flow, limit: int) -> str:
    """A flow as lines of text: what it is, its state and counts, a progress bar, its times,
    and a table of its tasks listed, up to ``limit`` (an error: its last line, redacted)."""
    total = max(flow.tasks, sum(flow.counts.values()))
    finished = sum(flow.counts[s] for s in FINISHED)
    filled = round(BAR_WIDTH * finished / total) if total else 0
    name = f" {flow.name!r}" if flow.name else ""
    lines = [f"flow {flow.id}: {flow.kind}{name}, {flow.state}",
             "tasks: " + ", ".join(f"{flow.counts[s]} {s}" for s in STATES),
             f"progress: [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {finished} of {total} "
             "finished",
             f"created at {flow.created_at.isoformat()}"]
    if flow.cancelled_at is not None:
        lines.append(f"cancelled at {flow.cancelled_at.isoformat()}")
    elif flow.finished_at is not None:
        lines.append(f"finished at {flow.finished_at.isoformat()}")
    if flow.result_id is not None:
        lines.append(f"result: task {flow.result_id}")
    if not flow.nodes:
        return "\n".join(lines)
    lines.append(f"{'id':<36}  {'state':<13}  {'attempts':>8}  {'queue':<20}  task / error")
    for n in flow.nodes:
        state = f"{n.state} ({n.waits})" if n.waits else n.state
        lines.append(f"{n.id!s:<36}  {state:<13}  {n.attempts:>8}  {n.queue:<20}  "
                     f"{n.task or '-'}")
        error = (n.error or "").strip().splitlines()
        if error:
            lines.append(f"{'':>87}{redact(error[-1])}")
    if len(flow.nodes) >= limit:
        lines.append(f"(the first {len(flow.nodes)} task(s) listed: --limit lists more)")
    return "\n".join(lines)


def _limit(raw: str) -> int:
    """An argparse type: how many tasks to list, 0 to :data:`MAX_LIMIT`."""
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {raw!r}") from None
    if not 0 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_LIMIT:,}, got {value}")
    return value


def add_commands(command: Callable[[str, Handler, str], argparse.ArgumentParser]) -> None:
    """Register ``flow`` (``command`` adds a command with the client settings)."""
    p = command("flow", cmd_flow, "one flow of tasks (a chain, group, chord, graph or batch): "
                                  "its state, counts and tasks, or cancel it")
    p.add_argument("action", choices=["show", "cancel"],
                   help="show: state, counts and tasks; cancel: cancel every task of it that "
                        "has not finished")
    p.add_argument("id", help="the flow's id (what enqueueing it returned: handle.id)")
    p.add_argument("--json", action="store_true", help="with show: JSON for scripts")
    p.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT,
                   help=f"with show: tasks to list, in the order they were enqueued (default "
                        f"{DEFAULT_LIMIT}, at most {MAX_LIMIT:,})")
