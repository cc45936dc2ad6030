"""Raw handlers for the tasks of examples/spark_pipeline.py.

Run them with ``shardq consume examples.spark_handlers:handle --queue invoices``
from the repository root: each call gets one task's payload (a dict).
"""

from __future__ import annotations

import logging
import os
from typing import Any

log = logging.getLogger("examples.spark_handlers")

# Set SHARDQ_EXAMPLE_FAIL_ON=<customer> to see a failure retried with backoff.
FAIL_ON = os.environ.get("SHARDQ_EXAMPLE_FAIL_ON")


def handle(payload: dict[str, Any]) -> None:
    """Pretend to send one invoice reminder."""
    if FAIL_ON and payload.get("customer") == FAIL_ON:
        raise RuntimeError(f"mail server refused {FAIL_ON}")
    log.debug("reminder for %s: %s %s", payload.get("customer"), payload.get("amount"),
              payload.get("currency"))
