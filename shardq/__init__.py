"""shardq: a hash-sharded task queue that lives in PostgreSQL or CockroachDB."""

from shardq.app import App, TaskFunction
from shardq.client import Client
from shardq.clock import Clock, DatabaseClock, ManualClock
from shardq.config import ClientConfig
from shardq.errors import (
    ConfigError,
    DatabaseError,
    InvalidTask,
    LeaseLost,
    SchemaNotReady,
    ShardqError,
)
from shardq.handler import Context, Fail, Retry, current
from shardq.janitor import Janitor, JanitorReport
from shardq.task import Task, TaskInfo

__all__ = [
    "App",
    "Client",
    "ClientConfig",
    "Clock",
    "ConfigError",
    "Context",
    "DatabaseClock",
    "DatabaseError",
    "Fail",
    "InvalidTask",
    "Janitor",
    "JanitorReport",
    "LeaseLost",
    "ManualClock",
    "Retry",
    "SchemaNotReady",
    "ShardqError",
    "Task",
    "TaskFunction",
    "TaskInfo",
    "current",
]
__version__ = "0.1.0"
