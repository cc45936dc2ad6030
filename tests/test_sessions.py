"""What shardq's pooled connections set up for their sessions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

import shardq
from tests.conftest import Databases
from tests.helpers import claim_all

pytestmark = pytest.mark.server


def test_times_come_back_in_utc_whatever_the_servers_zone(databases: Databases) -> None:
    """A database whose default zone is +05:45: the times shardq reads back (a claimed
    task's, a task's record) are the same instants, as aware datetimes in UTC."""
    url = databases.create()
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET TimeZone = 'Asia/Kathmandu'").format(
            sql.Identifier(str(name))))
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.info.parameter_status("TimeZone") == "Asia/Kathmandu"
        server_now = conn.execute("SELECT now()").fetchone()
    assert server_now is not None
    assert server_now[0].utcoffset() == timedelta(hours=5, minutes=45)
    run_at = datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
    with shardq.Client(url) as client:
        task_id = client.enqueue("q", {"n": 1}, run_at=run_at)
        info = client.get(task_id)
        assert info is not None
        assert info.exec_time == run_at
        assert info.exec_time.tzinfo is UTC
        assert info.enqueued_at.tzinfo is UTC
        assert abs(info.enqueued_at - server_now[0]) < timedelta(minutes=5)
        (task,) = claim_all(client, "q")
        assert task.id == task_id
        assert task.exec_time.tzinfo is UTC
        assert task.enqueued_at.tzinfo is UTC
        assert task.exec_time > datetime.now(UTC)  # the lease's end, not a zone's shift away
