"""shardq: a hash-sharded task queue that lives in PostgreSQL or CockroachDB."""

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
from shardq.janitor import Janitor, JanitorReport
from shardq.task import Task, TaskInfo

__all__ = [
    "Client",
    "ClientConfig",
    "Clock",
    "ConfigError",
    "DatabaseClock",
    "DatabaseError",
    "InvalidTask",
    "Janitor",
    "JanitorReport",
    "LeaseLost",
    "ManualClock",
    "SchemaNotReady",
    "ShardqError",
    "Task",
    "TaskInfo",
]
__version__ = "0.1.0"
