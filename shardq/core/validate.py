"""Checks on caller input, made before anything is written."""

from __future__ import annotations

import json
import json.encoder
import math
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from shardq.core.errors import InvalidTask
from shardq.core.redaction import redact
from shardq.core.rules import (
    INT4_MAX,
    MAX_BUCKET_COUNT,
    MAX_PRIORITY_S,
    QUEUE_RULE,
)
from shardq.core.task import Task

T = TypeVar("T")

QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
MAX_DELAY_S = 100 * 365 * 86400
MAX_LEASE_S = 7 * 86400.0
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024 - 1  # jsonb holds less than 256 MiB
MAX_CLAIM = 10_000
MAX_ERROR_CHARS = 4000
"""Stored error text is cut to this many characters: its start and its end are kept."""
ERROR_HEAD_CHARS = 1000
LONE_SURROGATE = "payload contains a lone surrogate, which is not valid Unicode"
# Code points PostgreSQL text cannot hold (NUL) or UTF-8 cannot encode (lone surrogates).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# In payload JSON (ASCII, from _ENCODER): one escape sequence, so that an escaped
# backslash followed by "u0000" is not read as an escaped NUL.
_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-f]{4})|.)")
# One encoder for every payload: json.dumps with options builds a new one per call.
# ensure_ascii (the default) keeps the text ASCII, so its length is its size in bytes
# and it never holds a raw control character.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
# JSONEncoder.encode still builds its C encoder afresh on every call, which was half
# of a small payload's cost; this one is built once.  It keeps no markers of the
# containers it is inside (a markers dict would be shared between calls, and one
# left by a failed call would refuse the next payload), so a circular payload ends
# in RecursionError instead of ValueError.  Where the C encoder is missing (not
# CPython), JSONEncoder.encode does the same work.
_C_ENCODE = getattr(json.encoder, "c_make_encoder", None)
if _C_ENCODE is not None:
    _C_ENCODE = _C_ENCODE(None, _ENCODER.default, json.encoder.encode_basestring_ascii, None,
                          ":", ",", False, False, False)


def queue_name(name: object) -> str:
    """A queue name: 1-128 of letters, digits, ``_ . : -``, starting with a letter or digit."""
    if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
        raise InvalidTask(f"invalid queue name {name!r}: use {QUEUE_RULE}")
    return name


def task_name(name: object) -> str:
    """A task function's name (and its periodic schedule's): text the database can store."""
    if not isinstance(name, str) or not name:
        raise InvalidTask(f"a task's name must be non-empty text, got {name!r:.80}")
    return storable("a task's name", name)


def payload_json(payload: Any, max_bytes: int) -> str:
    """The payload as compact JSON text, refused if not serialisable or over ``max_bytes``."""
    try:
        text = "".join(_C_ENCODE(payload, 0)) if _C_ENCODE else _ENCODER.encode(payload)
    except (TypeError, ValueError) as exc:
        raise InvalidTask(f"payload is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise InvalidTask("payload is not JSON-serialisable: it contains itself, or is "
                          "nested too deeply") from None
    size = len(text)
    if size > max_bytes:
        raise InvalidTask(f"payload is {size} bytes, over the limit of {max_bytes}")
    if "\\u0000" in text or "\\ud" in text:  # rare: only then walk the escapes
        _check_escapes(text)
    return text


def _check_escapes(text: str) -> None:
    """Refuse a NUL or a lone surrogate, which PostgreSQL's jsonb cannot hold (a surrogate
    pair is a high half's escape directly followed by a low half's)."""
    awaiting = -1  # where the escape of a high half ended, while its low half is due
    for m in _JSON_ESCAPE.finditer(text):
        code = int(m.group(1), 16) if m.group(1) else -1
        if code == 0:
            raise InvalidTask("payload contains a NUL character, which PostgreSQL's jsonb "
                              "refuses")
        low, paired = 0xDC00 <= code <= 0xDFFF, awaiting == m.start()
        if (awaiting >= 0 or low) and not (low and paired):
            raise InvalidTask(LONE_SURROGATE)
        awaiting = m.end() if 0xD800 <= code <= 0xDBFF else -1
    if awaiting >= 0:
        raise InvalidTask(LONE_SURROGATE)


def storable(name: str, text: str) -> str:
    """Text with neither a NUL nor a lone surrogate, which the database cannot store."""
    found = _UNSTORABLE.search(text)
    if found:
        what = "a NUL character" if found.group() == "\x00" else "a lone surrogate"
        raise InvalidTask(f"{name} contains {what}, which the database cannot store")
    return text


def writable(text: str) -> str:
    """``text`` with NULs removed and lone surrogates replaced with U+FFFD: storable in
    PostgreSQL and writable to a UTF-8 log."""
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def error_text(text: str) -> str:
    """Error text as it is stored with a task: secrets of DSNs masked (see
    :func:`shardq.core.redaction.redact`), NULs removed, lone surrogates replaced with U+FFFD, and
    cut to :data:`MAX_ERROR_CHARS`, keeping its start and its end (where a traceback
    names the error)."""
    text = redact(writable(text))
    if len(text) <= MAX_ERROR_CHARS:
        return text
    cut = f"\n[... {len(text) - MAX_ERROR_CHARS} characters cut ...]\n"
    tail = MAX_ERROR_CHARS - ERROR_HEAD_CHARS - len(cut)
    return text[:ERROR_HEAD_CHARS] + cut + text[-tail:]


def error_texts(errors: Sequence[object] | None, n: int) -> list[str | None] | None:
    """``nack_many``'s errors (one per task, each a string or None) as they are stored."""
    if errors is None:
        return None
    stored: list[str | None] = []
    for e in parallel("errors", errors, n):
        if e is not None and not isinstance(e, str):
            raise InvalidTask(f"an error must be a string or None, got {type(e).__name__}")
        stored.append(None if e is None else error_text(e))
    return stored


def tasks(items: object) -> list[Task]:
    """Claimed tasks, as a list (what every settling call takes)."""
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise InvalidTask(f"expected a sequence of claimed tasks, got {type(items).__name__}")
    found = list(items)
    for item in found:
        if not isinstance(item, Task):
            raise InvalidTask(f"expected a claimed shardq.Task, got {type(item).__name__}")
    return found


def task_id(value: object) -> UUID:
    """A task id: a UUID, or its text."""
    return _uuid(value, "not a task id")


def flow_id(value: object) -> UUID:
    """A flow id: a UUID, or its text."""
    return _uuid(value, "not a flow id")


def worker_id(value: object) -> UUID | None:
    """A claim's worker identity: None (a claim outside a worker), or a UUID (or its text)."""
    return None if value is None else _uuid(value, "not a worker id (a uuid)")


def _uuid(value: object, complaint: str) -> UUID:
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value)
        except ValueError:
            pass
    raise InvalidTask(f"{complaint}: {value!r:.80}")


def claim(bucket: int | None, bucket_count: int, limit: int, lease_s: float | None) -> None:
    """Check a claim's arguments: the bucket, the batch size and the lease."""
    if bucket is not None and (isinstance(bucket, bool) or not isinstance(bucket, int)
                               or not 0 <= bucket < bucket_count):
        raise InvalidTask(f"bucket must be an integer in [0, {bucket_count}), got {bucket!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_CLAIM:
        raise InvalidTask(f"limit must be an integer in [1, {MAX_CLAIM}], got {limit!r}")
    if seconds("lease_s", lease_s, limit=MAX_LEASE_S) == 0:
        raise InvalidTask("lease_s must be positive")


def buckets(values: Sequence[int], bucket_count: int) -> list[int]:
    """Check a list of buckets to claim from (at least one, each once, each in range);
    returns it as a list."""
    if isinstance(values, str | bytes):
        raise InvalidTask(f"buckets must be a list of bucket numbers, got {values!r}")
    listed = list(values)
    if not listed:
        raise InvalidTask("buckets must list at least one bucket")
    for bucket in listed:
        claim(bucket, bucket_count, 1, None)
    if len(set(listed)) != len(listed):
        raise InvalidTask(f"buckets must name each bucket once, got {listed!r}")
    return listed


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
    """Seconds of head start: an integer within about 68 years either way (a 32-bit one)."""
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_PRIORITY_S:
        raise InvalidTask(f"priority must be an integer number of seconds from "
                          f"{-MAX_PRIORITY_S:,} to {MAX_PRIORITY_S:,} (about 68 years), "
                          f"got {value!r}")
    return value


def max_attempts(value: int | None, default: int) -> int:
    """How many claims a task gets; at least one."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT4_MAX:
        raise InvalidTask(f"max_attempts must be an integer in [1, {INT4_MAX}], got {value!r}")
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


def parallel(name: str, values: Sequence[T] | None, n: int) -> list[T | None]:
    """A per-task list of ``n`` values (None when not given)."""
    if values is None:
        return [None] * n
    if isinstance(values, str) or not isinstance(values, Sequence) or len(values) != n:
        raise InvalidTask(f"{name} must be a list with one entry per task ({n}), "
                          f"got {type(values).__name__}")
    return list(values)


MAX_GROUP_CHARS = 256
MAX_RUNNING = 1_000_000
"""The highest running limit (``max_running``, ``max_running_per_group``) that the
Python API, the CLI and the dashboard accept: more running at once than any fleet
holds is a typo, not a limit."""


def running_limit(name: str, value: object) -> int:
    """A running limit: an integer from 1 to :data:`MAX_RUNNING`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RUNNING:
        raise InvalidTask(f"{name} must be between 1 and {MAX_RUNNING:,} (a whole number), "
                          f"got {value!r}")
    return value


def bucket_count(value: object) -> int:
    """A bucket count: an integer from 1 to :data:`MAX_BUCKET_COUNT`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BUCKET_COUNT:
        raise InvalidTask(f"the bucket count must be between 1 and {MAX_BUCKET_COUNT} "
                          f"(a whole number), got {value!r}")
    return value


def positive_int(name: str, value: object) -> int:
    """An integer from 1 to the largest 32-bit one (limits are integer columns)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT4_MAX:
        raise InvalidTask(f"{name} must be an integer in [1, {INT4_MAX}], got {value!r}")
    return value


def positive_float(name: str, value: object) -> float:
    """A finite number above zero (a period in seconds)."""
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0 or value > MAX_DELAY_S):
        raise InvalidTask(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def group(value: object) -> str | None:
    """A task's group: None, or text of 1 to :data:`MAX_GROUP_CHARS` characters that
    PostgreSQL can store."""
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_GROUP_CHARS:
        raise InvalidTask(f"group must be a string of 1 to {MAX_GROUP_CHARS} characters, "
                          f"got {value!r:.80}")
    return storable("group", value)
