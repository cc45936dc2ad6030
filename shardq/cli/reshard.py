"""``shardq reshard``: change the bucket count of a live schema, or show the layout and
a reshard's progress (``--status``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from datetime import datetime
from typing import TYPE_CHECKING

from shardq.core.config import ClientConfig, from_arguments
from shardq.core.errors import ConfigError
from shardq.core.signals import stop_on_signals

if TYPE_CHECKING:
    from shardq.ops.reshard import Step


def cmd_reshard(args: argparse.Namespace) -> int:
    """Reshard to ``--bucket-count`` step by step, a line per step, until done or until
    SIGINT or SIGTERM (between two steps: running it again carries on); or print the
    status."""
    from shardq.client import Client  # the driver: only commands that connect
    from shardq.text import layout

    config = from_arguments(ClientConfig, args)
    target = config.bucket_count
    # The client must not insist that the schema already has the count asked for.
    with Client(config=dataclasses.replace(config, bucket_count=None)) as client:
        if args.status or target is None:
            if target is None and not args.status:
                raise ConfigError("reshard needs --bucket-count N, or --status")
            status = client.reshard_status()
            print(json.dumps(dataclasses.asdict(status)) if args.json else layout.line(status))
            return 0
        with stop_on_signals() as stop:
            status = client.reshard(target, on_step=_say, stop=stop)
    if stop.is_set() and status.phase != "done":
        print(f"stopped: {layout.line(status)}; run the command again to carry on", flush=True)
        return 1
    print(layout.line(status), flush=True)
    return 0


def _say(step: Step) -> None:
    print(f"{datetime.now().strftime('%H:%M:%S')} {step.did}", flush=True)
