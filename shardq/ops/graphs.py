"""Flows of tasks in the database: writing a canvas, reading a flow back, cancelling it.

A flow is a row of ``shardq.flows`` and its tasks: the tasks that wait for others are
``waiting`` (outside every claim range) with ``waits``, the count they wait for, and
every task names the ones that wait for it (``flow_next``).  The statement that ends
a task of a flow (its ack, its death, a cancel) also writes an event; the flows'
resolver (:mod:`shardq.loops.resolver`) folds events in, in batches, and releases the
tasks that wait for nothing more.  So the acks of a chord's many members never update
one row, and each release happens once: the events it folds are deleted in its
transaction.

Each function validates its arguments and returns the plan of the call, which either
client runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg.errors import UniqueViolation

from shardq.core import validate
from shardq.core.config import DAY_S
from shardq.core.errors import InvalidTask
from shardq.core.plan import Atomic, Plan, Steps, plan
from shardq.core.statements import Statements
from shardq.core.task import TaskId
from shardq.flows.canvas import Canvas, FlowHandle, Signature
from shardq.flows.nodes import Flow, FlowNode, Node, layout
from shardq.ops import produce

COPY_MIN = 32
"""Tasks that wait for nothing and share their options are written with COPY from this
many on (a chord's or a batch's members): the rest, one INSERT of parallel arrays."""
INSERT_ROWS = 1000  # rows per INSERT of the rest
MAX_LISTED = 10_000
PLACEHOLDER = object()  # stands for what a task takes, when its arguments are checked


def enqueue(st: Statements, canvas: Canvas | Signature, conn: Any, *,
            keep_result_s: float | None, name: str | None) -> Plan[FlowHandle]:
    """Write ``canvas`` as one flow in one transaction (see :meth:`Canvas.enqueue`)."""
    nodes, (ends, from_group) = layout(canvas)
    keep = keep_for(keep_result_s)
    shared: dict[tuple[int, tuple[Any, ...]], dict[str, Any]] = {}
    rows = [task_row(st, f"task {i} of the flow", node, shared) for i, node in enumerate(nodes)]
    ids = st.dialect.new_ids(len(nodes))
    flow_id = st.dialect.new_ids(1)[0]
    result_id = ids[ends[0]] if len(ends) == 1 and not from_group else None
    after: dict[int, list[int]] = defaultdict(list)
    for i, node in enumerate(nodes):
        for d in node.deps:
            after[d].append(i)
    # A chord's members all name the one callback: one list for them all.
    nexts: dict[tuple[int, ...], list[TaskId] | None] = {(): None}
    for i, node in enumerate(nodes):
        row = rows[i]
        later = tuple(after.get(i, ()))
        if later not in nexts:
            nexts[later] = [ids[j] for j in later]
        row["next"] = nexts[later]
        row["deps"] = [ids[d] for d in node.deps] if node.passes else None
        row["waits"] = len(node.deps)
    kind = canvas.kind if isinstance(canvas, Canvas) else "chain"
    flow = {"flow_id": flow_id, "kind": kind, "name": flow_name(name), "nodes": len(nodes),
            "result_id": result_id, "keep_result_s": keep}
    handle = FlowHandle(flow_id, result_id, tuple(ids))
    return written(st, conn, flow, ids, rows, handle)


def task_row(st: Statements, label: str, node: Node,
             shared: dict[tuple[int, tuple[Any, ...]], dict[str, Any]] | None = None
             ) -> dict[str, Any]:
    """A task's columns, its options and arguments checked as an enqueue checks them
    (an error names it as ``label``).  ``shared`` keeps the checked options of each
    function and options seen, so a chord's many members check theirs once."""
    sig = node.signature
    fn = sig.task
    took = (PLACEHOLDER,) if node.passes else ()
    try:
        fn.arguments.check((*took, *sig.args), sig.kwargs)
        payload: dict[str, Any] = {"task": fn.name, "args": list(sig.args),
                                   "kwargs": dict(sig.kwargs), "flow_keep": True}
        if node.passes:
            payload["pass"] = node.passes
        key = (id(fn), tuple(sorted(sig.options.items())) if sig.options else ())
        options = None if shared is None else shared.get(key)
        if options is None:
            options = _options(st, sig)
            if shared is not None:
                shared[key] = options
        return {**options, "payload": validate.payload_json(payload, st.config.max_payload_bytes)}
    except InvalidTask as exc:
        raise InvalidTask(f"{label} ({sig!r}): {exc}") from None


def _options(st: Statements, sig: Signature) -> dict[str, Any]:
    """A signature's options, checked, its function's where it sets none."""
    fn, options = sig.task, sig.options
    return {
        "queue": validate.queue_name(options.get("queue", fn.queue)),
        "priority": validate.priority(options.get("priority", fn.priority)),
        "delay_s": validate.seconds("delay_s", options.get("delay_s")), "run_at": None,
        "max_attempts": validate.max_attempts(options.get("max_attempts", fn.max_attempts),
                                              st.config.max_attempts),
        "group": validate.group(options.get("group"))}


def keep_for(keep_result_s: float | None) -> float:
    if keep_result_s is None:
        return DAY_S
    keep = validate.seconds("keep_result_s", keep_result_s)
    if not keep:
        raise InvalidTask("keep_result_s must be positive")
    return keep


def flow_name(name: str | None) -> str | None:
    if name is not None and (not isinstance(name, str) or not 1 <= len(name) <= 256):
        raise InvalidTask(f"a flow's name is text of 1 to 256 characters, got {name!r}")
    return name


def written(st: Statements, conn: Any, flow: dict[str, Any], ids: list[TaskId],
             rows: list[dict[str, Any]], value: Any) -> Plan[Any]:
    """The plan that writes a flow's row and ``rows`` (its tasks, ``ids``) in one
    transaction; its value is ``value``.  A retry that finds the flow written (its reply
    was lost after the commit) returns the same value."""
    first = rows[0]["queue"] if rows else "flows"
    params = {**st.params(), "queue": first, "trace_context": None, "notify": st.config.notify}

    def make(p: dict[str, Any]) -> Plan[Any]:
        tries = 0

        def steps() -> Steps[Any]:
            nonlocal tries
            tries += 1
            try:
                yield Atomic(lambda: _write(st, {**flow, "trace_context": p["trace_context"]},
                                            ids, rows, p))
            except UniqueViolation as exc:
                if tries == 1 or conn is not None or "flows_pkey" not in str(exc):
                    raise
            return value

        return Plan(steps, conn)

    return produce.traced(params, len(rows), make,
                          flow_id=flow["flow_id"])


def _write(st: Statements, flow: dict[str, Any], ids: list[TaskId],
           rows: list[dict[str, Any]], p: dict[str, Any]) -> Steps[None]:
    yield st.execute("flow_create", flow)
    copied: set[int] = set()
    if st.dialect.copy:
        for members in _shared(rows):
            yield from _copy(st, flow["flow_id"], [ids[i] for i in members],
                             [rows[i] for i in members], p["trace_context"])
            copied.update(members)
    rest = [i for i in range(len(rows)) if i not in copied]
    for start in range(0, len(rest), INSERT_ROWS):
        chunk = rest[start:start + INSERT_ROWS]
        yield st.fetch("flow_insert", arrays(flow["flow_id"], [ids[i] for i in chunk],
                                              [rows[i] for i in chunk], p))


def _shared(rows: list[dict[str, Any]]) -> list[list[int]]:
    """Runs of at least :data:`COPY_MIN` tasks that wait for nothing and share options and
    the tasks that wait for them."""
    runs: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if not row["waits"]:
            runs[(row["queue"], row["priority"], row["delay_s"], row["run_at"], row["max_attempts"],
                  row["group"], tuple(row["next"] or ()))].append(i)
    return [members for members in runs.values() if len(members) >= COPY_MIN]


def _copy(st: Statements, flow_id: UUID, ids: list[TaskId], rows: list[dict[str, Any]],
          trace_context: str | None) -> Steps[None]:
    r = rows[0]
    params = {**produce.placement(st, r["queue"], r["delay_s"], r["run_at"], r["priority"],
                                  r["max_attempts"], r["group"]), "trace_context": trace_context}
    items = produce.Payloads.encoded([row["payload"] for row in rows])
    yield from produce.copy_tasks(st, params, produce.NewIds([i.int for i in ids]), items,
                                  flow=produce.FlowLink(flow_id, r["next"]))


def arrays(flow_id: UUID, ids: Sequence[UUID], rows: list[dict[str, Any]],
           p: dict[str, Any]) -> dict[str, Any]:
    """flow_insert's parameters: ``rows`` (from :func:`task_row`, with ``next``, ``deps``
    and ``waits``) as parallel arrays, their ids ``ids``, in flow ``flow_id``."""
    return {"flow_id": flow_id, "ids": list(ids), "queues": [r["queue"] for r in rows],
            "payloads": [produce.jsonb(r["payload"]) for r in rows],
            "delays_s": [r["delay_s"] for r in rows], "run_ats": [r["run_at"] for r in rows],
            "priorities": [r["priority"] for r in rows],
            "max_attempts": [r["max_attempts"] for r in rows],
            "groups": [r["group"] for r in rows], "waits": [r["waits"] for r in rows],
            "nexts": [_array(r["next"]) for r in rows],
            "deps": [_array(r["deps"]) for r in rows],
            "trace_context": p["trace_context"], "notify": p["notify"]}


def _array(values: list[TaskId] | None) -> str | None:
    """A uuid[] as its text, for an array of arrays of different lengths."""
    return None if values is None else "{" + ",".join(map(str, values)) + "}"


def get(st: Statements, flow_id: UUID | str, limit: int = 1000) -> Plan[Flow | None]:
    """A flow's state, counts and first ``limit`` tasks; None for an unknown id."""
    fid = validate.flow_id(flow_id)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LISTED:
        raise InvalidTask(f"limit must be an integer in [0, {MAX_LISTED}], got {limit!r}")

    def steps() -> Steps[Flow | None]:
        rows = yield st.fetch("flow_get", {"id": fid})
        if not rows:
            return None
        listed = (yield st.fetch(st.query("flow_nodes", limit), {"id": fid})) if limit else []
        return _flow(rows[0], [FlowNode(*r) for r in listed])

    return plan(steps)


def _flow(row: tuple[Any, ...], nodes: list[FlowNode]) -> Flow:
    (fid, kind, name, total, result_id, succeeded, dead, cancelled, created_at, cancelled_at,
     finished_at, live, pending) = row
    counts = {"waiting": live.get("waiting", 0), "pending": live.get("available", 0),
              "running": live.get("locked", 0),
              "succeeded": succeeded + pending.get("succeeded", 0),
              "dead": dead + pending.get("dead", 0) - pending.get("retried", 0),
              "cancelled": cancelled + pending.get("cancelled", 0)}
    if cancelled_at is not None:
        state = "cancelled"
    elif counts["dead"] > 0 or counts["cancelled"] > 0:
        state = "failed"
    elif finished_at is not None:
        state = "succeeded"
    else:
        state = "running"
    return Flow(fid, kind, name, state, counts, total, result_id, created_at, finished_at,
                cancelled_at, nodes)


def cancel(st: Statements, flow_id: UUID | str) -> Plan[int]:
    """Cancel every task of a flow that has not finished; returns how many.  A flow that
    ended (or an unknown id) is left alone: 0."""
    fid = validate.flow_id(flow_id)

    def steps() -> Steps[int]:
        locked = yield st.fetch("flow_lock", {"id": fid})
        if not locked or locked[0][1] is not None:
            return 0
        return int((yield st.fetch("flow_cancel", {"id": fid}))[0][0])

    return plan(lambda: _atomic(steps))


def _atomic(steps: Any) -> Steps[Any]:
    return (yield Atomic(steps))
