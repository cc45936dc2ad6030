"""Settings: frozen dataclasses with units in their names.

Each field's metadata names its environment variable and help text; the CLI
flags and the ``SHARDQ_*`` variables are generated from these classes, so the
defaults below are the only ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from shardq.errors import ConfigError

DEFAULT_BUCKET_COUNT = 16
DEFAULT_MAX_ATTEMPTS = 10
MAX_BUCKET_COUNT = 1024


def setting(default: Any, help: str, *, env: bool = True) -> Any:
    """A dataclass field carrying its help text (and whether a SHARDQ_* variable sets it)."""
    return field(default=default, metadata={"help": help, "env": env})


@dataclass(frozen=True)
class ClientConfig:
    """How a :class:`shardq.Client` talks to its database and treats tasks."""

    dsn: str | None = setting(
        None, "database URL (postgresql://...); none: the embedded PostgreSQL"
    )
    bucket_count: int | None = setting(
        None,
        f"buckets of a schema this client creates (default {DEFAULT_BUCKET_COUNT}); "
        "an existing schema's count is read from the database",
    )
    lease_s: float = setting(30.0, "how long a claim holds a task before it may be rescued")
    max_attempts: int = setting(DEFAULT_MAX_ATTEMPTS, "claims a task gets before it is dead")
    backoff_base_s: float = setting(1.0, "retry delay after the first failed attempt is 2 x this")
    backoff_cap_s: float = setting(3600.0, "longest retry delay")
    backoff_jitter: float = setting(0.2, "retry delays are cut by up to this fraction at random")
    max_payload_bytes: int = setting(1_048_576, "largest payload, as UTF-8 JSON")
    pool_max_size: int = setting(8, "most database connections this client opens")
    janitor_batch: int = setting(500, "tasks one janitor statement handles at most")
    dead_retention_s: float | None = setting(
        None, "the janitor deletes tasks dead for longer than this (none: keep them)"
    )
    notify: bool = setting(
        True, "NOTIFY listening workers on enqueue, so they start at once (PostgreSQL)"
    )

    def __post_init__(self) -> None:
        check_positive(self, "lease_s", "max_attempts", "backoff_base_s", "backoff_cap_s",
                        "max_payload_bytes", "pool_max_size", "janitor_batch")
        if self.dead_retention_s is not None and self.dead_retention_s <= 0:
            raise ConfigError(f"dead_retention_s must be positive, got {self.dead_retention_s}")
        if not 0 <= self.backoff_jitter < 1:
            raise ConfigError(f"backoff_jitter must be in [0, 1), got {self.backoff_jitter}")
        if self.bucket_count is not None and not 1 <= self.bucket_count <= MAX_BUCKET_COUNT:
            raise ConfigError(
                f"bucket_count must be between 1 and {MAX_BUCKET_COUNT}, got {self.bucket_count}"
            )


def check_positive(obj: object, *names: str) -> None:
    """Raise ConfigError unless every named attribute of ``obj`` is positive."""
    for name in names:
        value = getattr(obj, name)
        if value <= 0:
            raise ConfigError(f"{name} must be positive, got {value!r}")


C = TypeVar("C")


def env_name(name: str) -> str:
    """The environment variable of setting ``name``: ``SHARDQ_`` and its name in capitals."""
    return "SHARDQ_" + name.upper()


def _base_type(f: dataclasses.Field[Any]) -> type:
    hint = str(f.type)
    for candidate in (tuple, bool, int, float, str):
        if hint.startswith(candidate.__name__):
            return candidate
    raise TypeError(f"unsupported setting type {hint}")


def _parse(f: dataclasses.Field[Any], raw: str) -> Any:
    kind = _base_type(f)
    try:
        if kind is bool:
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if kind is tuple:
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{env_name(f.name)}={raw!r} is not a valid {kind.__name__}") from None


def load(cls: type[C], overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> C:
    """Build ``cls`` from its defaults, then ``SHARDQ_*`` variables, then non-None overrides."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        raw = environ.get(env_name(f.name))
        if f.metadata.get("env") and raw not in (None, ""):
            values[f.name] = _parse(f, raw)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key, value in (overrides or {}).items():
        if key not in known:
            raise ConfigError(f"unknown setting {key!r} for {cls.__name__}")
        if value is not None:
            values[key] = value
    return cls(**values)


def add_arguments(parser: argparse.ArgumentParser, cls: type[Any],
                  only: tuple[str, ...] | None = None) -> None:
    """Add one ``--flag`` per setting of ``cls`` (all default to None: unset)."""
    for f in dataclasses.fields(cls):
        if only is not None and f.name not in only:
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = _base_type(f)
        default = f.default if f.default is not dataclasses.MISSING else None
        help_text = f"{f.metadata['help']} [env {env_name(f.name)}; default {default}]"
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                                help=help_text)
        elif kind is tuple:
            parser.add_argument(flag, action="append", default=None,
                                help=help_text + " (repeatable; env: comma-separated)")
        else:
            parser.add_argument(flag, type=kind, default=None, help=help_text)


def from_arguments(cls: type[C], args: argparse.Namespace) -> C:
    """Build ``cls`` from parsed flags (those left unset fall back to env and defaults)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = {k: tuple(v) if isinstance(v, list) else v
             for k, v in vars(args).items() if k in names}
    return load(cls, given)
