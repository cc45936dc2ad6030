"""Settings: frozen dataclasses with units in their names.

Each field's metadata names its environment variable and help text; the CLI
flags and the ``SHARDQ_*`` variables are generated from these classes, so the
defaults below are the only ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from shardq.core.errors import ConfigError
from shardq.core.rules import INT4_MAX, MAX_BUCKET_COUNT
from shardq.core.validate import MAX_DELAY_S, MAX_LEASE_S, MAX_PAYLOAD_BYTES

# 16 buckets: with 8 to 128 connections claiming at once (pgbench running shardq's claim +
# ack, `python -m bench --scenarios fleet`) 16 was the fastest or within noise of it,
# 1.8x one bucket at 8 connections and 2.4x at 128; 64 buckets were no faster and poll
# more when idle.  See bench/suite/analysis.md, "What the buckets buy".
DEFAULT_BUCKET_COUNT = 16
DEFAULT_MAX_ATTEMPTS = 10
DEFAULT_DEAD_LIST = 100  # dead tasks `dead()` and `shardq dead list` show
DAY_S = 86400.0
MAX_PORT = 65535  # the highest TCP port
# The only spellings a boolean SHARDQ_* variable accepts: anything else is a typo.
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
DSN_SCHEMES = ("postgresql", "postgres")  # the URL schemes libpq reads
URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")  # RFC 3986's


def setting(default: Any, help: str, *, low: float | None = None, high: float | None = None,
            tuning: bool = False) -> Any:
    """A dataclass field carrying its help text, the inclusive range a number must lie in
    (checked by :func:`check_settings`; every number has one), and whether it is a tuning
    knob, whose flag only ``--help-all`` lists."""
    return field(default=default,
                 metadata={"help": help, "low": low, "high": high, "tuning": tuning})


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
        low=1, high=MAX_BUCKET_COUNT,
    )
    lease_s: float = setting(30.0, "how long a claim holds a task before it may be rescued",
                             low=0.1, high=MAX_LEASE_S, tuning=True)
    max_attempts: int = setting(DEFAULT_MAX_ATTEMPTS, "claims a task gets before it is dead",
                                low=1, high=INT4_MAX, tuning=True)
    backoff_base_s: float = setting(1.0, "retry delay after the first failed attempt is 2 x this",
                                    low=0.001, high=MAX_DELAY_S, tuning=True)
    backoff_cap_s: float = setting(3600.0, "longest retry delay (at least backoff_base_s)",
                                   low=0.001, high=MAX_DELAY_S, tuning=True)
    backoff_jitter: float = setting(
        0.2, "retry delays are cut by up to this fraction at random (below 1)", low=0, high=1,
        tuning=True)
    max_payload_bytes: int = setting(1_048_576, "largest payload, as UTF-8 JSON",
                                     low=2, high=MAX_PAYLOAD_BYTES, tuning=True)
    pool_max_size: int = setting(8, "most database connections this client opens",
                                 low=1, high=1000, tuning=True)
    connect_timeout_s: float = setting(5.0, "how long opening a connection may take",
                                       low=0.1, high=DAY_S, tuning=True)
    statement_timeout_s: float = setting(
        30.0, "client-side deadline of one statement or transaction: past it the connection "
        "is dropped and the work retried where that is safe", low=0.01, high=DAY_S,
        tuning=True)
    janitor_batch: int = setting(500, "tasks one janitor statement handles at most",
                                 low=1, high=10_000, tuning=True)
    janitor_interval_s: float = setting(1.0, "pause between janitor passes", low=0.01, high=DAY_S,
                                        tuning=True)
    flow_interval_s: float = setting(
        0.1, "pause between the flows' resolver's folds: how long a flow's task may wait, "
        "once the tasks before it ended, to be released", low=0.01, high=DAY_S, tuning=True)
    dead_retention_s: float | None = setting(
        None, "the janitor deletes tasks dead for longer than this (none: keep them)",
        low=1, high=MAX_DELAY_S, tuning=True,
    )
    attempts_kept_per_task: int = setting(
        20, "attempts of a task kept in its history (the latest; a task that succeeds at "
        "once records none)", low=1, high=10_000, tuning=True)
    attempts_retention_s: float = setting(
        7 * DAY_S, "the janitor deletes attempts that ended longer ago than this",
        low=1, high=MAX_DELAY_S, tuning=True)
    event_keep_s: float = setting(
        7 * DAY_S, "how long an emitted event is kept for durable tasks that wait for it "
        "later (ctx.wait_event); the janitor deletes it after", low=1, high=MAX_DELAY_S,
        tuning=True)
    audit_keep_s: float = setting(
        365 * DAY_S, "how long the audit trail of actions (dashboard, JSON API, CLI) is "
        "kept; the janitor deletes older rows", low=DAY_S, high=MAX_DELAY_S, tuning=True)
    worker_stale_s: float = setting(
        60.0, "a worker not seen for this long is no longer listed as alive (the janitor "
        "deletes its row); workers refresh theirs every quarter of it",
        low=1, high=DAY_S, tuning=True)
    notify: bool = setting(
        True, "NOTIFY listening workers on enqueue, so they start at once (PostgreSQL)",
        tuning=True)
    prepare: bool | None = setting(
        None, "prepare each statement on its first run on a connection (none: unless a "
        "connection pooler is found in front of the server; PgBouncer carries prepared "
        "statements from 1.21 with max_prepared_statements, which `shardq doctor` checks)",
        tuning=True)
    vacuum: bool = setting(
        True, "the janitor VACUUMs shardq.tasks past vacuum_dead_rows dead rows and rebuilds "
        "bloated indexes (PostgreSQL; needs the table's owner, or MAINTAIN on 17+)",
        tuning=True)
    vacuum_dead_rows: int = setting(
        5000, "dead rows of shardq.tasks past which the janitor vacuums it",
        low=1, high=2**31 - 1, tuning=True)
    vacuum_interval_s: float = setting(
        1.0, "how often the janitor reads shardq.tasks' dead rows", low=0.1, high=DAY_S,
        tuning=True)
    reindex_bloat_ratio: float = setting(
        4.0, "the janitor rebuilds an index of shardq.tasks (REINDEX CONCURRENTLY) once it is "
        "this many times the size its entries need (0: never)", low=0, high=1000, tuning=True)
    reindex_min_bytes: int = setting(
        2 * 1024 * 1024, "indexes smaller than this are never rebuilt", low=0, high=2**40,
        tuning=True)
    reindex_interval_s: float = setting(
        60.0, "how often the janitor looks for bloated indexes", low=0.1, high=DAY_S,
        tuning=True)

    def __post_init__(self) -> None:
        if self.dsn == "":  # an empty variable must not quietly mean "the embedded database"
            raise ConfigError(f"{_named('dsn')} is empty: name a database "
                              "(postgresql://...), or leave it unset for the embedded "
                              "PostgreSQL")
        check_settings(self)
        if self.dsn is not None:
            _check_dsn(self.dsn)
        if self.backoff_jitter >= 1:
            raise ConfigError(f"{_named('backoff_jitter')} must be below 1, "
                              f"got {self.backoff_jitter!r}")
        if self.backoff_base_s > self.backoff_cap_s:
            raise ConfigError(f"backoff_base_s ({self.backoff_base_s!r}) must not exceed "
                              f"backoff_cap_s ({self.backoff_cap_s!r})")


def _check_dsn(dsn: str) -> None:
    """Raise ConfigError unless ``dsn`` is a URL of a scheme the driver speaks
    (``postgresql://``, ``postgres://``; ``cockroachdb://`` is spoken as postgresql://) or
    libpq's ``key=value`` form: libpq's own message for anything else ("missing "=" after
    ...") does not say what is wrong."""
    scheme, sep, _ = dsn.partition("://")
    is_url = bool(sep) and URL_SCHEME.fullmatch(scheme) is not None  # not key=a://b
    if is_url and scheme not in DSN_SCHEMES and not scheme.startswith("cockroachdb"):
        raise ConfigError(f"unsupported scheme {scheme!r} in {_named('dsn')}: use "
                          "postgresql:// or postgres:// (cockroachdb:// for CockroachDB)")
    if not is_url and "=" not in dsn:
        # Not echoed: it may hold a password.
        raise ConfigError(f"{_named('dsn')} is neither a URL (postgresql://...) nor libpq "
                          "key=value settings (host=... dbname=...)")


def _named(name: str) -> str:
    """A setting's name with its flag and variable, so an error says where to fix it."""
    return f"{name} (--{name.replace('_', '-')}, {env_name(name)})"


def _kind(f: dataclasses.Field[Any], value: Any) -> tuple[str, bool]:
    """What setting ``f`` must be, in words, and whether ``value`` has that type."""
    kind = _base_type(f)
    if kind is bool:
        return "true or false", isinstance(value, bool)
    if kind is str:  # an empty host, DSN or file name is a slip, never a choice
        return "a non-empty string", isinstance(value, str) and value != ""
    if kind is tuple:
        return "a tuple of strings", (isinstance(value, tuple)
                                      and all(isinstance(v, str) for v in value))
    if kind is int:
        return "an integer", isinstance(value, int) and not isinstance(value, bool)
    return "a finite number", (isinstance(value, int | float) and not isinstance(value, bool)
                               and math.isfinite(value))


def check_settings(obj: Any) -> None:
    """Raise ConfigError (one line) unless every field of the settings dataclass ``obj``
    has its type and lies within its range; None is accepted where the type allows it."""
    for f in dataclasses.fields(obj):
        _check(f, getattr(obj, f.name), _named(f.name))


def check_setting(cls: type[Any], name: str, value: Any, label: str) -> None:
    """Raise ConfigError unless ``value`` would do for setting ``name`` of ``cls`` (for
    options that override a setting elsewhere, such as a task's own ``lease_s``)."""
    [f] = [f for f in dataclasses.fields(cls) if f.name == name]
    _check(f, value, label)


def _check(f: dataclasses.Field[Any], value: Any, label: str) -> None:
    low, high = f.metadata.get("low"), f.metadata.get("high")
    bounded = low is not None and high is not None
    if not bounded and _base_type(f) in (int, float):  # a bug of shardq's, not the user's
        raise TypeError(f"setting {f.name} is a number without a range (low=, high=)")
    if value is None and "None" in str(f.type):
        return
    wanted, ok = _kind(f, value)
    if bounded:
        ok = ok and low <= value <= high
        wanted += f" between {low:,.10g} and {high:,.10g}"
    if not ok:
        raise ConfigError(f"{label} must be {wanted}, got {value!r}")


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
            return _boolean(raw)
        if kind is tuple:
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        return kind(raw)
    except ValueError:
        wanted = f"one of {', '.join(TRUE_WORDS + FALSE_WORDS)}" if kind is bool else (
            f"a valid {kind.__name__}")
        unset = "" if raw.strip() else " (unset it for the default)"
        raise ConfigError(f"{env_name(f.name)}={raw!r} is not {wanted}{unset}") from None


def _boolean(raw: str) -> bool:
    word = raw.strip().lower()
    if word not in TRUE_WORDS + FALSE_WORDS:
        raise ValueError(word)
    return word in TRUE_WORDS


def load(cls: type[C], overrides: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None) -> C:
    """Build ``cls`` from its defaults, then ``SHARDQ_*`` variables, then non-None overrides."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        raw = environ.get(env_name(f.name))
        if raw is not None:  # set but empty is a value too, checked like any other
            values[f.name] = _parse(f, raw)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key, value in (overrides or {}).items():
        if key not in known:
            raise ConfigError(f"unknown setting {key!r} for {cls.__name__}")
        if value is not None:
            values[key] = value
    return cls(**values)


HELP_ALL = "--help-all"


class HelpAll(argparse.Action):
    """``--help-all``: the command's help with its tuning settings too, then exit."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show this help with every tuning setting too, and exit")
        self.hidden: list[tuple[argparse.Action, str]] = []
        """The tuning settings' flags and the help ``--help`` leaves out."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        """Give the hidden flags their help back, print it all, exit 0."""
        for action, text in self.hidden:
            action.help = text
        parser.print_help()
        parser.exit()


# Each parser's --help-all, made with its first tuning setting (a parser may take the
# settings of several classes).
_help_all: weakref.WeakKeyDictionary[argparse.ArgumentParser, HelpAll] = (
    weakref.WeakKeyDictionary())


def add_arguments(parser: argparse.ArgumentParser, cls: type[Any],
                  only: tuple[str, ...] | None = None) -> None:
    """Add one ``--flag`` per setting of ``cls`` (all default to None: unset); tuning
    settings are left out of ``--help`` and shown by ``--help-all``, added here too."""
    for f in dataclasses.fields(cls):
        if only is not None and f.name not in only:
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = _base_type(f)
        default = f.default if f.default is not dataclasses.MISSING else None
        low, high = f.metadata.get("low"), f.metadata.get("high")
        bounds = f"; {low:,.10g} to {high:,.10g}" if low is not None and high is not None else ""
        help_text = f"{f.metadata['help']} [env {env_name(f.name)}; default {default}{bounds}]"
        if kind is bool:
            action = parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                         default=None, help=help_text)
        elif kind is tuple:
            action = parser.add_argument(flag, action="append", default=None,
                                         help=help_text + " (repeatable; env: comma-separated)")
        else:
            action = parser.add_argument(flag, type=kind, default=None, help=help_text)
        if f.metadata["tuning"]:
            _help_all_of(parser).hidden.append((action, str(action.help)))
            action.help = argparse.SUPPRESS


def _help_all_of(parser: argparse.ArgumentParser) -> HelpAll:
    if parser not in _help_all:
        _help_all[parser] = cast(HelpAll, parser.add_argument(HELP_ALL, action=HelpAll))
        parser.epilog = (f"Tuning settings are left out here: {HELP_ALL} lists them. Every "
                         "setting is also a SHARDQ_* variable.")
    return _help_all[parser]


def from_arguments(cls: type[C], args: argparse.Namespace) -> C:
    """Build ``cls`` from parsed flags (those left unset fall back to env and defaults)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = {k: tuple(v) if isinstance(v, list) else v
             for k, v in vars(args).items() if k in names}
    return load(cls, given)
