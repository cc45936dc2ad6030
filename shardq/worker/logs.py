"""Log formatting for the worker: plain text or one JSON object per line."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Hashable
from datetime import UTC, datetime

from shardq.redaction import redact

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REPEAT_INTERVAL_S = 10.0


class RateLimit:
    """At most one log line per key every ``interval_s``, counting the lines held back.

    A failure that repeats for every task of a queue (a missing handler, a database
    that is down) would otherwise write one line per task: thousands a second.
    """

    def __init__(self, interval_s: float = REPEAT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s, self.clock = interval_s, clock
        self._last: dict[Hashable, float] = {}
        self._held: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def allow(self, key: Hashable) -> int | None:
        """None to hold this line back; else how many lines of ``key`` were held back
        since the last one let through."""
        with self._lock:
            now = self.clock()
            last = self._last.get(key)
            if last is not None and now - last < self.interval_s:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._held.pop(key, 0)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with any ``extra=`` fields shardq attaches."""

    FIELDS = ("task_id", "queue", "attempt", "error")

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        doc = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in self.FIELDS:
            if hasattr(record, name):
                doc[name] = str(getattr(record, name))
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc)


class RedactingFilter(logging.Filter):
    """Masks passwords of database URLs that reach a log line."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the message with DSN passwords replaced."""
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def configure(log_format: str, level: int = logging.INFO) -> None:
    """Set up the root logger for the daemon."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else
                         logging.Formatter(TEXT_FORMAT))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
