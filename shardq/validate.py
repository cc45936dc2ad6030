"""Checks on caller input, made before anything is written."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from shardq.errors import InvalidTask

QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
MAX_DELAY_S = 100 * 365 * 86400
MAX_PRIORITY_S = 100 * 365 * 86400
# One encoder for every payload: json.dumps with options builds a new one per call.
# ensure_ascii (the default) keeps the text ASCII, so its length is its size in bytes
# and it never holds a raw control character.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def queue_name(name: object) -> str:
    """A queue name: 1-128 of letters, digits, ``_ . : -``, starting with a letter or digit."""
    if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
        raise InvalidTask(
            f"invalid queue name {name!r}: use 1-128 letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit"
        )
    return name


def payload_json(payload: Any, max_bytes: int) -> str:
    """The payload as compact JSON text, refused if not serialisable or over ``max_bytes``."""
    try:
        text = _ENCODER.encode(payload)
    except (TypeError, ValueError) as exc:
        raise InvalidTask(f"payload is not JSON-serialisable: {exc}") from None
    size = len(text)
    if size > max_bytes:
        raise InvalidTask(f"payload is {size} bytes, over the limit of {max_bytes}")
    if "\\u0000" in text:
        raise InvalidTask("payload contains a NUL character, which PostgreSQL's jsonb refuses")
    return text


def seconds(name: str, value: float | None, *, allow_negative: bool = False,
            limit: float = MAX_DELAY_S) -> float | None:
    """A finite number of seconds within +-limit (negative only when allowed)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidTask(f"{name} must be a finite number of seconds, got {value!r}")
    if value < 0 and not allow_negative:
        raise InvalidTask(f"{name} must not be negative, got {value!r}")
    if abs(value) > limit:
        raise InvalidTask(f"{name} is out of range: {value!r}")
    return float(value)


def aware(name: str, value: datetime | None) -> datetime | None:
    """A timezone-aware datetime (naive ones are ambiguous and refused)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidTask(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidTask(f"{name} must be timezone-aware (e.g. datetime.now(timezone.utc))")
    return value


def priority(value: int) -> int:
    """Seconds of head start: any integer within a century."""
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_PRIORITY_S:
        raise InvalidTask(f"priority must be an integer number of seconds, got {value!r}")
    return value


def max_attempts(value: int | None, default: int) -> int:
    """How many claims a task gets; at least one."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidTask(f"max_attempts must be a positive integer, got {value!r}")
    return value


def schedule(delay_s: float | None,
             run_at: datetime | None) -> tuple[float | None, datetime | None]:
    """At most one of delay_s and run_at, each valid."""
    if delay_s is not None and run_at is not None:
        raise InvalidTask("give delay_s or run_at, not both")
    return seconds("delay_s", delay_s), aware("run_at", run_at)


def as_list(items: Iterable[Any], what: str) -> list[Any]:
    """The items as a list; batch calls accept an empty one and do nothing."""
    if isinstance(items, str | bytes):
        raise InvalidTask(f"{what} must be a sequence, not a single {type(items).__name__}")
    return list(items)
