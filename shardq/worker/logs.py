"""Log formatting for the worker: plain text or one JSON object per line."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from shardq.core.redaction import redact

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with any ``extra=`` fields shardq attaches."""

    FIELDS = ("task_id", "queue", "attempt", "error", "trace_id")

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
