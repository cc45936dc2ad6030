"""shardq: a hash-sharded task queue that lives in PostgreSQL or CockroachDB.

The public names below are loaded on first use (PEP 562's module ``__getattr__``):
``import shardq`` stays cheap, so the ``shardq`` command starts without importing the
database driver, its pool or the migrations until a subcommand needs them.
``from shardq import Client`` and ``shardq.Client`` work as with eager imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardq.aclient import AsyncClient
    from shardq.app import App
    from shardq.client import Client
    from shardq.core.clock import Clock, DatabaseClock, ManualClock
    from shardq.core.config import ClientConfig
    from shardq.core.errors import (
        ChildDied,
        ConfigError,
        ConnectionLost,
        DatabaseError,
        DiskFull,
        DurableError,
        EventTimeout,
        InvalidTask,
        LeaseLost,
        PermissionDenied,
        SchemaNotReady,
        ShardqError,
        SparkWriteError,
        Unavailable,
        UnknownQueue,
        WaitTimeout,
    )
    from shardq.core.task import Attempt, Step, Task, TaskInfo, TaskResult, Waiting
    from shardq.flows.canvas import FlowHandle, Graph, Signature, chain, chord, group
    from shardq.flows.nodes import Flow, FlowNode
    from shardq.handler import Context, Fail, Retry, current
    from shardq.loops.janitor import Janitor, JanitorReport
    from shardq.loops.resolver import Resolver
    from shardq.ops.flow import Control, Limits
    from shardq.ops.rates import Rate
    from shardq.ops.workers import WorkerInfo
    from shardq.taskfunction import TaskFunction

# Each public name and the module that defines it.
_SOURCES = {
    "App": "shardq.app",
    "TaskFunction": "shardq.taskfunction",
    "AsyncClient": "shardq.aclient",
    "Client": "shardq.client",
    "Clock": "shardq.core.clock",
    "DatabaseClock": "shardq.core.clock",
    "ManualClock": "shardq.core.clock",
    "ClientConfig": "shardq.core.config",
    "ConfigError": "shardq.core.errors",
    "ConnectionLost": "shardq.core.errors",
    "DatabaseError": "shardq.core.errors",
    "DiskFull": "shardq.core.errors",
    "InvalidTask": "shardq.core.errors",
    "LeaseLost": "shardq.core.errors",
    "ChildDied": "shardq.core.errors",
    "DurableError": "shardq.core.errors",
    "EventTimeout": "shardq.core.errors",
    "WaitTimeout": "shardq.core.errors",
    "PermissionDenied": "shardq.core.errors",
    "SchemaNotReady": "shardq.core.errors",
    "ShardqError": "shardq.core.errors",
    "SparkWriteError": "shardq.core.errors",
    "Unavailable": "shardq.core.errors",
    "UnknownQueue": "shardq.core.errors",
    "Context": "shardq.handler",
    "Fail": "shardq.handler",
    "Retry": "shardq.handler",
    "current": "shardq.handler",
    "Janitor": "shardq.loops.janitor",
    "Control": "shardq.ops.flow",
    "Limits": "shardq.ops.flow",
    "Rate": "shardq.ops.rates",
    "JanitorReport": "shardq.loops.janitor",
    "Task": "shardq.core.task",
    "TaskInfo": "shardq.core.task",
    "TaskResult": "shardq.core.task",
    "Attempt": "shardq.core.task",
    "Step": "shardq.core.task",
    "Waiting": "shardq.core.task",
    "WorkerInfo": "shardq.ops.workers",
    "Signature": "shardq.flows.canvas",
    "Graph": "shardq.flows.canvas",
    "chain": "shardq.flows.canvas",
    "chord": "shardq.flows.canvas",
    "group": "shardq.flows.canvas",
    "Flow": "shardq.flows.nodes",
    "FlowHandle": "shardq.flows.canvas",
    "FlowNode": "shardq.flows.nodes",
    "Resolver": "shardq.loops.resolver",
}

__all__ = [
    "App",
    "AsyncClient",
    "Attempt",
    "ChildDied",
    "Client",
    "ClientConfig",
    "Clock",
    "ConfigError",
    "ConnectionLost",
    "Context",
    "Control",
    "DatabaseClock",
    "DatabaseError",
    "DiskFull",
    "DurableError",
    "EventTimeout",
    "Fail",
    "Flow",
    "FlowHandle",
    "FlowNode",
    "Graph",
    "InvalidTask",
    "Janitor",
    "JanitorReport",
    "LeaseLost",
    "Limits",
    "ManualClock",
    "PermissionDenied",
    "Rate",
    "Resolver",
    "Retry",
    "SchemaNotReady",
    "ShardqError",
    "Signature",
    "SparkWriteError",
    "Step",
    "Task",
    "TaskFunction",
    "TaskInfo",
    "TaskResult",
    "Unavailable",
    "UnknownQueue",
    "WaitTimeout",
    "Waiting",
    "WorkerInfo",
    "chain",
    "chord",
    "current",
    "group",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import the module defining public name ``name`` and return that name (then cached
    in this module's namespace, so the next lookup is a plain attribute read)."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'shardq' has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazily loaded public ones included."""
    return sorted({*globals(), *_SOURCES})
