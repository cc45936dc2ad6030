"""EXPLAIN helpers for the plan tests: a statement's plan nodes, run and rolled back, and the
parameters a claim is explained with."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql

LIMIT = 100
QUEUE = "bulk"

PARAMS = {"bucket": 3, "queue": QUEUE, "now": None, "lease_s": 30.0, "token": uuid.uuid4(),
          "backoff_base_s": 1.0, "backoff_cap_s": 3600.0, "backoff_jitter": 0.2,
          "worker_id": None, "attempts_kept": 20, "draws": 108, "generation": 0}


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


def past_layout_guard(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A claim's nodes without its layout guard, which reads the one row of
    shardq.layout once per statement (asserted here): what is left is the claim."""
    guard = [n for n in plan if n.get("Relation Name") == "layout"]
    assert all(n.get("Actual Loops", 1) <= 1 and n.get("Actual Rows", 1) <= 1 for n in guard)
    return [n for n in plan if n.get("Relation Name") != "layout"]


def explain(conn: psycopg.Connection[Any], sql_text: str,
            params: Any = None) -> list[dict[str, Any]]:
    """Run EXPLAIN (ANALYZE, BUFFERS) in a transaction that is rolled back; return the nodes."""
    with conn.transaction(force_rollback=True):
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql_text,
                           params).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return list(nodes(doc[0]["Plan"]))


def explain_prepared(conn: psycopg.Connection[Any], text: str, params: dict[str, Any],
                     statement: str, *, generic: bool,
                     setup: tuple[str, tuple[Any, ...]] | None = None) -> list[dict[str, Any]]:
    """EXPLAIN ANALYZE of ``text`` PREPAREd as ``statement`` (unique: a PREPARE outlives
    a rollback) and executed with ``params``, after ``setup``, in a transaction rolled
    back; ``generic`` forces the generic plan.  The plan's nodes."""
    numbered_text, names = numbered(text)
    name = sql.Identifier(statement)
    with conn.transaction(force_rollback=True):
        if setup is not None:
            conn.execute(*setup)
        if generic:
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(sql.SQL("PREPARE {} AS {}").format(name, sql.SQL(numbered_text)))
        args = sql.SQL(", ").join(sql.Literal(params[n]) for n in names)
        row = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE {}({})")
                           .format(name, args)).fetchone()
    conn.execute(sql.SQL("DEALLOCATE {}").format(name))
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return list(nodes(doc[0]["Plan"]))
