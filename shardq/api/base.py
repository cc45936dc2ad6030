"""A client's settings (:func:`resolve`) and what every call of it works with
(:class:`Base`)."""

from __future__ import annotations

import dataclasses
import itertools
import random
import threading
from typing import Any

from shardq.core.adb import AsyncDatabase
from shardq.core.clock import Clock
from shardq.core.config import ClientConfig, load
from shardq.core.db import Database
from shardq.core.dialect import Dialect
from shardq.core.errors import ConfigError
from shardq.core.statements import Statements


def resolve(dsn: str | None, config: ClientConfig | None,
            settings: dict[str, Any]) -> ClientConfig:
    """A client's settings: ``config`` with ``dsn`` and ``settings`` over it, or else
    those over the ``SHARDQ_*`` variables and the defaults."""
    if config is None:
        return load(ClientConfig, {"dsn": dsn, **settings})
    if dsn is not None or settings:
        return dataclasses.replace(config, **{**settings, **({"dsn": dsn} if dsn else {})})
    return config


class Base:
    """What every call of a client works with: its settings, its statements and its clock,
    set up once the client's database is open."""

    config: ClientConfig
    statements: Statements
    """The statements layer the client's calls go through (for feature modules)."""
    clock: Clock

    def _ready(self, db: Database | AsyncDatabase, clock: Clock | None) -> None:
        """Set up the calls over ``db``, now open, after checking its layout."""
        layout = db.layout
        asked = self.config.bucket_count
        if asked is not None and asked != layout.bucket_count:
            raise ConfigError(
                f"bucket_count={asked} was asked for, but the schema has "
                f"{layout.bucket_count} buckets (`shardq reshard --bucket-count {asked}` "
                "changes it)")
        self.statements = Statements(db, self.config, clock)
        self.clock = self.statements.clock
        self._rotation = itertools.count(random.randrange(layout.bucket_count))
        self._rotation_lock = threading.Lock()
        # Per flow-controlled queue: the group this client's last claim served, so that
        # its claims go round the groups (shardq.ops.flow.claim_any).
        self._cursors: dict[str, str | None] = {}

    def _next_bucket(self) -> int:
        """The bucket the next :meth:`claim` starts at: one further each call."""
        with self._rotation_lock:
            return next(self._rotation) % self.bucket_count

    @property
    def bucket_count(self) -> int:
        """How many buckets the schema has."""
        return self.statements.bucket_count

    @property
    def dialect(self) -> Dialect:
        """The engine the schema lives on (its ``name`` is 'postgresql' or 'cockroachdb')."""
        return self.statements.dialect
