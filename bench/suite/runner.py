"""One system's producer or consumer in its own process: ``python -m bench.suite.runner SPEC``.

SPEC is JSON: ``{"system": "shardq"|"pgqueuer"|"procrastinate", "mode":
"setup"|"enqueue"|"consume"|"produce"|"hold"|"async", "url": ..., ...}``
(``async``: :mod:`bench.suite.async_arms`).  A consumer prints
``READY`` when it is about to start, a ``hold`` producer once the queue is at its
depth (it holds it there until SIGTERM), and every mode ends with one line
``RESULT {json}``.  A process per run keeps the systems' threads, event loops and
GILs apart from the harness, and lets the consumer measure its own CPU and RSS.
"""

from __future__ import annotations

import importlib
import json
import sys
from types import ModuleType
from typing import Any

from bench.suite.probe import Probe

SYSTEMS = ("shardq", "pgqueuer", "procrastinate")


def system(name: str) -> ModuleType:
    """The adapter module of system ``name``."""
    if name not in SYSTEMS:
        raise ValueError(f"unknown system {name!r}")
    return importlib.import_module(f"bench.suite.sys_{name}")


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Do what ``spec`` asks in this process and return its result."""
    if spec["mode"] == "async":  # the async scenario's arms (bench.suite.async_arms)
        from bench.suite import async_arms

        return async_arms.run(spec)
    adapter = system(spec["system"])
    mode, url = spec["mode"], spec["url"]
    if mode == "setup":
        adapter.setup(url)
        return {}
    if mode == "enqueue":
        return dict(adapter.enqueue(url, int(spec["n"]), int(spec.get("batch", 1))))
    if mode == "produce":
        return dict(adapter.produce(url, float(spec["rate"]), float(spec["seconds"])))
    def ready() -> None:
        print("READY", flush=True)

    if mode == "hold":
        return dict(adapter.hold(url, int(spec["depth"]), ready))
    if mode == "consume":
        probe = Probe(int(spec["n"]))
        adapter.consume(url, spec, probe, ready)
        return probe.result()
    raise ValueError(f"unknown mode {mode!r}")


def main() -> None:
    """Entry point: run the JSON spec given as the only argument, print ``RESULT``."""
    result = run(json.loads(sys.argv[1]))
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
