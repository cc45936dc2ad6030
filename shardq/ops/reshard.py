"""Changing the bucket count of a live queue (``shardq reshard``): the plans of its steps.

On PostgreSQL a layout's bucket is either the stored column that migration 0002 made
or, once resharded, the bucket formula over the id itself, which indexes are built over
(docs/design.md, "Changing the bucket count").  On CockroachDB it is the hidden shard
column of the primary key, or once resharded, that of a hash-sharded secondary index
with the key's columns.  Writers compute nothing either way.  A reshard from N to M
buckets goes through the phases of ``shardq.layout``:

- **build**: the three indexes that carry a bucket are built for M with ``CREATE INDEX
  CONCURRENTLY`` (on CockroachDB, an online schema change), which blocks no reader or
  writer; one left INVALID by an interrupted build is dropped and built again.
- **switch**: the layout row says M at a new generation.  Every client re-reads it
  within :data:`shardq.core.boundary.LAYOUT_CHECK_S`; claims of the old generation take
  nothing.  The reshard waits :data:`SETTLE_S`, and until every live worker claims with
  the new generation.
- **retire**: the old layout's indexes are dropped concurrently.  PostgreSQL's stored
  column's layout is retired by moving the primary key to the id and dropping the
  column (CockroachDB's primary key keeps its hash and is no longer read): two
  catalog changes under an ACCESS EXCLUSIVE lock that each wait at most 200 ms for it
  and are tried again later (:data:`LOCK_TIMEOUT_S`).
- **done**.

Each call of :func:`step` reads the row and the catalog and takes the one next step, so
a reshard cut anywhere (``kill -9``, a lost connection) carries on when run again.  Run
with the count in use before the switch, it rolls back: the new indexes are dropped;
after the switch (until the retire phase) it switches back.  The clients drive the
steps on a connection of their own that holds the reshard's session lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg.errors

from shardq.core import sqlfiles, validate
from shardq.core.boundary import LAYOUT_CHECK_S, connect_kwargs
from shardq.core.errors import ConfigError
from shardq.core.plan import Atomic, Execute, Fetch, Plan, Steps, plan
from shardq.core.sqlfiles import plain
from shardq.core.statements import Statements, composed

SETTLE_S = 2 * LAYOUT_CHECK_S
"""How long after a switch the old layout is kept at least: by then every client that
ran anything has re-read the layout."""
LAYOUT_WAIT_S = 0.5
"""How often a switched reshard looks again for workers still on the old generation."""
LOCK_TIMEOUT_S = 0.2
"""How long a catalog change waits for its ACCESS EXCLUSIVE lock (reshard_lock_timeout)."""
INDEX_FILES = ("reshard_claim_index", "reshard_leases_index", "reshard_head_starts_index")
COLUMN_INDEXES = ("tasks_pkey", "tasks_leases", "tasks_head_starts")


def index_names(bucket_count: int, expression: bool) -> tuple[str, str, str]:
    """The claim, lease and head-start indexes of a layout: the stored column's are
    those the migrations made; an expression layout's carry its count."""
    if not expression:
        return COLUMN_INDEXES
    return (f"tasks_claim_{bucket_count}", f"tasks_leases_{bucket_count}",
            f"tasks_head_starts_{bucket_count}")


@dataclass(frozen=True)
class IndexBuild:
    """An index build under way (``pg_stat_progress_create_index``)."""

    index: str | None
    phase: str
    blocks_done: int
    blocks_total: int
    tuples_done: int
    tuples_total: int


@dataclass(frozen=True)
class ReshardStatus:
    """The layout in use and the progress of a reshard (``shardq reshard --status``)."""

    bucket_count: int
    """The buckets claims visit now."""
    expression: bool
    """The bucket is an expression of the id (a resharded PostgreSQL schema), not the
    stored column."""
    generation: int
    """Increased by each switch."""
    phase: str
    """``done`` (no reshard under way), ``build``, ``switch`` or ``retire``."""
    target: int | None
    """While building: the count being built."""
    retired_count: int | None
    """After the switch: the count of the layout being retired."""
    phase_s: float
    """How long the phase has lasted."""
    waiting_for: list[str] = field(default_factory=list)
    """Live workers that still claim with an earlier generation."""
    building: list[IndexBuild] = field(default_factory=list)
    """Index builds under way."""


@dataclass(frozen=True)
class Step:
    """What one step of a reshard did (``did``, one line); ``wait_s`` before the next,
    ``done`` when the reshard is over; ``switched``: the layout in use changed (the
    caller's client re-reads it); ``contended``: a catalog change did not get its lock
    in time and will be tried again (the caller backs off)."""

    did: str
    wait_s: float = 0.0
    done: bool = False
    switched: bool = False
    contended: bool = False


@dataclass(frozen=True)
class _State:
    bucket_count: int
    expression: bool
    generation: int
    phase: str
    target: int | None
    retired_count: int | None
    retired_expression: bool | None
    phase_s: float


def _state(st: Statements) -> Steps[_State]:
    rows = yield st.fetch("layout_state")
    if not rows:
        raise ConfigError("shardq.layout is empty: run `shardq migrate`")
    return _State(*rows[0])


def lock(st: Statements, conn: Any) -> Plan[None]:
    """Take the reshard's session lock on ``conn`` (the connection the steps run on:
    :func:`unlock` gives it back, or the session's end if the connection is lost), or
    raise ConfigError: another reshard runs."""
    def steps() -> Steps[None]:
        rows = yield st.fetch("reshard_lock")
        if rows[0][0]:
            return
        held = yield Fetch(plain("reshard_holder"))
        by = ""
        if held:
            pid, state, running, running_s = held[0]
            by = (f" (server process {pid}, {state} for {running_s or 0:.0f} s: {running}…; "
                  "a reshard whose process was killed keeps it until that statement ends, "
                  f"or until `pg_terminate_backend({pid})` ends it)")
        raise ConfigError(f"another `shardq reshard` holds this schema's reshard lock{by}: "
                          "see its progress with `shardq reshard --status`")

    return plan(steps, conn)


def unlock(st: Statements, conn: Any) -> Plan[None]:
    """Give back the lock :func:`lock` took on ``conn``, as the reshard ends."""
    def steps() -> Steps[None]:
        yield st.fetch("reshard_unlock")

    return plan(steps, conn)


def step(st: Statements, bucket_count: int, conn: Any) -> Plan[Step]:
    """The next step of a reshard to ``bucket_count`` buckets, on ``conn`` (which holds
    the session lock: see :func:`lock`)."""
    want = validate.bucket_count(bucket_count)

    def steps() -> Steps[Step]:
        state = yield from _state(st)
        if state.phase == "done":
            return (yield from _begin(st, state, want))
        if state.phase == "build":
            return (yield from _build(st, state, want))
        if state.phase == "switch":
            return (yield from _switched(st, state, want))
        return (yield from _retire(st, state, want))

    return plan(steps, conn)


def _begin(st: Statements, state: _State, want: int) -> Steps[Step]:
    if want == state.bucket_count:
        return Step(f"the layout has {want} buckets already", done=True)
    yield st.execute("reshard_begin", {"target": want})
    return Step(f"building the indexes of {want} buckets")


def _build(st: Statements, state: _State, want: int) -> Steps[Step]:
    target = state.target
    assert target is not None
    names = index_names(target, True)
    catalog = yield from _catalog(st, names)
    if want != target:
        if want != state.bucket_count:
            raise ConfigError(
                f"a reshard to {target} buckets is under way: run `shardq reshard "
                f"--bucket-count {target}` to finish it, or --bucket-count "
                f"{state.bucket_count} to roll it back")
        for name in names:  # a roll back: the new layout's indexes go
            if name in catalog:
                yield from _drop_index(st, name)
                return Step(f"dropped {name}")
        yield st.execute("reshard_abandon")
        return Step(f"rolled back: the layout has {want} buckets", done=True)
    bucket = st.dialect.layout_bucket(target, True)
    for name, file in zip(names, INDEX_FILES, strict=True):
        if catalog.get(name) is False:  # an interrupted build left it invalid
            yield from _drop_index(st, name)
            return Step(f"dropped {name}, left invalid by an interrupted build")
        if name not in catalog:
            yield Execute(sqlfiles.query(file, st.dialect.name, bucket,
                                         identifiers=(("index", (name,)),),
                                         literals=(("count", target),)))
            return Step(f"built {name}")
    return (yield from _switch(st, state, target, True, "switched"))


def _switch(st: Statements, state: _State, count: int, expression: bool, verb: str
            ) -> Steps[Step]:
    rows = yield st.fetch("reshard_switch", {"count": count, "expression": expression,
                                             "generation": state.generation})
    if not rows:  # another process switched first: read the row again
        return Step("the layout changed meanwhile: reading it again")
    return Step(f"{verb} to {count} buckets (generation {rows[0][0]})", switched=True)


def _switched(st: Statements, state: _State, want: int) -> Steps[Step]:
    retired = state.retired_count
    assert retired is not None
    assert state.retired_expression is not None
    if want == retired:  # a roll back after the switch: the old layout is still whole
        return (yield from _switch(st, state, retired, state.retired_expression,
                                   "switched back"))
    if want != state.bucket_count:
        raise ConfigError(
            f"a reshard to {state.bucket_count} buckets has switched: run `shardq reshard "
            f"--bucket-count {state.bucket_count}` to finish it, or --bucket-count "
            f"{retired} to switch back")
    if state.phase_s < SETTLE_S:
        return Step("waiting for every client to read the new layout",
                    wait_s=SETTLE_S - state.phase_s)
    laggards = yield from _laggards(st)
    if laggards:
        return Step(f"waiting for {len(laggards)} workers to claim with generation "
                    f"{state.generation}: {', '.join(laggards[:5])}", wait_s=LAYOUT_WAIT_S)
    yield st.execute("reshard_retire", {"generation": state.generation})
    return Step(f"retiring the layout of {retired} buckets")


def _retire(st: Statements, state: _State, want: int) -> Steps[Step]:
    retired, expression = state.retired_count, state.retired_expression
    assert retired is not None
    assert expression is not None
    if want != state.bucket_count:
        raise ConfigError(
            f"the layout of {retired} buckets is being dropped: run `shardq reshard "
            f"--bucket-count {state.bucket_count}` to finish, then reshard again")
    names = index_names(retired, expression)
    catalog = yield from _catalog(st, names)
    # The claim index last: on CockroachDB the other two are led by its shard column.
    for name in (*names[1:], names[0]):
        if name in catalog and name != "tasks_pkey":
            yield from _drop_index(st, name)
            return Step(f"dropped {name}")
    if not expression:  # the stored column's layout: its key, then the column
        for held, file in ((catalog.bucket_key, "reshard_rekey"),
                           (catalog.bucket_column, "reshard_drop_column")):
            if held:
                return (yield from _catalog_change(file))
    yield st.execute("reshard_done")
    return Step(f"done: {state.bucket_count} buckets", done=True)


def _catalog_change(file: str) -> Steps[Step]:
    """A change under an ACCESS EXCLUSIVE lock, given up if the lock is not granted
    within LOCK_TIMEOUT_S: every statement on the table would queue behind the
    request.  The caller tries again after a while."""
    def change() -> Steps[None]:
        yield Execute(plain("reshard_lock_timeout"))
        yield Execute(plain(file))

    try:
        yield Atomic(change)
    except psycopg.errors.LockNotAvailable:
        return Step(f"{file}: the table's lock was not granted within "
                    f"{LOCK_TIMEOUT_S * 1000:.0f} ms; trying again", contended=True)
    return Step({"reshard_rekey": "moved the primary key to the id",
                 "reshard_drop_column": "dropped the stored bucket column"}[file])


@dataclass(frozen=True)
class _Catalog:
    indexes: dict[str, bool]
    bucket_key: bool
    bucket_column: bool

    def get(self, name: str) -> bool | None:
        return self.indexes.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.indexes


def _catalog(st: Statements, names: Sequence[str]) -> Steps[_Catalog]:
    rows = yield st.fetch("reshard_catalog", {"names": list(names)})
    indexes, bucket_key, bucket_column = rows[0]
    return _Catalog(dict(indexes), bucket_key, bucket_column)


def _drop_index(st: Statements, name: str) -> Steps[None]:
    yield Execute(composed(st.layout, "reshard_drop_index", identifiers={"index": (name,)}))


def _laggards(st: Statements) -> Steps[list[str]]:
    rows = yield st.fetch("reshard_laggards", {"worker_stale_s": st.config.worker_stale_s})
    return [str(r[0]) for r in rows]


def status(st: Statements) -> Plan[ReshardStatus]:
    """The layout in use, and the progress of a reshard under way."""
    def steps() -> Steps[ReshardStatus]:
        state = yield from _state(st)
        waiting = (yield from _laggards(st)) if state.phase == "switch" else []
        building: list[IndexBuild] = []
        if state.phase == "build":
            rows = yield st.fetch("reshard_progress")
            building = [IndexBuild(*r) for r in rows]
        return ReshardStatus(state.bucket_count, state.expression, state.generation,
                             state.phase, state.target, state.retired_count, state.phase_s,
                             waiting, building)

    return plan(steps)


def require_session(transaction_pooled: bool) -> None:
    """Refuse a client behind a transaction pooler: the reshard holds a session lock and
    builds indexes outside a transaction, on one server session of its own."""
    if transaction_pooled:
        raise ConfigError("shardq reshard needs a server session of its own (a session lock, "
                          "CREATE INDEX CONCURRENTLY): point it at the server, not at a "
                          "transaction pooler")


def session_options(connect_timeout_s: float) -> dict[str, Any]:
    """The options of the reshard's own connection: autocommit (``CREATE INDEX
    CONCURRENTLY`` runs outside a transaction), nothing prepared."""
    return {"autocommit": True, "prepare_threshold": None, **connect_kwargs(connect_timeout_s)}


def pause_s(done: Step, contended: int) -> float:
    """How long to wait after ``done``: its own wait, or after ``contended`` catalog
    changes in a row that did not get their lock, a backoff that doubles from 0.2 s
    up to 5 s."""
    if done.contended:
        return min(5.0, LOCK_TIMEOUT_S * 2.0 ** (contended - 1))
    return done.wait_s
