"""CockroachDB support checked without a cluster.

- the migrations rendered offline (``alembic upgrade --sql``) for CockroachDB and PostgreSQL;
- every query of ``sql/`` composed for CockroachDB, checked for shape and parsed;
- the discovery of the bucket column at run time (``shardq.core.db.read_layout``).

The cluster itself is exercised by ``test_cockroachdb_cluster.py``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import command
from psycopg import sql

from shardq.core import boundary, db, dialect, migrate, sqlfiles
from shardq.core.errors import SchemaNotReady
from shardq.ops import flow
from shardq.ops.claims import LISTED, RETURNED

BUCKET_COUNTS = (16, 32)
SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
VERSIONS = sorted(p.name[:4] for p in (SQL_DIR.parent / "migrations" / "versions").glob("0*.py"))
# Every step of the chain, as the rendered script's comments name them: "->0001", "0001->0002"…
STEPS = [f"{a}->{b}" for a, b in zip(["", *VERSIONS], VERSIONS, strict=False)]
# Only for psycopg releases that cannot render a Composed without a connection.
LOCAL_POSTGRESQL = "postgresql://postgres@127.0.0.1:5432/test"

# CockroachDB names the hidden shard column of a hash-sharded index
# crdb_internal_<key columns sorted by name, joined by "_">_shard_<bucket count>: the
# primary key (product_id, owner, serial_number, ts, event_id) gets
# crdb_internal_event_id_owner_product_id_serial_number_ts_shard_16, see "Alter an existing
# primary key to use hash sharding" in
# https://www.cockroachlabs.com/docs/stable/hash-sharded-indexes
# (v22.1 source: cockroachdb/docs _includes/v22.1/performance/alter-primary-key-hash-sharded.md).
# Its value is mod(fnv32(crdb_internal.datums_to_bytes(<those columns>)), N): a hash of
# every key column, not of the id alone as on PostgreSQL.
PRIMARY_KEY = ("queue", "status", "exec_time", "id")


# A statement that writes to a shardq table (format with ``table=``).
WRITES_TO = r"\b(?:INSERT INTO|UPDATE|DELETE FROM) shardq\.{table}\b"


def shard_column(buckets: int, key: tuple[str, ...] = PRIMARY_KEY) -> str:
    """The shard column CockroachDB creates for a hash-sharded index on ``key``."""
    return "crdb_internal_" + "_".join(sorted(key)) + f"_shard_{buckets}"


SHARD_16 = shard_column(16)

# Every file of sql/ is one of these; a new file must be classified here.
# The statements the Client runs on CockroachDB:
CRDB_QUERIES = (
    "ack_many",
    "claim",
    "claim_buckets",
    "claim_recover",
    "enqueue",
    "enqueue_many",
    "enqueue_rows",
    "extend_many",
    "get",
    "janitor_due",
    "janitor_promote",
    "janitor_rescue",
    "nack_many",
    "tasks_list",
    "dead_delete",
    "dead_retry",
    "dead_purge",
    "dead_match",
    "dead_match_bounds",
    "janitor_purge_dead",
    "placement_batch",
    "requeue_many",
    "schema_info",
    "settled_check",
    "stats",
    "periodic_due",
    "periodic_fire",
    "periodic_list",
    "periodic_register",
    "periodic_remove",
    "periodic_run",
    "queue_known",
    "queue_pause",
    "queue_resume",
    "queue_states",
    "pauses_ended",
    "queue_purge",
    "task_cancel",
    "throughput_fold",
    "throughput_fold_add",
    "throughput_history",
    "stats_rates",
    "stats_sample",
    "stats_parked",
    "queue_names",
    "server_version",
    "ack_results",
    "result",
    "janitor_results",
    "claim_limited",
    "claim_recover_any",
    "rate_take",
    "rate_refund",
    "group_rate_take",
    "group_rate_refund",
    "group_row",
    "group_next",
    "limits_set",
    "limits_tidy",
    "limits_get",
    "attempts_list",
    "steps_list",
    "janitor_attempts",
    "janitor_workers",
    "worker_register",
    "worker_remove",
    "workers_list",
    # task graphs (shardq.ops.graphs, shardq.loops.resolver): on CockroachDB a flow's
    # nodes go in through flow_insert, never COPY
    "flow_cancel",
    "flow_cancel_children",
    "flow_count",
    "flow_create",
    "flow_finish",
    "flow_get",
    "flow_insert",
    "flow_lock",
    "flow_nodes",
    "flow_pick",
    "flow_purge",
    "flow_release",
    "flow_seal",
    "flow_take",
    # durable tasks (shardq.ops.durable, shardq.durable)
    "children_state",
    "event_emit",
    "event_get",
    "event_wake",
    "events_purge",
    "park_many",
    "parents_wake",
    "spawn_flow",
    "step_save",
    "steps_load",
    # the dashboard's audit trail and sessions (shardq.ops.audit, shardq.ops.sessions)
    "audit_list",
    "audit_purge",
    "audit_write",
    "session_close",
    "session_get",
    "session_open",
    "session_touch",
    "sessions_end",
    "sessions_purge",
    # the layout and a reshard's steps (shardq.core.boundary, shardq.ops.reshard)
    "layout_read",
    "layout_state",
    "reshard_lock",
    "reshard_unlock",
    "reshard_begin",
    "reshard_abandon",
    "reshard_switch",
    "reshard_retire",
    "reshard_done",
    "reshard_laggards",
    "reshard_catalog",
    "reshard_progress",
    "reshard_claim_index",
    "reshard_leases_index",
    "reshard_head_starts_index",
    "reshard_drop_index",
)
# Pieces spliced into other queries: the backoff expression, the placement rule and its
# row sources, and the coalescing insert.
FRAGMENTS = ("backoff", "batch_notify", "placement", "placement_params", "rows_unnest",
             "insert_rows", "locate", "insert_one", "claim_where", "claim_set", "claim_returning",
             "rescue_where", "rescue_set", "promote_where", "promote_set", "claim_columns",
             "suspect", "rescue_dies", "rescue_error", "throughput_add", "task_columns",
             "order_earliest", "order_latest", "sample_states", "results_notify",
             # flow control (shardq.ops.flow)
             "claim_range", "claim_range_ungrouped", "claim_range_mixed", "claim_range_group",
             "rate_unset", "rate_unset_both", "rate_unset_per_group", "rate_spent",
             "claim_slots", "claim_slots_taken", "claim_free", "free_slots", "holders_queue",
             "holders_group", "group_free_none", "rate_granted", "layout_guard",
             # per-attempt history (shardq.ops.attempts)
             "attempts_add", "rescue_ended", "acked",
             # task graphs: the event a terminal statement writes, the release's wake-up
             "flow_events_add", "flow_notify",
             # durable tasks: the checkpoints a terminal statement deletes
             "steps_drop",
             # the bucket a claim reads: the bound one, or each one a claim lists
             "bucket_bound", "bucket_listed")
# Binary COPY (CockroachDB batches go through enqueue_many) and NOTIFY; keyed tasks'
# requeue statements, which modify the table twice in one statement, live in
# sql/postgresql/ only.
POSTGRESQL_ONLY = ("copy_tasks", "copy_flow_tasks")
# The janitor's vacuum step (Dialect.vacuum): never composed nor run on CockroachDB.
VACUUM_STEP = ("vacuum_look", "vacuum_maintain", "vacuum_lock", "vacuum_unlock", "vacuum_tasks",
               "index_bloat", "reindex", "index_drop", "index_size")
# Revisions that change nothing on CockroachDB (0009: the cheaper queue-name check;
# 0014: autovacuum storage parameters, which CockroachDB does not have; 0015: the
# queue-name check on bytes).
POSTGRESQL_ONLY_REVISIONS = ("0008->0009", "0013->0014", "0014->0015")
# Revisions of several DDL statements, by the revision they lead to, and how many: each
# statement is re-runnable and runs in its own transaction, so a revision cut short is
# run again whole.  0024: the workers table, tasks.worker_id, the attempts table and its
# retention index.  0026 (flows): tasks' four flow columns, the status check replaced,
# tasks_flows, the flows table and flows_finished, flow_events, results.flow_id and
# results_flows.  0027 (durable tasks): tasks' three columns, their check, tasks_parked,
# the steps and events tables, events_expiry, flows.folded, and two checks replaced.
# 0028 (operations): the audit and sessions tables, their three indexes, and
# queues.paused_until.  0029 (layout): the layout table, its row, workers.generation.
MULTI_STATEMENT_REVISIONS = {"0024": 4, "0026": 8, "0027": 9, "0028": 6, "0029": 3}
NOT_QUERIES = ("schema",)  # the PostgreSQL schema snapshot, never run by the Client
# The stats' page sample (TABLESAMPLE, ctid): PostgreSQL only, where task ids are
# time-ordered (Dialect.ordered_ids); CockroachDB samples the smallest ids (stats_sample).
PAGE_SAMPLE = ("stats_pages",)
# Server checks (shardq doctor, and first contact's look at a role's privileges), LISTEN,
# the embedded server's set-up and the grants of `shardq migrate --grants`: PostgreSQL
# only, taken as they are (shardq.core.sqlfiles.plain), never composed for CockroachDB.
PLAIN_POSTGRESQL = ("doctor_version", "doctor_autovacuum", "doctor_oldest_snapshot",
                    "doctor_connections", "doctor_prepared", "backend_pid", "listen",
                    "listen_check", "unlisten", "notify_probe", "database_exists",
                    "database_create", "schema_access",
                    "grants_owner", "grants_read", "grants_dashboard", "grants_dashboard_ready",
                    "grants_write", "grants_maintain", "grants_spark",
                    # a reshard's session lock's holder, and the stored column's retirement
                    "reshard_holder", "reshard_lock_timeout", "reshard_rekey",
                    "reshard_drop_column")
# PgBouncer's admin console (shardq doctor, through a pooler): its commands, not SQL.
PGBOUNCER_CONSOLE = ("pgbouncer_databases", "pgbouncer_version")
COMPOSED = CRDB_QUERIES + FRAGMENTS + POSTGRESQL_ONLY
CLAIM_LIMIT = 25


# -- helpers ------------------------------------------------------------------------------------


def needs_crdb_dialect() -> None:
    pytest.importorskip(
        "sqlalchemy_cockroachdb",
        reason="sqlalchemy-cockroachdb is not installed (pip install 'shardq[cockroachdb]'): "
        "Alembic cannot render the CockroachDB dialect without it",
    )


def render_upgrade(dialect: str, buckets: int) -> str:
    buf = io.StringIO()
    migrate.upgrade(None, dialect=dialect, sql=True, bucket_count=buckets, output=buf)
    return buf.getvalue()


def render_downgrade(dialect: str, buckets: int) -> str:
    buf = io.StringIO()
    config = migrate.alembic_config(None, dialect=dialect, bucket_count=buckets, output=buf)
    command.downgrade(config, "head:base", sql=True)
    return buf.getvalue()


def flat(text: str) -> str:
    """``text`` with every run of whitespace made one space."""
    return " ".join(text.split())


def strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def statements(script: str) -> list[str]:
    """The statements of a rendered script, comments dropped, whitespace flattened."""
    return [flat(s) for s in strip_comments(script).split(";") if s.strip()]


def is_version_table(stmt: str) -> bool:
    return "shardq_alembic_version" in stmt


def is_ddl(stmt: str) -> bool:
    return not is_version_table(stmt) and stmt not in ("BEGIN", "COMMIT")


_MARKER = re.compile(r"^-- Running (?:upgrade|downgrade) (\S*) -> (\S*)$", re.M)


def revisions(script: str) -> dict[str, list[str]]:
    """The DDL statements of each revision step (``'0001->0002'``), in script order."""
    marks = list(_MARKER.finditer(script))
    steps: dict[str, list[str]] = {}
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        body = script[mark.end() : following.start() if following else len(script)]
        steps[f"{mark.group(1)}->{mark.group(2)}"] = [s for s in statements(body) if is_ddl(s)]
    return steps


def transactions(script: str) -> list[list[str]]:
    """The statements of a rendered script, grouped by the transaction each runs in.

    Alembic's offline output marks a transaction with BEGIN;/COMMIT; only where the
    dialect's Alembic implementation declares ``transactional_ddl``.  PostgreSQL does, so
    ``transaction_per_migration=True`` wraps each revision in its own BEGIN/COMMIT.  The
    CockroachDB implementation of sqlalchemy-cockroachdb sets ``transactional_ddl = False``:
    its script has no BEGIN/COMMIT at all, and every statement runs in its own implicit
    transaction when the script is fed to ``cockroach sql``.
    """
    if not re.search(r"^BEGIN;$", script, re.M):
        return [[s] for s in statements(script)]
    blocks = re.findall(r"^BEGIN;$(.*?)^COMMIT;$", script, re.S | re.M)
    outside = re.sub(r"^BEGIN;$.*?^COMMIT;$", "", script, flags=re.S | re.M)
    assert statements(outside) == [], f"statements outside BEGIN/COMMIT: {statements(outside)}"
    return [statements(block) for block in blocks]


RERUNNABLE = re.compile(
    r"^(CREATE (UNIQUE )?(SCHEMA|TABLE|INDEX) IF NOT EXISTS"
    r"|DROP (SCHEMA|TABLE|INDEX) IF EXISTS"
    r"|ALTER TABLE \S+ CONFIGURE ZONE (USING|DISCARD)"
    r"|ALTER TABLE \S+ SET \((autovacuum|vacuum)_\w+"  # storage parameters: set again alike
    # columns added or dropped only where (not) there, every one of the statement's
    r"|ALTER TABLE \S+ ADD COLUMN IF NOT EXISTS (?!.*, ADD COLUMN (?!IF NOT EXISTS))"
    r"|ALTER TABLE \S+ DROP COLUMN IF EXISTS (?!.*, DROP COLUMN (?!IF EXISTS))"
    # dropped, if there, and added again in one statement
    r"|ALTER TABLE \S+ DROP CONSTRAINT IF EXISTS (?P<c>\w+), ADD CONSTRAINT (?P=c) "
    # rows a downgrade removes before a narrower check: run again, it finds none
    r"|DELETE FROM \S+ WHERE "
    # a row written once: run again, it conflicts and writes nothing
    r"|INSERT INTO \S+ .* ON CONFLICT \(\w+\) DO NOTHING$)\b"
)


def partial_indexes(script: str) -> dict[str, tuple[str, str]]:
    """index name -> (first key column, predicate) of the CREATE INDEX statements."""
    found = re.findall(
        r"CREATE INDEX IF NOT EXISTS (\w+) ON shardq\.tasks \((\w+), exec_time(?:, id)?\) "
        r"WHERE ([^;]+);",
        script,
    )
    return {name: (column, predicate.strip()) for name, column, predicate in found}


def as_text(composed: sql.Composable) -> str:
    """A composed query as text, without a connection when psycopg allows it (3.2+)."""
    try:
        return composed.as_string(None)
    except (TypeError, psycopg.Error):
        with psycopg.connect(LOCAL_POSTGRESQL) as conn:
            return composed.as_string(conn)


# Files composed only with bindings of the claim that uses them, as the client binds them.
BOUND = {"free_slots": flow.QUEUE_FREE,
         # a reshard's index statements, as shardq.ops.reshard binds them
         **{name: sqlfiles.Part(name, names=(("index", ("tasks_" + name + "_32",)),),
                                literals=(("count", 32),))
            for name in ("reshard_claim_index", "reshard_leases_index",
                         "reshard_head_starts_index", "reshard_drop_index")}}
LIMITED = ("claim_limited", "claim_free")


def limited_fragments(group: str | None, grouped: bool, guard: str) -> sqlfiles.Names:
    return tuple(sorted(flow.limited_fragments(group, grouped, guard).items()))


def compose(name: str, bucket: str = SHARD_16, limit: int = CLAIM_LIMIT) -> str:
    """Query ``name`` composed for CockroachDB (the limit used where a template takes one)."""
    part = BOUND.get(name)
    if part is not None:
        return as_text(sqlfiles.query(part.file, "cockroachdb", bucket, limit,
                                      fragments=part.parts, identifiers=part.names,
                                      literals=part.literals))
    fragments = limited_fragments(None, False, "rate_unset") if name in LIMITED else ()
    if name == "claim_buckets":
        fragments = tuple(LISTED.items())
    return as_text(sqlfiles.query(name, "cockroachdb", bucket, limit, fragments=fragments))


def subquery(text: str) -> str:
    """The row-picking subquery ``FROM ( ... ) AS c`` of a claim or janitor statement."""
    match = re.search(r"\bFROM \((.*)\) AS c\b", text, re.S)
    assert match, "no FROM (...) AS c subquery"
    return flat(match.group(1))


def for_postgresql_parser(text: str) -> tuple[str, dict[str, int]]:
    """A composed query made parseable by PostgreSQL's parser, and its parameter numbers.

    psycopg's %(name)s placeholders become $n (and %% becomes %).  CockroachDB's index
    hint ``table@index`` (janitor queries, a reshard's drops) is not PostgreSQL syntax,
    so the ``@index`` suffix is stripped before parsing; so are a hash-sharded index's
    ``USING HASH WITH (…)``, and a statement's result as a table (``[SHOW JOBS]``)
    becomes a table's name.  Those are checked as text elsewhere
    (tests/test_reshard_offline.py).
    """
    numbers: dict[str, int] = {}

    def placeholder(match: re.Match[str]) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    text = re.sub(r"%\((\w+)\)s", placeholder, text).replace("%%", "%")
    text = re.sub(r"USING HASH WITH \([^)]*\)", "", text).replace("[SHOW JOBS]", "jobs")
    return re.sub(r"\b(shardq\.tasks)@(\"?)\w+\2", r"\1", text), numbers


# -- the migrations, rendered offline ------------------------------------------------------------


@pytest.fixture(params=BUCKET_COUNTS, ids=lambda n: f"{n}-buckets")
def buckets(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def crdb_script(buckets: int) -> str:
    needs_crdb_dialect()
    return render_upgrade("cockroachdb", buckets)


def test_crdb_schema_is_created_if_missing(crdb_script: str) -> None:
    assert "CREATE SCHEMA IF NOT EXISTS shardq;" in crdb_script


def test_crdb_table_has_a_hash_sharded_primary_key(crdb_script: str, buckets: int) -> None:
    (create,) = [s for s in statements(crdb_script)
                 if s.startswith("CREATE TABLE IF NOT EXISTS shardq.tasks ")]
    assert create.startswith("CREATE TABLE IF NOT EXISTS shardq.tasks (")
    assert (
        "CONSTRAINT tasks_pkey PRIMARY KEY (queue, status, exec_time, id) "
        f"USING HASH WITH (bucket_count = {buckets})"
    ) in create
    # CockroachDB keeps the hidden shard column itself: no bucket column of shardq's own.
    assert "GENERATED ALWAYS" not in create
    assert not re.search(r"\bbucket\s+smallint\b", create)
    assert "fillfactor" not in create
    assert "autovacuum" not in create
    assert re.search(r"\bid uuid NOT NULL DEFAULT gen_random_uuid\(\)", create)


def test_crdb_partial_indexes_lead_with_the_shard_column(crdb_script: str, buckets: int) -> None:
    key = re.search(r"PRIMARY KEY \(([^)]*)\)\s+USING HASH", crdb_script)
    assert key, "no hash-sharded primary key"
    columns = tuple(c.strip() for c in key.group(1).split(","))
    assert columns == PRIMARY_KEY
    expected = shard_column(buckets, columns)
    assert expected == f"crdb_internal_exec_time_id_queue_status_shard_{buckets}"

    indexes = partial_indexes(crdb_script)
    assert indexes == {
        "tasks_leases": (expected, "status = 'locked'"),
        "tasks_head_starts": (expected, "pending_head_start_s > 0"),
    }
    # The name is what shardq.dialect reads the bucket count back from.
    match = dialect.COUNT_IN_SHARD.search(expected)
    assert match
    assert int(match.group(1)) == buckets


def test_crdb_gc_ttl_is_shortened(crdb_script: str) -> None:
    match = re.search(
        r"^ALTER TABLE shardq\.tasks CONFIGURE ZONE USING gc\.ttlseconds = (\d+);$",
        crdb_script,
        re.M,
    )
    assert match, "no gc.ttlseconds zone configuration"
    # Below CockroachDB's default of 4 hours (14400 s), and above zero.
    assert 0 < int(match.group(1)) < 14400


def test_crdb_each_revision_is_one_ddl_statement_in_its_own_transaction(crdb_script: str) -> None:
    steps = revisions(crdb_script)
    assert list(steps) == STEPS
    assert STEPS[:9] == ["->0001", "0001->0002", "0002->0003", "0003->0004", "0004->0005",
                         "0005->0006", "0006->0007", "0007->0008", "0008->0009"]
    for step, ddl in steps.items():
        expected = 0 if step in POSTGRESQL_ONLY_REVISIONS else 1
        expected = MULTI_STATEMENT_REVISIONS.get(step.partition("->")[2], expected)
        assert len(ddl) == expected, f"revision {step} has {len(ddl)} DDL statements: {ddl}"
    txs = transactions(crdb_script)
    for tx in txs:
        assert len([s for s in tx if is_ddl(s)]) <= 1, f"one transaction, several DDL: {tx}"
    # Every revision's DDL statement is found, alone, in some transaction.
    in_transactions = [s for tx in txs for s in tx if is_ddl(s)]
    assert in_transactions == [stmt for ddl in steps.values() for stmt in ddl]


def test_crdb_every_ddl_statement_is_rerunnable(crdb_script: str, buckets: int) -> None:
    needs_crdb_dialect()
    downgrade = render_downgrade("cockroachdb", buckets)
    assert "DROP INDEX IF EXISTS shardq.tasks@tasks_leases" in downgrade
    assert "DROP INDEX IF EXISTS shardq.tasks@tasks_head_starts" in downgrade
    for script in (crdb_script, downgrade):
        for step, ddl in revisions(script).items():
            for stmt in ddl:
                assert RERUNNABLE.match(stmt), f"revision {step} is not re-runnable: {stmt}"


@pytest.mark.parametrize("n", BUCKET_COUNTS)
def test_postgresql_render_has_the_generated_bucket_column(n: int) -> None:
    script = render_upgrade("postgresql", n)
    create = flat(script)
    assert re.search(
        r"bucket smallint GENERATED ALWAYS AS \(\s*" + re.escape(dialect.bucket_sql("id", n))
        + r"\s*\) STORED",
        create,
    )
    assert "PRIMARY KEY (bucket, queue, status, exec_time, id)" in create
    assert re.search(r"\bfillfactor = 90\b", create)
    assert "USING HASH" not in script
    assert "crdb_internal" not in script
    assert "CONFIGURE ZONE" not in script
    assert {k: v[0] for k, v in partial_indexes(script).items()} == {
        "tasks_leases": "bucket",
        "tasks_head_starts": "bucket",
    }


def test_postgresql_render_has_one_transaction_per_revision() -> None:
    script = render_upgrade("postgresql", 16)
    txs = transactions(script)
    assert len(txs) == len(revisions(script)) == len(VERSIONS)
    # Each revision's statements run in its transaction, and only they.
    for tx, version in zip(txs, VERSIONS, strict=True):
        most = MULTI_STATEMENT_REVISIONS.get(version, 1)
        assert len([s for s in tx if is_ddl(s)]) <= most, f"one transaction, several DDL: {tx}"
    # 0005 only configures CockroachDB: on PostgreSQL it just moves the version.
    assert revisions(script)["0004->0005"] == []
    for step, ddl in revisions(script).items():
        for stmt in ddl:
            assert RERUNNABLE.match(stmt), f"revision {step} is not re-runnable: {stmt}"


# -- the queries, composed for CockroachDB ---------------------------------------------------


def test_every_sql_file_is_classified() -> None:
    names = {p.stem for p in SQL_DIR.glob("*.sql")}
    names |= {p.stem for p in (SQL_DIR / "cockroachdb").glob("*.sql")}
    assert names == set(CRDB_QUERIES + FRAGMENTS + POSTGRESQL_ONLY + NOT_QUERIES + VACUUM_STEP
                        + PLAIN_POSTGRESQL + PAGE_SAMPLE + PGBOUNCER_CONSOLE)


@pytest.mark.parametrize("name", COMPOSED)
def test_crdb_query_composes_without_postgresql_only_constructs(name: str) -> None:
    text = compose(name)
    code = strip_comments(text)
    assert not re.search(r"\{\w+\}", code), "a template placeholder was left unfilled"
    assert not re.search(r"\bctid\b", code, re.I), "ctid is PostgreSQL's, CockroachDB has none"
    assert not re.search(r"\bMATERIALIZED\b", code, re.I)
    # The bucket is the hidden shard column on CockroachDB: never a column named bucket.
    assert not re.search(r"\bt\.bucket\b|\b(WHERE|AND) bucket\b", code)
    if "{bucket}" in sqlfiles.text(name, "cockroachdb"):
        assert f'"{SHARD_16}"' in code


def test_crdb_claim_is_one_update_over_one_bucket_range() -> None:
    text = compose("claim")
    code = strip_comments(text)
    assert flat(code).startswith("UPDATE shardq.tasks AS t SET")
    assert ";" not in code
    assert len(re.findall(r"\bUPDATE shardq\.tasks\b", code)) == 1
    sub = subquery(code)
    assert sub.startswith("SELECT ")
    assert f'WHERE "{SHARD_16}" = %(bucket)s' in sub
    assert "queue = %(queue)s" in sub
    assert "status = 'available'" in sub
    assert re.search(r"\bORDER BY exec_time\b", sub)
    assert re.search(rf"\bLIMIT {CLAIM_LIMIT}\b", sub)
    assert sub.endswith("FOR UPDATE SKIP LOCKED")
    # The UPDATE finds each picked row again by its whole primary key ...
    for column in PRIMARY_KEY:
        assert f"t.{column} = c.{column}" in code
    # ... and returns the shard of the row as it is after the claim.
    assert f't."{SHARD_16}" AS bucket' in code


def test_crdb_claim_of_several_buckets_reads_each_listed_bucket_range() -> None:
    code = strip_comments(compose("claim_buckets"))
    assert flat(code).startswith("UPDATE shardq.tasks AS t SET")
    assert len(re.findall(r"\bUPDATE shardq\.tasks\b", code)) == 1
    assert "unnest(%(buckets)s::INT8[]) AS listed(bucket)" in code
    lateral = code.partition("LATERAL (")[2]
    assert f'WHERE "{SHARD_16}" = listed.bucket' in lateral
    assert "queue = %(queue)s" in lateral
    assert "status = 'available'" in lateral
    per_bucket = re.search(r"ORDER BY exec_time\s+LIMIT (\d+)\s+FOR UPDATE SKIP LOCKED", lateral)
    assert per_bucket is not None
    assert int(per_bucket[1]) == CLAIM_LIMIT
    assert re.search(rf"\) AS d\s+LIMIT {CLAIM_LIMIT}\s*\) AS c", code)  # the claim's limit
    for column in PRIMARY_KEY:
        assert f"t.{column} = c.{column}" in code
    assert f't."{SHARD_16}" AS bucket' in code


def test_crdb_claim_returns_the_task_fields_in_order() -> None:
    """Claimed rows become Tasks positionally (shardq.ops.claims.task_rows)."""
    returning = flat(strip_comments(compose("claim"))).partition("RETURNING ")[2]
    names = [re.sub(r"^.* AS |^t\.", "", item.strip()) for item in returning.split(",")]
    assert names == list(RETURNED)


@pytest.mark.parametrize(
    ("name", "index"),
    [("janitor_rescue", "tasks_leases"), ("janitor_promote", "tasks_head_starts")],
)
def test_crdb_janitor_forces_its_partial_index(name: str, index: str) -> None:
    needs_crdb_dialect()
    text = strip_comments(compose(name))
    assert f"FROM shardq.tasks@{index}\n" in text
    sub = subquery(text)
    # CockroachDB refuses a forced partial index unless the filter implies its predicate.
    column, predicate = partial_indexes(render_upgrade("cockroachdb", 16))[index]
    assert column == SHARD_16
    assert predicate in sub
    assert f'"{SHARD_16}" = %(bucket)s' in sub
    assert re.search(r"\bORDER BY exec_time\b", sub)
    assert re.search(rf"\bLIMIT {CLAIM_LIMIT}\b", sub)
    assert sub.endswith("FOR UPDATE SKIP LOCKED")


def test_crdb_janitor_probe_reads_each_bucket_of_each_partial_index() -> None:
    needs_crdb_dialect()
    code = strip_comments(compose("janitor_due"))
    indexes = partial_indexes(render_upgrade("cockroachdb", 16))
    for index in ("tasks_leases", "tasks_head_starts"):
        probe = code.partition(f"FROM shardq.tasks@{index}")[2].partition(")")[0]
        column, predicate = indexes[index]
        assert column == SHARD_16
        assert f'"{SHARD_16}" = listed.bucket' in probe
        assert predicate in probe  # CockroachDB refuses a forced index whose predicate fails
    assert "unnest(%(buckets)s::INT8[]) AS listed(bucket)" in code


@pytest.fixture(scope="module")
def pglast() -> Any:
    return pytest.importorskip("pglast", reason="pglast (PostgreSQL's parser) is not installed")


# Statements that make a fragment parseable on its own.
AS_EXPRESSION = sql.SQL("SELECT {} FROM shardq.tasks AS t")
AS_WHERE_CLAUSE = sql.SQL("SELECT 1 FROM shardq.tasks AS t, shardq.tasks AS a {}")
AS_SUBQUERY = sql.SQL("SELECT * FROM ({}) AS fragment")
AS_CONDITION = sql.SQL("SELECT 1 FROM shardq.tasks WHERE {}")
AS_SET_LIST = sql.SQL("UPDATE shardq.tasks AS t SET {} FROM (SELECT now() AS now) AS clock")
AS_RETURNING = sql.SQL("DELETE FROM shardq.tasks AS t {}")
AS_ORDER = sql.SQL("SELECT 1 FROM shardq.tasks ORDER BY exec_time {}")
AS_GUARD = sql.SQL("SELECT 1 FROM shardq.tasks WHERE true {}")
AS_CTES = sql.SQL("WITH done AS (SELECT * FROM shardq.tasks), {} SELECT 1")
# The shared parts of the claim, rescue and promote statements, and how each is parsed.
CLAUSES = {"bucket_bound": AS_EXPRESSION, "bucket_listed": AS_EXPRESSION,
           "claim_where": AS_CONDITION, "rescue_where": AS_CONDITION,
           "promote_where": AS_CONDITION, "claim_set": AS_SET_LIST, "rescue_set": AS_SET_LIST,
           "promote_set": AS_SET_LIST, "claim_returning": AS_RETURNING,
           "claim_columns": AS_EXPRESSION, "suspect": AS_CONDITION,
           "rescue_dies": AS_CONDITION, "rescue_error": AS_EXPRESSION,
           "task_columns": AS_EXPRESSION, "order_earliest": AS_ORDER, "order_latest": AS_ORDER,
           "sample_states": AS_EXPRESSION, "batch_notify": AS_EXPRESSION,
           "results_notify": AS_EXPRESSION, "claim_range": AS_CONDITION,
           "claim_range_ungrouped": AS_CONDITION, "claim_range_mixed": AS_CONDITION,
           "claim_range_group": AS_CONDITION, "layout_guard": AS_GUARD,
           "rate_unset": AS_GUARD, "rate_unset_both": AS_GUARD,
           "rate_unset_per_group": AS_GUARD, "rate_spent": AS_GUARD, "claim_slots": AS_SET_LIST,
           "claim_slots_taken": AS_SET_LIST, "holders_queue": AS_CONDITION,
           "holders_group": AS_CONDITION, "acked": AS_CTES,
           "flow_notify": AS_EXPRESSION}
AS_STEPS_DROP = sql.SQL("WITH steps_ended AS (SELECT NULL::uuid AS id), stepped AS ({}) "
                        "SELECT 1")
AS_FLOW_EVENTS = sql.SQL("WITH flow_ended AS (SELECT NULL::uuid AS flow_id, NULL::uuid AS id, "
                         "NULL::text AS outcome, NULL::uuid[] AS next) {}")


@pytest.mark.parametrize("name", COMPOSED)
def test_crdb_query_parses_as_one_statement(pglast: Any, name: str) -> None:
    text, _ = for_postgresql_parser(compose(name))
    wrapper = None
    if name == "backoff":  # an expression
        wrapper = AS_EXPRESSION
    elif name == "locate":  # a WHERE clause over tasks `t` and claimed tasks `a`
        wrapper = AS_WHERE_CLAUSE
    elif name in CLAUSES:
        wrapper = CLAUSES[name]
    elif name == "flow_events_add":  # an INSERT over the CTE flow_ended of its statement
        wrapper = AS_FLOW_EVENTS
    elif name == "steps_drop":  # a DELETE over the CTE steps_ended of its statement
        wrapper = AS_STEPS_DROP
    elif name in ("flow_take", "flow_purge"):  # DELETE ... ORDER BY ... LIMIT: CockroachDB's
        text = re.sub(r"\bORDER BY [\w, ]+\s+LIMIT \d+\b", "", text)
    elif name in ("janitor_purge_dead", "janitor_results", "janitor_attempts"):
        # DELETE ... LIMIT: CockroachDB's
        text = re.sub(r"\bLIMIT \d+\b", "", text)
    elif name in FRAGMENTS and name not in ("insert_rows", "insert_one", "throughput_add",
                                            "attempts_add"):
        wrapper = AS_SUBQUERY
    if wrapper is not None:
        text = as_text(wrapper.format(sql.SQL(text)))
    parsed = pglast.parse_sql(text)
    assert len(parsed) == 1


def test_crdb_claim_parse_tree(pglast: Any) -> None:
    from pglast import ast, enums

    text, params = for_postgresql_parser(compose("claim"))
    (raw,) = pglast.parse_sql(text)
    update = raw.stmt
    assert isinstance(update, ast.UpdateStmt)
    assert isinstance(update.relation, ast.RangeVar)
    assert update.relation.schemaname == "shardq"
    assert update.relation.relname == "tasks"
    assert update.fromClause is not None
    source, clock = update.fromClause
    assert isinstance(source, ast.RangeSubselect)
    assert isinstance(source.alias, ast.Alias)
    assert source.alias.aliasname == "c"
    assert isinstance(clock, ast.RangeSubselect)
    assert isinstance(clock.alias, ast.Alias)
    assert clock.alias.aliasname == "clock"
    select = source.subquery
    assert isinstance(select, ast.SelectStmt)
    assert select.lockingClause is not None
    (locking,) = select.lockingClause
    assert locking.strength == enums.LockClauseStrength.LCS_FORUPDATE
    assert locking.waitPolicy == enums.LockWaitPolicy.LockWaitSkip
    assert isinstance(select.limitCount, ast.A_Const)
    assert isinstance(select.limitCount.val, ast.Integer)
    assert select.limitCount.val.ival == CLAIM_LIMIT
    assert select.sortClause is not None
    (order,) = select.sortClause
    assert isinstance(order.node, ast.ColumnRef)
    assert order.node.fields is not None
    assert [f.sval for f in order.node.fields] == ["exec_time"]
    assert select.fromClause is not None
    (table,) = select.fromClause
    assert isinstance(table, ast.RangeVar)
    assert (table.schemaname, table.relname) == ("shardq", "tasks")
    assert isinstance(select.whereClause, ast.BoolExpr)
    conjuncts = select.whereClause.args
    assert conjuncts is not None
    shard_filters = [
        c
        for c in conjuncts
        if isinstance(c, ast.A_Expr)
        and [n.sval for n in c.name or ()] == ["="]
        and isinstance(c.lexpr, ast.ColumnRef)
        and [f.sval for f in c.lexpr.fields or ()] == [SHARD_16]
    ]
    (shard_filter,) = shard_filters
    assert isinstance(shard_filter.rexpr, ast.ParamRef)
    assert shard_filter.rexpr.number == params["bucket"]


def test_crdb_periodic_table(crdb_script: str, buckets: int) -> None:
    (create,) = [s for s in statements(crdb_script)
                 if s.startswith("CREATE TABLE IF NOT EXISTS shardq.periodic ")]
    assert "name text NOT NULL PRIMARY KEY" in create
    assert revisions(crdb_script)["0010->0011"] == [create]
    assert "DROP TABLE IF EXISTS shardq.periodic" in render_downgrade("cockroachdb", buckets)


def test_crdb_periodic_fire_is_one_statement_writing_each_table_once(pglast: Any) -> None:
    """The compare-and-set of the slot and the enqueue are one statement, so one
    transaction; it writes shardq.tasks once, which CockroachDB allows."""
    from pglast import ast

    text, params = for_postgresql_parser(compose("periodic_fire"))
    (raw,) = pglast.parse_sql(text)
    insert = raw.stmt
    assert isinstance(insert, ast.InsertStmt)
    assert isinstance(insert.relation, ast.RangeVar)
    assert (insert.relation.schemaname, insert.relation.relname) == ("shardq", "tasks")
    assert insert.withClause is not None
    assert insert.withClause.ctes is not None
    (cte,) = insert.withClause.ctes
    update = cte.ctequery
    assert isinstance(update, ast.UpdateStmt)
    assert isinstance(update.relation, ast.RangeVar)
    assert (update.relation.schemaname, update.relation.relname) == ("shardq", "periodic")
    code = flat(strip_comments(compose("periodic_fire")))
    assert "AND last_slot IS NOT DISTINCT FROM %(last_slot)s::timestamptz" in code
    assert "since = %(since)s::timestamptz" in code
    assert len(re.findall(r"\b(INSERT INTO|UPDATE|DELETE FROM) shardq\.tasks\b", code)) == 1
    assert {"name", "slot", "since", "last_slot", "run", "now"} <= set(params)


def test_crdb_results_table_and_its_expiry_index_are_hash_sharded(crdb_script: str,
                                                                   buckets: int) -> None:
    steps = revisions(crdb_script)
    [create] = steps["0015->0016"]
    assert create.startswith("CREATE TABLE IF NOT EXISTS shardq.results (")
    assert f"CONSTRAINT results_pkey PRIMARY KEY (id) USING HASH WITH (bucket_count = {buckets})" \
        in create
    assert steps["0016->0017"] == [
        "CREATE INDEX IF NOT EXISTS results_expiry ON shardq.results (expires_at) USING HASH"]
    downgrade = render_downgrade("cockroachdb", buckets)
    assert "DROP INDEX IF EXISTS shardq.results@results_expiry" in downgrade
    assert "DROP TABLE IF EXISTS shardq.results" in downgrade


def test_crdb_ack_with_results_writes_each_table_once_and_notifies_no_one(pglast: Any) -> None:
    """The ack and its results are one statement; CockroachDB allows one write of a table
    per statement, and has no NOTIFY (its waiting clients poll)."""
    from pglast import ast

    code = flat(strip_comments(compose("ack_results")))
    for table in ("tasks", "throughput", "results"):
        writes = re.findall(WRITES_TO.format(table=table), code)
        assert len(writes) == 1, table
    assert "pg_notify" not in code
    assert "ON CONFLICT (id) DO NOTHING" in code
    text, params = for_postgresql_parser(compose("ack_results"))
    (raw,) = pglast.parse_sql(text)
    assert isinstance(raw.stmt, ast.SelectStmt)
    assert {"ids", "tokens", "kept_ids", "kept_values", "kept_errors", "keep_s", "now"} <= set(
        params)


def test_crdb_attempts_and_workers_tables(crdb_script: str, buckets: int) -> None:
    """0024 adds the workers table, the claim's worker column, and the attempts table,
    keyed by task (random ids on CockroachDB: no hot range) with its retention index
    hash-sharded (end times grow with the clock)."""
    step = next(s for s in revisions(crdb_script) if s.endswith("->0024"))
    workers, column, attempts, index = revisions(crdb_script)[step]
    assert workers.startswith("CREATE TABLE IF NOT EXISTS shardq.workers (")
    assert "CONSTRAINT workers_pkey PRIMARY KEY (id)" in workers
    assert column == "ALTER TABLE shardq.tasks ADD COLUMN IF NOT EXISTS worker_id uuid"
    assert attempts.startswith("CREATE TABLE IF NOT EXISTS shardq.attempts (")
    assert "CONSTRAINT attempts_pkey PRIMARY KEY (task_id, slot)" in attempts
    assert index == ("CREATE INDEX IF NOT EXISTS attempts_ended ON shardq.attempts (ended_at) "
                     "USING HASH")
    downgrade = render_downgrade("cockroachdb", buckets)
    for stmt in ("DROP TABLE IF EXISTS shardq.attempts",
                 "ALTER TABLE shardq.tasks DROP COLUMN IF EXISTS worker_id",
                 "DROP TABLE IF EXISTS shardq.workers"):
        assert stmt in downgrade


def test_crdb_flows_tables(crdb_script: str, buckets: int) -> None:
    """0026 adds the flows: tasks' flow columns in one statement, the status check
    replaced in one (so it keeps its name), the flows table keyed by its random id
    (hash-sharded as results are), its retention index hash-sharded (end times grow
    with the clock), and flow_events keyed by flow first (a flow's events are one range)."""
    step = next(s for s in revisions(crdb_script) if s.endswith("->0026"))
    (columns, check, tasks_flows, flows, finished, events, result_column,
     results_flows) = revisions(crdb_script)[step]
    assert columns == ("ALTER TABLE shardq.tasks ADD COLUMN IF NOT EXISTS flow_id uuid, "
                       "ADD COLUMN IF NOT EXISTS flow_next uuid[], "
                       "ADD COLUMN IF NOT EXISTS flow_deps uuid[], "
                       "ADD COLUMN IF NOT EXISTS waits integer")
    assert check == ("ALTER TABLE shardq.tasks DROP CONSTRAINT IF EXISTS tasks_status_check, "
                     "ADD CONSTRAINT tasks_status_check CHECK (status IN ('available', "
                     "'locked', 'dead', 'waiting'))")
    assert tasks_flows == ("CREATE INDEX IF NOT EXISTS tasks_flows ON shardq.tasks "
                           "(flow_id, status) WHERE flow_id IS NOT NULL")
    assert flows.startswith("CREATE TABLE IF NOT EXISTS shardq.flows (")
    assert (f"CONSTRAINT flows_pkey PRIMARY KEY (id) USING HASH WITH (bucket_count = {buckets})"
            in flows)
    assert finished == ("CREATE INDEX IF NOT EXISTS flows_finished ON shardq.flows "
                        "(finished_at) USING HASH WHERE finished_at IS NOT NULL")
    assert events.startswith("CREATE TABLE IF NOT EXISTS shardq.flow_events (")
    assert "CONSTRAINT flow_events_pkey PRIMARY KEY (flow_id, at, task_id, outcome)" in events
    assert result_column == "ALTER TABLE shardq.results ADD COLUMN IF NOT EXISTS flow_id uuid"
    assert results_flows == ("CREATE INDEX IF NOT EXISTS results_flows ON shardq.results "
                             "(flow_id) WHERE flow_id IS NOT NULL")
    downgrade = render_downgrade("cockroachdb", buckets)
    for stmt in ("DROP INDEX IF EXISTS shardq.results@results_flows",
                 "DROP TABLE IF EXISTS shardq.flow_events", "DROP TABLE IF EXISTS shardq.flows",
                 "DROP INDEX IF EXISTS shardq.tasks@tasks_flows",
                 "DELETE FROM shardq.tasks WHERE status = 'waiting'",
                 "CHECK (status IN ('available', 'locked', 'dead'))"):
        assert stmt in downgrade


# The statements that end an attempt, and so record it (attempts_add).
RECORDING = ("ack_many", "ack_results", "nack_many", "requeue_many", "task_cancel",
             "janitor_rescue")


@pytest.mark.parametrize("name", RECORDING)
def test_crdb_statements_that_end_attempts_write_each_table_once(pglast: Any,
                                                                  name: str) -> None:
    """Each writes shardq.tasks once and shardq.attempts once (CockroachDB allows one
    write of a table per statement), the attempt from the rows it changed, with the
    worker's name copied in; and it is one statement, so the task's change and its
    record commit together."""
    code = flat(strip_comments(compose(name)))
    for table in ("tasks", "attempts"):
        writes = re.findall(WRITES_TO.format(table=table), code)
        assert len(writes) == 1, table
    assert "ON CONFLICT (task_id, slot) DO UPDATE SET" in code
    assert "WHERE h.attempt < EXCLUDED.attempt" in code
    assert "LEFT JOIN shardq.workers AS w ON w.id = e.worker_id" in code
    assert "FROM ended AS e" in code
    text, params = for_postgresql_parser(compose(name))
    assert len(pglast.parse_sql(text)) == 1
    assert {"attempts_kept", "now"} <= set(params)


@pytest.mark.parametrize("name", ["ack_many", "ack_results"])
def test_crdb_an_ack_records_only_tasks_claimed_before(name: str) -> None:
    code = flat(strip_comments(compose(name)))
    assert "'acked'::text AS outcome" in code
    assert "FROM done WHERE done.times_claimed > 1" in code


def test_crdb_claim_records_its_worker() -> None:
    code = flat(strip_comments(compose("claim")))
    assert "worker_id = %(worker_id)s::uuid" in code


# -- discovering the layout at run time ------------------------------------------------------


def test_layout_on_postgresql(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        assert db.read_layout(conn) == boundary.Layout(dialect.POSTGRESQL, "bucket", 16,
                                                       tracked=True)


@pytest.mark.parametrize("n", BUCKET_COUNTS)
def test_shard_column_name_gives_the_bucket_count(n: int) -> None:
    name = shard_column(n)
    match = dialect.COUNT_IN_SHARD.search(name)
    assert match
    assert int(match.group(1)) == n
    assert dialect.COUNT_IN_SHARD.search(name + "_old") is None
    assert dialect.COUNT_IN_SHARD.search("bucket") is None


def test_schema_info_pattern_matches_shard_columns(dsn: str) -> None:
    # read_layout passes {} as parameters, so psycopg turns the template's %% into %;
    # LIKE means the same on CockroachDB as here on PostgreSQL.
    query = sqlfiles.text("schema_info", "cockroachdb")
    match = re.search(r"column_name LIKE '([^']*)'", query)
    assert match
    with psycopg.connect(dsn) as conn:
        for name, expected in [
            (shard_column(16), True),
            (shard_column(32), True),
            ("crdb_internal_id_shard_8", True),
            ("bucket", False),
            ("exec_time", False),
        ]:
            # The file doubles % for psycopg; as a bound value the pattern is single.
            pattern = match.group(1).replace("%%", "%")
            row = conn.execute("SELECT %(name)s LIKE %(pattern)s",
                               {"name": name, "pattern": pattern}).fetchone()
            assert row == (expected,), name


class Result(list[Any]):
    def fetchone(self) -> Any:
        return self[0] if self else None

    def fetchall(self) -> list[Any]:
        return list(self)


class FakeCockroach:
    """Answers read_layout's two queries as CockroachDB with these shard columns would."""

    def __init__(self, *shard_columns: str) -> None:
        self.rows = [
            (c, f"mod(fnv32(crdb_internal.datums_to_bytes(exec_time, id, queue, status)), {n})")
            for c, n in ((c, c.rsplit("_", 1)[1]) for c in shard_columns)
        ]
        self.seen: list[tuple[str, Any]] = []

    def execute(self, query: Any, params: Any = None) -> Result:
        self.seen.append((query, params))
        if query == sqlfiles.plain("server_version"):
            return Result([("CockroachDB CCL v25.2.0 (x86_64-pc-linux-gnu, built 2025/05/01)",)])
        return Result(self.rows)


@pytest.mark.parametrize("n", BUCKET_COUNTS)
def test_layout_on_cockroachdb(n: int) -> None:
    conn = FakeCockroach(shard_column(n))
    layout = db.read_layout(conn)  # type: ignore[arg-type]
    assert layout == boundary.Layout(dialect.COCKROACHDB, shard_column(n), n)
    assert conn.seen[1] == (sqlfiles.text("schema_info", "cockroachdb"), {})


def test_layout_on_cockroachdb_refuses_two_shard_columns() -> None:
    conn = FakeCockroach(shard_column(16), shard_column(32))
    with pytest.raises(SchemaNotReady, match="several shard columns"):
        db.read_layout(conn)  # type: ignore[arg-type]


def test_layout_on_cockroachdb_without_the_table() -> None:
    with pytest.raises(SchemaNotReady, match="does not exist"):
        db.read_layout(FakeCockroach())  # type: ignore[arg-type]


def test_cockroachdb_dsn_is_spoken_as_postgresql() -> None:
    dsn = "cockroachdb://root@127.0.0.1:26257/shardq?sslmode=disable"
    assert boundary.normalize_dsn(dsn) == "postgresql://root@127.0.0.1:26257/shardq?sslmode=disable"
    # Alembic, on the other hand, needs the cockroachdb:// scheme to pick its dialect.
    config = migrate.alembic_config("postgresql://root@h:26257/db", dialect="cockroachdb")
    assert config.attributes["dsn"] == "cockroachdb://root@h:26257/db"


def test_no_placeholder_in_a_comment() -> None:
    """A fragment composed into a `--` comment would comment out its first line."""
    for path in SQL_DIR.rglob("*.sql"):
        for line in path.read_text().splitlines():
            comment = line.partition("--")[2]
            assert "{" not in comment, f"{path.name}: {line}"


LIMITED_RANGES = ("claim_range_ungrouped", "claim_range_mixed", "claim_range_group")


@pytest.mark.parametrize("claim_range", LIMITED_RANGES)
def test_crdb_limited_claim_is_one_update_joined_to_free_slots(pglast: Any,
                                                               claim_range: str) -> None:
    group = "g" if claim_range.endswith("group") else None
    fragments = limited_fragments(group, claim_range.endswith("mixed"), "rate_unset_both")
    assert ("claim_range", claim_range) in fragments
    code = strip_comments(as_text(sqlfiles.query(
        "claim_limited", "cockroachdb", SHARD_16, CLAIM_LIMIT, fragments=fragments)))
    assert flat(code).startswith("UPDATE shardq.tasks AS t SET")
    assert len(re.findall(r"\bUPDATE shardq\.tasks\b", code)) == 1
    assert "FOR UPDATE SKIP LOCKED" in code
    assert "slot = f.slot, group_slot = f.group_slot" in flat(code)
    # Limits live in tables, never in advisory locks or session state.
    assert not re.search(r"\bpg_\w+|advisory|\bctid\b|MATERIALIZED", code, re.I)
    text, _ = for_postgresql_parser(code)
    assert len(pglast.parse_sql(text)) == 1


# -- task graphs (flows) on CockroachDB -----------------------------------------------------------

FLOW_STATEMENTS = tuple(n for n in CRDB_QUERIES if n.startswith("flow_"))
FLOW_TABLES = ("tasks", "flows", "flow_events", "results", "attempts", "throughput")


@pytest.mark.parametrize("name", FLOW_STATEMENTS)
def test_crdb_flow_statement_writes_each_table_at_most_once(name: str) -> None:
    """CockroachDB refuses a statement that modifies one table twice."""
    code = flat(strip_comments(compose(name)))
    for table in FLOW_TABLES:
        assert len(re.findall(WRITES_TO.format(table=table), code)) <= 1, table
    assert "pg_notify" not in code
    assert not re.search(r"\bCOPY\b", code)


def test_crdb_flow_pick_is_a_loose_scan_bounded_inside_its_recursion(pglast: Any) -> None:
    """CockroachDB evaluates a recursive CTE to its end before any LIMIT outside it:
    the recursion itself stops after the limit's steps, each one probe of the key."""
    from pglast import ast

    code = flat(strip_comments(compose("flow_pick")))
    assert code.startswith("WITH RECURSIVE f (flow_id, n) AS (")
    assert f"AND f.n < {CLAIM_LIMIT} )" in code
    assert code.count("ORDER BY e.flow_id LIMIT 1") == 2  # the first flow, then the next
    assert "WHERE e.flow_id > f.flow_id" in code
    assert code.endswith("FOR UPDATE SKIP LOCKED")
    text, params = for_postgresql_parser(compose("flow_pick"))
    (raw,) = pglast.parse_sql(text)
    assert isinstance(raw.stmt, ast.SelectStmt)
    assert raw.stmt.withClause is not None
    assert raw.stmt.withClause.recursive
    assert params == {}


@pytest.mark.parametrize(("name", "order"), [("flow_take", "flow_id, at"),
                                              ("flow_purge", "finished_at")])
def test_crdb_flow_deletes_take_their_batch_directly(name: str, order: str) -> None:
    """One ordered, limited DELETE: no tuple IN (subquery) nor id array to look up again
    (a purge deletes the purged flows' results beside, by their flow)."""
    assert "{limit}" in sqlfiles.text(name, "cockroachdb")
    code = flat(strip_comments(compose(name)))
    table = "shardq.flow" + ("_events" if name == "flow_take" else "s")
    deleted = "DELETE FROM " + table
    assert code.startswith(deleted if name == "flow_take" else "WITH gone AS ( " + deleted)
    assert f"ORDER BY {order} LIMIT {CLAIM_LIMIT} RETURNING" in code
    assert not re.search(r"\) IN \(|ARRAY\(", code)


def test_crdb_flow_take_reads_only_the_locked_flows() -> None:
    code = flat(strip_comments(compose("flow_take")))
    assert "WHERE flow_id = ANY(%(flows)s::uuid[])" in code
    assert code.endswith("RETURNING flow_id, at, task_id, outcome, next, n")


def test_crdb_flow_release_sets_args_by_an_array_path() -> None:
    """The path is ARRAY['args']: a '{args}' literal would need its braces doubled."""
    code = flat(strip_comments(compose("flow_release")))
    assert "jsonb_set(t.payload, ARRAY['args'], jsonb_build_array(" in code
    assert "WITH ORDINALITY AS p(id, n)" in code
    # Each parent's result by its key (a join of results to the array read it whole).
    assert "jsonb_agg((SELECT r.value FROM shardq.results AS r WHERE r.id = p.id) ORDER BY p.n)" \
        in code
    assert "WHERE t.id = d.id AND t.status = 'waiting'" in code
    assert "{" not in code


@pytest.mark.parametrize("name", ["flow_cancel_children", "flow_seal"])
def test_crdb_flow_statements_write_their_events_in_the_same_statement(name: str) -> None:
    code = flat(strip_comments(compose(name)))
    assert len(re.findall(WRITES_TO.format(table="flow_events"), code)) == 1


def test_crdb_flow_insert_is_one_insert_of_tasks_from_arrays() -> None:
    """CockroachDB has no binary COPY: a flow's nodes go in as one INSERT from arrays."""
    code = flat(strip_comments(compose("flow_insert")))
    assert len(re.findall(WRITES_TO.format(table="tasks"), code)) == 1
    assert "FROM unnest(%(ids)s::uuid[]" in code
    assert "CASE WHEN src.waits > 0 THEN 'waiting' ELSE 'available' END" in code
    assert code.endswith("SELECT ins.queue, NULL FROM ins WHERE ins.status = 'available' "
                         "GROUP BY ins.queue")
