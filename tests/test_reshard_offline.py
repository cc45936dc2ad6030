"""A reshard on CockroachDB, offline: the statements of its build and retire steps, and
the layout they leave, composed as shardq.ops.reshard composes them (the real-cluster
test is in tests/test_cockroachdb_cluster.py)."""

from __future__ import annotations

import re

from shardq.core import sqlfiles
from shardq.core.dialect import COCKROACHDB, POSTGRESQL
from shardq.ops import reshard

SHARD_64 = "crdb_internal_exec_time_id_queue_status_shard_64"


def composed(name: str, bucket: str, index: str, count: int = 64) -> str:
    text = sqlfiles.query(name, "cockroachdb", bucket, identifiers=(("index", (index,)),),
                          literals=(("count", count),)).as_string(None)
    return " ".join(re.sub(r"--[^\n]*", "", text).split())


def test_a_layout_of_cockroachdb_is_the_shard_column_of_its_count() -> None:
    assert COCKROACHDB.layout_bucket(64, True) == SHARD_64
    assert COCKROACHDB.layout_bucket(64, False) == SHARD_64
    assert COCKROACHDB.layout_bucket(64, True) == COCKROACHDB.new_bucket_column(64)
    assert POSTGRESQL.layout_bucket(64, True) == "#64"
    assert POSTGRESQL.layout_bucket(64, False) == "bucket"


def test_the_claim_index_is_a_hash_sharded_index_of_the_keys_columns() -> None:
    """Its shard column is named as the primary key's would be with 64 buckets: the
    name the layout's claims use."""
    name = reshard.index_names(64, True)[0]
    assert composed("reshard_claim_index", SHARD_64, name) == (
        'CREATE INDEX IF NOT EXISTS "tasks_claim_64" ON shardq.tasks '
        "(queue, status, exec_time, id) USING HASH WITH (bucket_count = 64)")


def test_the_partial_indexes_lead_with_the_layouts_shard_column() -> None:
    _, leases, head_starts = reshard.index_names(64, True)
    assert composed("reshard_leases_index", SHARD_64, leases) == (
        'CREATE INDEX IF NOT EXISTS "tasks_leases_64" ON shardq.tasks '
        '("crdb_internal_exec_time_id_queue_status_shard_64", exec_time, id) '
        "WHERE status = 'locked'")
    assert composed("reshard_head_starts_index", SHARD_64, head_starts) == (
        'CREATE INDEX IF NOT EXISTS "tasks_head_starts_64" ON shardq.tasks '
        '("crdb_internal_exec_time_id_queue_status_shard_64", exec_time) '
        "WHERE pending_head_start_s > 0")


def test_an_index_is_dropped_by_its_tables_name() -> None:
    assert composed("reshard_drop_index", SHARD_64, "tasks_leases_64") == (
        'DROP INDEX IF EXISTS shardq.tasks@"tasks_leases_64"')


def test_the_layout_created_by_the_migrations_keeps_its_names() -> None:
    assert reshard.index_names(16, False) == ("tasks_pkey", "tasks_leases", "tasks_head_starts")


def test_claims_of_a_resharded_layout_name_its_shard_column() -> None:
    claim = sqlfiles.query("claim", "cockroachdb", SHARD_64, 10).as_string(None)
    assert f'"{SHARD_64}" = %(bucket)s' in claim
    assert "shard_16" not in claim
    assert "shardq.layout AS current" in claim  # the generation guard


def test_the_catalog_of_cockroachdb_has_no_stored_column_to_retire() -> None:
    text = sqlfiles.query("reshard_catalog", "cockroachdb", SHARD_64).as_string(None)
    assert "false AS bucket_key" in text
    assert "false AS bucket_column" in text
    assert "information_schema.statistics" in text
