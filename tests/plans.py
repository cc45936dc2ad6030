"""EXPLAIN helpers for the plan tests: a statement's plan nodes, run and rolled back, and the
parameters a claim is explained with."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg

LIMIT = 100
QUEUE = "bulk"

PARAMS = {"bucket": 3, "queue": QUEUE, "now": None, "lease_s": 30.0, "token": uuid.uuid4(),
          "backoff_base_s": 1.0, "backoff_cap_s": 3600.0, "backoff_jitter": 0.2,
          "worker_id": None, "attempts_kept": 20}


def numbered(query: str) -> tuple[str, list[str]]:
    """The query with psycopg's %(name)s placeholders turned into $1.. and the names in order."""
    names: list[str] = []

    def sub(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", sub, query), names


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def explain(conn: psycopg.Connection[Any], sql_text: str,
            params: Any = None) -> list[dict[str, Any]]:
    """Run EXPLAIN (ANALYZE, BUFFERS) in a transaction that is rolled back; return the nodes."""
    with conn.transaction(force_rollback=True):
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql_text,
                           params).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return list(nodes(doc[0]["Plan"]))
