"""Query plans with a 200k-task backlog: every claim reads one bounded index range of one bucket.

Checked for the custom plans psycopg gets on the first executions and for the
generic plan of a prepared statement (psycopg prepares a query on its fifth
execution), with locked, dead and future-scheduled rows present to prove that
no claim reads them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from shardq.core import sqlfiles
from shardq.ops.claims import LISTED
from tests.plans import (
    LIMIT,
    PARAMS,
    QUEUE,
    explain,
    explain_prepared,
    nodes,
    numbered,
    past_layout_guard,
)

pytestmark = pytest.mark.server

BACKLOG = 200_000


@pytest.fixture(scope="module")
def big(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """A database with 200k eligible tasks, 20k locked, 20k dead and 100k scheduled later."""
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time)
            SELECT %s, jsonb_build_object('n', g), now() - interval '1 hour' + g * interval '1 ms'
            FROM generate_series(1, %s) AS g""", (QUEUE, BACKLOG))
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time, status, lease_token, attempts)
            SELECT %s, '{}', now() + interval '10 min', 'locked', gen_random_uuid(), 1
            FROM generate_series(1, 20000)""", (QUEUE,))
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time, status)
            SELECT %s, '{}', now() - interval '2 hours', 'dead' FROM generate_series(1, 20000)""",
                     (QUEUE,))
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time, pending_head_start_s)
            SELECT %s, '{}', now() + interval '1 day', (g %% 2) * 60
            FROM generate_series(1, 100000) AS g""", (QUEUE,))
        conn.execute("VACUUM ANALYZE shardq.tasks")
        yield conn


def composed(conn: psycopg.Connection[Any], name: str, limit: int | None = LIMIT) -> str:
    return sqlfiles.query(name, "postgresql", "bucket", limit).as_string(conn)


def assert_bounded_range_scan(plan: list[dict[str, Any]], index: str, claimed: int) -> None:
    # The keyed-task check is a subplan that runs only for keyed rows: none here.
    keyed_check = [n for n in plan if n.get("Parent Relationship") == "SubPlan"]
    assert all(n["Actual Loops"] == 0 for n in keyed_check)
    plan = [n for n in past_layout_guard(plan) if n.get("Actual Loops", 1) > 0]
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds, kinds
    assert "Sort" not in kinds, kinds
    assert "Incremental Sort" not in kinds, kinds
    assert "Bitmap Heap Scan" not in kinds, kinds
    assert "Limit" in kinds, kinds
    scans = [n for n in plan if n["Node Type"] in ("Index Scan", "Index Only Scan")
             and n.get("Relation Name") == "tasks" and not _probe(n)]
    assert len(scans) == 1, kinds
    scan = scans[0]
    assert scan["Index Name"] == index
    if index == "tasks_pkey":
        assert "bucket =" in scan["Index Cond"]
    # The range yields exactly what is claimed: no locked, dead or future row is read and
    # filtered out, and the scan stops at the limit instead of reading the bucket.
    assert scan.get("Rows Removed by Filter", 0) == 0
    assert scan["Actual Rows"] == claimed
    assert scan["Shared Hit Blocks"] + scan.get("Shared Read Blocks", 0) < 200


def _probe(node: dict[str, Any]) -> bool:
    """Whether ``node`` is a once-per-statement check (an InitPlan of its own)."""
    return node.get("Parent Relationship") == "InitPlan"


def assert_grouped_probe(plan: list[dict[str, Any]]) -> None:
    """The plain claim's check for waiting grouped tasks: one probe of the (here empty)
    partial index tasks_groups_waiting per statement."""
    probes = [n for n in plan if n.get("Relation Name") == "tasks" and _probe(n)]
    assert [n["Index Name"] for n in probes] == ["tasks_groups_waiting"]
    assert probes[0]["Actual Loops"] == 1


def test_claim_custom_plan(big: psycopg.Connection[Any]) -> None:
    plan = explain(big, composed(big, "claim"), PARAMS)
    assert_bounded_range_scan(plan, "tasks_pkey", LIMIT)
    assert_grouped_probe(plan)
    cond = next(n for n in plan if n.get("Index Name") == "tasks_pkey")["Index Cond"]
    for column in ("bucket", "queue", "status", "exec_time"):
        assert column in cond
    assert "Tid Scan" in [n["Node Type"] for n in plan]  # rows updated through their ctid


def assert_pause_checked_once(plan: list[dict[str, Any]]) -> None:
    """The paused-queue check and the limits check are InitPlans: a probe of
    shardq.queues each per statement (a paused queue stops at the first)."""
    checks = [n for n in plan if n.get("Relation Name") == "queues"]
    assert 1 <= len(checks) <= 2, [n["Node Type"] for n in plan]
    assert all(c["Actual Loops"] <= 1 for c in checks)
    assert checks[0]["Actual Loops"] == 1
    assert all(c["Node Type"] in ("Index Scan", "Index Only Scan", "Seq Scan") for c in checks)


def test_claim_checks_the_pause_once(big: psycopg.Connection[Any]) -> None:
    plan = explain(big, composed(big, "claim"), PARAMS)
    assert_pause_checked_once(plan)
    assert_bounded_range_scan(plan, "tasks_pkey", LIMIT)


@pytest.mark.parametrize("until", [None, "1 hour"])
def test_paused_queue_claim_reads_no_task(big: psycopg.Connection[Any], until: str | None
                                          ) -> None:
    with big.transaction(force_rollback=True):
        big.execute("INSERT INTO shardq.queues (name, paused_at, paused_until) "
                    "VALUES (%s, now(), now() + %s::interval)", (QUEUE, until))
        row = big.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + composed(big, "claim"),
                          PARAMS).fetchone()
    assert row is not None
    plan = list(nodes(row[0][0]["Plan"]))
    assert_pause_checked_once(plan)
    scans = [n for n in plan if n.get("Relation Name") == "tasks" and "Scan" in n["Node Type"]
             and not _probe(n)]
    assert scans
    assert all(n["Actual Loops"] == 0 for n in scans)  # the range is never read
    assert plan[0]["Actual Rows"] == 0


@pytest.mark.parametrize("generic", [False, True])
def test_a_pause_that_ended_holds_up_no_claim(big: psycopg.Connection[Any],
                                              generic: bool) -> None:
    """A pause whose paused_until passed: still one check per statement, and the claim
    reads its range as for a queue never paused."""
    plan = explain_prepared(big, composed(big, "claim"), PARAMS, f"claim_ended_{int(generic)}",
                            generic=generic,
                            setup=("INSERT INTO shardq.queues (name, paused_at, paused_until) "
                                   "VALUES (%s, now() - interval '1 hour', now() - interval '1 s')",
                                   (QUEUE,)))
    assert_pause_checked_once(plan)
    assert_bounded_range_scan(plan, "tasks_pkey", LIMIT)
    assert plan[0]["Actual Rows"] == LIMIT


def test_claim_generic_plan(big: psycopg.Connection[Any]) -> None:
    big.execute("DEALLOCATE ALL")
    plan = explain_prepared(big, composed(big, "claim"), PARAMS, "claim_generic",
                            generic=True)
    assert_pause_checked_once(plan)
    assert_bounded_range_scan(plan, "tasks_pkey", LIMIT)


def test_drivers_prepared_claim_uses_the_index(big: psycopg.Connection[Any]) -> None:
    """psycopg's own server-side prepared statement, forced to its generic plan."""
    big.execute("SET plan_cache_mode = force_generic_plan")
    query = sqlfiles.query("claim", "postgresql", "bucket", LIMIT)
    # Committed claims on a bucket of its own: psycopg forgets statements prepared in a
    # transaction that rolls back.
    params = {**PARAMS, "bucket": 5}
    try:
        for _ in range(8):  # prepare_threshold is 5: the statement is now prepared
            assert len(big.execute(query, params).fetchall()) == LIMIT
        name, generic = big.execute(
            "SELECT name, generic_plans FROM pg_prepared_statements "
            "WHERE statement LIKE %s", ("%SKIP LOCKED%",)).fetchone() or (None, 0)
        assert name
        assert generic > 0
        # Explained on a bucket the claims above left alone: the old versions of the rows
        # they claimed are no part of what a claim reads (PostgreSQL 14 visits them).
        fresh = {**params, "bucket": 6}
        args = sql.SQL(", ").join(sql.Literal(fresh[n])
                                  for n in numbered(query.as_string(big))[1])
        plan = explain(big, sql.SQL("EXECUTE {}({})").format(sql.Identifier(name), args)
                       .as_string(big))
    finally:
        big.execute("RESET plan_cache_mode")
    assert_bounded_range_scan(plan, "tasks_pkey", LIMIT)


def test_empty_bucket_costs_one_probe(big: psycopg.Connection[Any]) -> None:
    plan = explain(big, composed(big, "claim"), {**PARAMS, "queue": "nothing-here"})
    scan = next(n for n in plan if n.get("Index Name") == "tasks_pkey")
    assert scan["Actual Rows"] == 0
    assert scan["Shared Hit Blocks"] + scan.get("Shared Read Blocks", 0) <= 4


@pytest.mark.parametrize(("name", "index"), [("janitor_rescue", "tasks_leases"),
                                             ("janitor_promote", "tasks_head_starts")])
def test_janitor_statements_read_their_partial_index(big: psycopg.Connection[Any], name: str,
                                                     index: str) -> None:
    # Make a batch of each kind due: leases expired, head starts due.
    with big.transaction(force_rollback=True):
        big.execute("UPDATE shardq.tasks SET exec_time = now() - interval '1 s' "
                    "WHERE bucket = 3 AND (status = 'locked' OR pending_head_start_s > 0) "
                    "AND id IN (SELECT id FROM shardq.tasks WHERE bucket = 3 AND "
                    "(status = 'locked' OR pending_head_start_s > 0) LIMIT 150)")
        for generic in (False, True):
            plan = explain_prepared(big, composed(big, name), PARAMS,
                                    f"{name}_{int(generic)}", generic=generic)
            scan = [n for n in plan if n.get("Index Name") == index]
            assert scan, [n["Node Type"] for n in plan]
            # The attempts' record looks workers up in shardq.workers, one row per worker
            # process, which may well be read whole; the tasks never are.
            assert [n for n in plan if n["Node Type"] == "Seq Scan"
                    and n.get("Relation Name") != "workers"] == []
            assert "Sort" not in [n["Node Type"] for n in plan]
            assert scan[0]["Actual Rows"] <= 150


def held(conn: psycopg.Connection[Any], n: int, bucket: int = 7) -> dict[str, list[Any]]:
    """The locators of ``n`` locked tasks of one bucket, as ack_many's parameters."""
    rows = conn.execute(
        "SELECT id, lease_token FROM shardq.tasks "
        "WHERE bucket = %s AND status = 'locked' LIMIT %s", (bucket, n)).fetchall()
    names = ("ids", "tokens")
    return {name: [r[i] for r in rows] for i, name in enumerate(names)}


@pytest.fixture(scope="module")
def stale(databases: Any) -> Iterator[psycopg.Connection[Any]]:
    """20k tasks locked since the statistics were taken (when none was)."""
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE shardq.tasks SET (autovacuum_enabled = false)")
        conn.execute("""INSERT INTO shardq.tasks (queue, payload)
                        SELECT %s, '{}' FROM generate_series(1, 50000)""", (QUEUE,))
        conn.execute("VACUUM ANALYZE shardq.tasks")
        conn.execute("""
            INSERT INTO shardq.tasks (queue, payload, exec_time, status, lease_token, attempts)
            SELECT %s, '{}', now() + interval '10 min', 'locked', gen_random_uuid(), 1
            FROM generate_series(1, 20000)""", (QUEUE,))
        yield conn


@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize("name", ["ack_many", "nack_many", "extend_many", "requeue_many"])
def test_settling_a_batch_probes_each_task(stale: psycopg.Connection[Any], name: str,
                                           generic: bool) -> None:
    """With 20k tasks locked, a batch of 100 costs 100 index probes, not a scan of them all."""
    big = stale
    params = {**PARAMS, **held(big, 100), "errors": [None] * 100, "retry_in_s": [None] * 100,
              "dead": [False] * 100, "by_s": [30.0] * 100, "run_ats": [None] * 100,
              "delays_s": [0.0] * 100, "outcome": "released"}
    plan = explain_prepared(big, composed(big, name, None), params,
                            f"settle_{name}_{int(generic)}", generic=generic)
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds
    # A durable task's checkpoints, deleted with it, may be found through a bitmap of
    # their key (steps_drop): the tasks never are.
    assert not [n for n in plan if n["Node Type"] == "Bitmap Heap Scan"
                and n.get("Relation Name") != "steps"], kinds
    assert "Hash Join" not in kinds
    probes = [n for n in plan if n.get("Relation Name") == "tasks"
              and n["Node Type"] in ("Index Scan", "Index Only Scan")]
    assert probes
    assert all(n["Actual Rows"] <= 1 for n in probes)  # one task per probe
    touched = sum(n.get("Shared Hit Blocks", 0) + n.get("Shared Read Blocks", 0) for n in probes)
    assert touched < 100 * 12  # a few pages per task, whatever the number locked


def test_claim_passes_over_follow_ups_only(databases: Any) -> None:
    """Keyed backlog: a claim reads the follow-ups of running keys, and nothing else."""
    url = databases.create(bucket_count=1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO shardq.tasks (queue, key, payload, status, exec_time, lease_token)
            SELECT 'k', 'key' || g, '{}', 'locked', now() + interval '1 min', gen_random_uuid()
            FROM generate_series(1, 300) AS g""")  # 300 keys running...
        conn.execute("""
            INSERT INTO shardq.tasks (queue, key, payload, exec_time)
            SELECT 'k', 'key' || g, '{}', now() - interval '1 hour' + g * interval '1 s'
            FROM generate_series(1, 300) AS g""")  # ...each with a follow-up, oldest first
        conn.execute("""
            INSERT INTO shardq.tasks (queue, key, payload, exec_time)
            SELECT 'k', CASE WHEN g % 2 = 0 THEN 'free' || g END, '{}', now() - interval '1 min'
            FROM generate_series(1, 50000) AS g""")  # claimable: half keyed, half not
        conn.execute("VACUUM ANALYZE shardq.tasks")
        plan = explain(conn, composed(conn, "claim"), {**PARAMS, "bucket": 0, "queue": "k"})
    scan = next(n for n in plan if n.get("Index Name") == "tasks_pkey")
    assert scan["Actual Rows"] == LIMIT
    assert scan["Rows Removed by Filter"] == 300  # exactly the follow-ups of running keys
    # The keyed check probes tasks_running_keys once per keyed row it meets, rather than
    # reading every running task once (a hashed subplan: its cost would grow with them).
    [check] = [n for n in plan if n.get("Parent Relationship") == "SubPlan"]
    assert check.get("Index Name") == "tasks_running_keys"
    assert check["Actual Loops"] > 300


@pytest.mark.parametrize(("order", "status", "bounds"), [
    ("order_earliest", "available", {"after": None, "before": "now"}),  # waiting longest
    ("order_latest", "available", {"after": None, "before": "now"}),    # became due last
    ("order_earliest", "available", {"after": "now", "before": None}),  # scheduled next
    ("order_earliest", "locked", {"after": None, "before": None}),      # running
    ("order_latest", "dead", {"after": None, "before": None}),          # dead letters
])
def test_dashboard_lists_read_a_bounded_range_per_bucket(big: psycopg.Connection[Any],
                                                         order: str, status: str,
                                                         bounds: dict[str, Any]) -> None:
    now = big.execute("SELECT now()").fetchone()
    assert now is not None
    values = {k: now[0] if v == "now" else v for k, v in bounds.items()}
    params = {**PARAMS, **values, "status": status, "limit": 20, "bucket_count": 16}
    query = sqlfiles.query("tasks_list", "postgresql", "bucket",
                           fragments=(("order", order),)).as_string(big)
    plan = explain(big, query, params)
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds, kinds
    assert "Bitmap Heap Scan" not in kinds, kinds
    scans = [n for n in plan if n.get("Relation Name") == "tasks"]
    [scan] = scans
    # Running tasks may come from the partial index of leases, which holds them alone.
    assert scan["Index Name"] in (("tasks_pkey", "tasks_leases") if status == "locked"
                                  else ("tasks_pkey",))
    assert scan["Actual Loops"] == 16  # one range per bucket
    assert scan["Actual Rows"] <= 20  # per loop: the range stops at the limit
    assert scan.get("Rows Removed by Filter", 0) == 0
    # Only the buckets' few rows are sorted (the merge), never the backlog.
    for sort in (n for n in plan if n["Node Type"] == "Sort"):
        assert sort["Actual Rows"] <= 16 * 20


@pytest.mark.parametrize("generic", [False, True])
def test_queue_purge_reads_one_bounded_range(big: psycopg.Connection[Any],
                                             generic: bool) -> None:
    plan = explain_prepared(big, composed(big, "queue_purge"), PARAMS,
                            f"purge_{int(generic)}", generic=generic)
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds, kinds
    assert "Sort" not in kinds, kinds
    [scan] = [n for n in plan if n.get("Index Name") == "tasks_pkey"]
    assert "bucket =" in scan["Index Cond"]
    assert scan["Actual Rows"] == LIMIT


@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize(("bounds", "found"), [
    ({"older_than_s": 3600.0, "newer_than_s": None}, LIMIT),  # the fixture's died 2 h ago
    ({"older_than_s": 0.0, "newer_than_s": 60.0}, 0),  # none died in the last minute
])
def test_dead_redrive_reads_a_bounded_range_per_bucket(big: psycopg.Connection[Any],
                                                       generic: bool, bounds: dict[str, Any],
                                                       found: int) -> None:
    """The dead tasks a redrive (or its dry run) finds: the queue's dead range of each
    bucket in turn, both time bounds in the index condition, stopping at the limit."""
    now = big.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    newer = bounds["newer_than_s"]
    params = {**PARAMS, "error": None, "bucket_count": 16,
              "before": now - timedelta(seconds=bounds["older_than_s"]),
              "after": None if newer is None else now - timedelta(seconds=newer)}
    plan = explain_prepared(big, composed(big, "dead_match"), params,
                            f"dead_match_{int(generic)}_{found}", generic=generic)
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds, kinds
    # The primary key's range of one bucket's dead tasks in the time range: read in index
    # order, or (the planner's choice where the range is small, as here: 1,250 dead
    # tasks a bucket) as a bitmap of that range, sorted.  Either way the range, no more.
    [scan] = [n for n in plan if n.get("Index Name") == "tasks_pkey"
              and n.get("Parent Relationship") != "SubPlan"]
    for column in ("bucket", "queue", "status", "exec_time"):
        assert column in scan["Index Cond"]
    assert scan["Index Cond"].count("exec_time") == 2  # both ends of the time range
    # A bucket holds some 1,250 of the 20k dead tasks: the first gives the whole batch.
    assert scan["Actual Loops"] == (1 if found else 16)
    assert scan["Actual Rows"] * scan["Actual Loops"] <= (2 * 20_000 // 16 if found else 0)
    assert plan[0]["Actual Rows"] == found


# -- results -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kept(big: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """``big`` with 200k kept results, half of them expired."""
    big.execute("""
        INSERT INTO shardq.results (id, queue, value, attempts, enqueued_at, finished_at,
                                    expires_at)
        SELECT gen_random_uuid(), %s, jsonb_build_object('n', g), 1, now() - interval '1 hour',
               now() - interval '30 min', now() + (g - 100000) * interval '1 s'
        FROM generate_series(1, 200000) AS g""", (QUEUE,))
    big.execute("VACUUM ANALYZE shardq.results")
    return big


@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize("which", ["result", "task"])
def test_a_result_lookup_probes_one_index_per_table(kept: psycopg.Connection[Any],
                                                    which: str, generic: bool) -> None:
    # A result a day from expiring: some of the fixture's expire while the tests run.
    find = {"result": "SELECT id FROM shardq.results "
                      "WHERE expires_at > now() + interval '1 day' LIMIT 1",
            "task": "SELECT id FROM shardq.tasks LIMIT 1"}[which]
    [(task_id,)] = kept.execute(find).fetchall()
    plan = explain_prepared(kept, composed(kept, "result", None), {**PARAMS, "id": task_id},
                            f"result_{which}_{int(generic)}", generic=generic)
    scans = [n for n in plan if n.get("Relation Name") in ("results", "tasks")]
    assert {(n["Relation Name"], n["Node Type"], n.get("Index Name")) for n in scans} <= {
        ("results", "Index Scan", "results_pkey"), ("tasks", "Index Scan", "tasks_ids")}
    assert len(scans) == 2
    assert sum(n["Actual Rows"] for n in scans) == 1
    assert plan[0]["Actual Rows"] == 1


def test_the_janitor_reads_only_expired_results(kept: psycopg.Connection[Any]) -> None:
    plan = explain(kept, composed(kept, "janitor_results"), PARAMS)
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds, kinds
    assert "Sort" not in kinds, kinds
    [scan] = [n for n in plan if n.get("Index Name") == "results_expiry"]
    assert scan["Actual Rows"] == LIMIT
    assert plan[0]["Actual Rows"] == LIMIT


def test_an_ack_keeping_results_probes_each_task(stale: psycopg.Connection[Any]) -> None:
    """The ack of 100 tasks that keep results, with 20k locked: one probe per task."""
    located = held(stale, 100)
    params = {**PARAMS, **located, "kept_ids": located["ids"], "kept_values": ["1"] * 100,
              "kept_errors": [None] * 100, "keep_s": [60.0] * 100}
    plan = explain(stale, composed(stale, "ack_results", None), params)
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds, kinds
    assert not [n for n in plan if n["Node Type"] == "Bitmap Heap Scan"
                and n.get("Relation Name") != "steps"], kinds  # as above
    probes = [n for n in plan if n.get("Relation Name") == "tasks"
              and n["Node Type"] in ("Index Scan", "Index Only Scan")]
    assert probes
    assert all(n["Actual Rows"] <= 1 for n in probes)
    inserted = [n for n in plan if n.get("Relation Name") == "results"]
    assert [n["Node Type"] for n in inserted] == ["ModifyTable"]
    assert inserted[0]["Actual Rows"] == 100  # each result written


def composed_listed(conn: psycopg.Connection[Any]) -> str:
    """The claim of several buckets (claim_buckets), as a worker composes it."""
    return sqlfiles.query("claim_buckets", "postgresql", "bucket", LIMIT,
                          fragments=tuple(LISTED.items())).as_string(conn)


@pytest.mark.parametrize("generic", [False, True])
def test_a_claim_of_several_buckets_reads_one_bounded_range_of_each(
        big: psycopg.Connection[Any], generic: bool) -> None:
    """The buckets listed are read one after the other, each one index range of
    tasks_pkey in exec_time order; the first listed holds more than the limit, so the
    claim stops inside it and never reads the others."""
    plan = explain_prepared(big, composed_listed(big), {**PARAMS, "buckets": [3, 5, 9]},
                            f"claim_listed_{int(generic)}", generic=generic)
    assert_pause_checked_once(plan)
    assert_bounded_range_scan(plan, "tasks_pkey", LIMIT)
    scan = next(n for n in plan if n.get("Index Name") == "tasks_pkey")
    assert "bucket = listed.bucket" in scan["Index Cond"]
    assert scan["Actual Loops"] == 1  # the limit was reached in the first bucket
    assert plan[0]["Actual Rows"] == LIMIT


def test_a_claim_of_several_buckets_visits_each_listed_range_once(
        big: psycopg.Connection[Any]) -> None:
    """Buckets holding nothing due for the queue: each listed range is looked at once,
    and nothing else is read."""
    params = {**PARAMS, "queue": "nothing-here", "buckets": [3, 5, 9, 12]}
    plan = past_layout_guard(explain(big, composed_listed(big), params))
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds, kinds
    assert "Sort" not in kinds, kinds
    scans = [n for n in plan if n.get("Index Name") == "tasks_pkey"]
    assert len(scans) == 1
    assert scans[0]["Actual Loops"] == 4
    assert scans[0]["Actual Rows"] == 0
    assert scans[0]["Shared Hit Blocks"] + scans[0].get("Shared Read Blocks", 0) < 40


def test_the_janitors_probe_reads_one_entry_of_each_bucket_and_partial_index(
        big: psycopg.Connection[Any]) -> None:
    """Nothing is due (the leases end in ten minutes, the head starts tomorrow): each
    bucket costs one descent of tasks_leases and one of tasks_head_starts, bounded by
    the bucket and the time (the entries of other tests' rolled-back updates may still
    be stepped over, so the pages read are not counted)."""
    text = sqlfiles.query("janitor_due", "postgresql", "bucket").as_string(big)
    params = {**PARAMS, "buckets": list(range(16))}
    plan = explain(big, text, params)
    kinds = [n["Node Type"] for n in plan]
    assert "Seq Scan" not in kinds, kinds
    assert plan[0]["Actual Rows"] == 16
    probes = {n["Index Name"]: n for n in plan if n.get("Relation Name") == "tasks"}
    assert set(probes) == {"tasks_leases", "tasks_head_starts"}
    for probe in probes.values():
        assert probe["Actual Loops"] == 16
        assert probe["Actual Rows"] == 0
        assert "bucket = listed.bucket" in probe["Index Cond"]
        assert "exec_time <=" in probe["Index Cond"]
