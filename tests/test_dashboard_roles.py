"""The dashboard's people: named credentials with roles, each action allowed or refused
(403) by role through the JSON API and the pages, each recorded in the audit trail in
the action's own transaction (and none left by one that rolled back), sessions that
end (idle, age, logout, a removed credential), the login throttle, a trusted proxy's
users and an embedding app's resolver."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg
import pytest
from psycopg import sql

import shardq
from shardq.web import DashboardConfig, create_app, users
from shardq.web.roles import ACTIONS, ROLES, User
from tests.helpers import claim_all, query, scalar
from tests.web import call, log_in, serving

app = shardq.App()  # its function only names the flows' tasks


@app.task
def step(n: int) -> int:
    return n


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def people(tmp_path: Path) -> dict[str, Any]:
    """A users file with one user of each role; their tokens by role."""
    path = str(tmp_path / "users")
    tokens: dict[str, Any] = {role: users.add(path, f"{role}-1", role) for role in ROLES}
    return {"path": path, **tokens}


@pytest.fixture
def site(timed: shardq.Client, people: dict[str, Any]) -> Iterator[str]:
    config = DashboardConfig(users_file=people["path"], login_attempts=100)
    with serving(create_app(timed, config)) as url:
        yield url


def trail(dsn: str, **where: str) -> list[dict[str, Any]]:
    """The audit rows matching ``where`` (column = value), oldest first."""
    rows = query(dsn, "SELECT actor, role, via, action, queue, task_id, params, outcome, "
                      "detail, address FROM shardq.audit ORDER BY at, detail")
    names = ("actor", "role", "via", "action", "queue", "task_id", "params", "outcome",
             "detail", "address")
    found = [dict(zip(names, row, strict=True)) for row in rows]
    return [r for r in found if all(str(r[k]) == v for k, v in where.items())]


def make_dead(client: shardq.Client, queue: str) -> uuid.UUID:
    task_id = client.enqueue(queue, {"n": 1})
    [task] = claim_all(client, queue)
    client.nack(task, "boom", dead=True)
    return task_id


def request_for(action: str, client: shardq.Client) -> tuple[str, dict[str, Any] | None, str]:
    """The JSON API call of ``action`` on fresh things of its own: (path, body, queue)."""
    queue = fresh(action.replace("_", "-"))
    if action in ("pause", "resume", "purge", "limits"):
        client.enqueue(queue, {})
        if action == "resume":
            client.pause(queue)
        verb = "limits" if action == "limits" else action
        body = {"max_running": 3} if verb == "limits" else None
        return f"/api/queues/{queue}/{verb}", body, queue
    if action == "cancel":
        return f"/api/tasks/{client.enqueue(queue, {})}/cancel", None, queue
    if action == "cancel_flow":
        s = step.si(1).set(queue=queue)
        handle = client.enqueue_flow(shardq.chain(s, s))
        return f"/api/flows/{handle.id}/cancel", None, queue
    if action in ("retry_dead", "purge_dead"):
        make_dead(client, queue)
        return f"/api/dead/{action.removesuffix('_dead')}", {"queue": queue}, queue
    if action == "redrive":
        make_dead(client, queue)
        return "/api/dead/redrive", {"queue": queue}, queue
    assert action == "audit"
    return "/api/audit", None, queue


@pytest.mark.parametrize("role", ROLES)
def test_each_role_may_do_what_its_role_allows_and_nothing_else(
        site: str, timed: shardq.Client, people: dict[str, Any], dsn: str, role: str) -> None:
    user = User(f"{role}-1", role)  # type: ignore[arg-type]
    for action in ACTIONS:
        path, body, queue = request_for(action, timed)
        method = "GET" if action == "audit" else "POST"
        reply = call(site + path, method, body if method == "POST" else None,
                     token=people[role])
        if user.may(action):
            assert reply.status == 200, (role, action, reply.text)
            if action != "audit":
                [row] = trail(dsn, action=action, actor=user.name, outcome="ok")
                assert (row["role"], row["via"], row["address"]) == (role, "api", "127.0.0.1")
                assert row["detail"] == reply.json()["message"]
        else:
            assert reply.status == 403, (role, action, reply.text)
            assert f"it needs the role {ACTIONS[action]}" in reply.json()["error"]
            [row] = trail(dsn, action=action, actor=user.name, outcome="refused")
            assert row["role"] == role
            if action == "pause":  # nothing a refused caller asked for happened
                assert queue not in timed.paused()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM shardq.audit")


def test_reads_need_a_credential_and_viewers_see_payloads_masked(
        site: str, timed: shardq.Client, people: dict[str, Any]) -> None:
    queue = fresh("reads")
    task_id = timed.enqueue(queue, {"card": "4111 1111 1111 1111", "lines": [1, 2]})
    assert call(f"{site}/api/queues").status == 401
    assert call(f"{site}/api/queues", token="viewer-1.wrong").status == 403
    page = call(f"{site}/queues/{queue}")
    assert page.status == 303  # to the login page
    assert "/login?next=" in page.headers["location"]
    viewed = call(f"{site}/api/tasks/{task_id}", token=people["viewer"]).json()
    assert viewed["payload"] == {"card": "***", "lines": ["***", "***"]}  # the shape only
    listed = call(f"{site}/api/queues/{queue}", token=people["viewer"]).text
    assert "4111" not in listed
    operated = call(f"{site}/api/tasks/{task_id}", token=people["operator"]).json()
    assert operated["payload"] == {"card": "4111 1111 1111 1111", "lines": [1, 2]}


def test_an_audit_row_is_written_in_the_action_s_transaction(
        site: str, timed: shardq.Client, people: dict[str, Any], dsn: str) -> None:
    queue = fresh("same-tx")
    timed.enqueue(queue, {})
    assert call(f"{site}/api/queues/{queue}/pause", "POST", token=people["operator"]
                ).status == 200
    # The row of shardq.queues the pause wrote and the audit row share the transaction id.
    paused = scalar(dsn, "SELECT xmin::text FROM shardq.queues WHERE name = %s", [queue])
    recorded = scalar(dsn, "SELECT xmin::text FROM shardq.audit WHERE queue = %s", [queue])
    assert paused == recorded


def test_an_action_whose_transaction_rolls_back_leaves_no_audit_row(
        site: str, timed: shardq.Client, people: dict[str, Any], dsn: str) -> None:
    queue = fresh("rolled-back")
    timed.enqueue(queue, {})
    # A real fault at commit: a deferred constraint trigger fails the transaction once
    # everything in it ran (the pause and its record).
    name = f"fail_{queue.replace('-', '_')}"
    function, trigger = sql.Identifier("shardq", name), sql.Identifier(name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("""
            CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
            LANGUAGE plpgsql AS $$ BEGIN
                IF NEW.queue = {queue} THEN RAISE EXCEPTION 'refused at commit'; END IF;
                RETURN NULL; END $$""").format(function=function, queue=sql.Literal(queue)))
        conn.execute(sql.SQL("""
            CREATE CONSTRAINT TRIGGER {trigger} AFTER INSERT
            ON shardq.audit DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
            EXECUTE FUNCTION {function}()""").format(trigger=trigger, function=function))
    try:
        reply = call(f"{site}/api/queues/{queue}/pause", "POST", token=people["operator"])
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TRIGGER {} ON shardq.audit").format(trigger))
            conn.execute(sql.SQL("DROP FUNCTION {}()").format(function))
    assert reply.status >= 400
    assert queue not in timed.paused()
    assert trail(dsn, queue=queue) == []


def test_pages_act_by_role_with_the_session_s_csrf_field(
        site: str, timed: shardq.Client, people: dict[str, Any], dsn: str) -> None:
    queue = fresh("pages")
    timed.enqueue(queue, {})
    viewer = log_in(site, people["viewer"])
    page = call(f"{site}/queues/{queue}", cookie=viewer.cookie).text
    assert 'id="pause"' not in page  # a viewer is shown no form
    assert "viewer-1 (viewer)" in page
    url = f"{site}/actions/queues/{queue}/pause"
    refused = call(url, "POST", form=urlencode({"csrf": viewer.csrf}).encode(),
                   cookie=viewer.cookie)
    assert refused.status == 403
    [row] = trail(dsn, action="pause", outcome="refused")
    assert (row["actor"], row["via"]) == ("viewer-1", "page")
    operator = log_in(site, people["operator"])
    page = call(f"{site}/queues/{queue}", cookie=operator.cookie).text
    assert 'id="pause"' in page
    assert 'id="purge"' not in page  # purging is an admin's
    done = call(url, "POST", form=urlencode({"csrf": operator.csrf}).encode(),
                cookie=operator.cookie)
    assert done.status == 303
    assert queue in timed.paused()
    [row] = trail(dsn, action="pause", outcome="ok")
    assert (row["actor"], row["via"]) == ("operator-1", "page")
    assert call(f"{site}/audit", cookie=operator.cookie).status == 403
    admin = log_in(site, people["admin"])
    audit_page = call(f"{site}/audit?{urlencode({'queue': queue})}", cookie=admin.cookie)
    assert audit_page.status == 200
    assert "operator-1" in audit_page.text
    assert "refused" in audit_page.text
    logins = trail(dsn, action="login", outcome="ok")
    assert sorted(r["actor"] for r in logins) == ["admin-1", "operator-1", "viewer-1"]


def test_sessions_end_idle_old_at_logout_and_with_their_credential(
        timed: shardq.Client, people: dict[str, Any], clock: shardq.ManualClock,
        dsn: str) -> None:
    config = DashboardConfig(users_file=people["path"], session_idle_s=600,
                             session_max_s=3600)
    with serving(create_app(timed, config)) as site:
        me = log_in(site, people["operator"])
        assert call(f"{site}/", cookie=me.cookie).status == 200
        clock.advance(601)  # idle too long
        assert call(f"{site}/", cookie=me.cookie).status == 303
        me = log_in(site, people["operator"])
        for _ in range(7):  # used every 9 minutes: never idle, but older than an hour
            clock.advance(540)
            assert call(f"{site}/api/queues").status == 401
            last = call(f"{site}/", cookie=me.cookie).status
        assert last == 303
        me = log_in(site, people["operator"])
        out = call(f"{site}/logout", "POST", cookie=me.cookie)
        assert out.status == 303
        assert call(f"{site}/", cookie=me.cookie).status == 303
        assert trail(dsn, action="logout", outcome="ok")
        me = log_in(site, people["admin"])
        assert call(f"{site}/", cookie=me.cookie).status == 200
        users.remove(people["path"], "admin-1")
        assert call(f"{site}/", cookie=me.cookie).status == 303
        assert call(f"{site}/api/queues", token=people["admin"]).status == 403
    assert scalar(dsn, "SELECT count(*) FROM shardq.sessions WHERE actor = 'admin-1'") == 0


def test_logins_are_limited_per_address(timed: shardq.Client, people: dict[str, Any],
                                        dsn: str) -> None:
    config = DashboardConfig(users_file=people["path"], login_attempts=3)
    with serving(create_app(timed, config)) as site:
        wrong = urlencode({"token": "operator-1.nope"}).encode()
        assert [call(f"{site}/login", "POST", form=wrong).status for _ in range(3)] \
            == [403, 403, 403]
        right = urlencode({"token": people["operator"]}).encode()
        throttled = call(f"{site}/login", "POST", form=right)
        assert throttled.status == 429
        assert "too many attempts" in throttled.text
    assert len(trail(dsn, action="login", outcome="refused")) == 4


def test_a_trusted_proxy_names_the_user_and_others_are_refused(
        timed: shardq.Client, dsn: str) -> None:
    queue = fresh("proxied")
    timed.enqueue(queue, {})
    config = DashboardConfig(proxy_user_header="X-Forwarded-User",
                             proxy_role_header="X-Forwarded-Groups")
    with serving(create_app(timed, config)) as site:
        headers = {"X-Forwarded-User": "ada@example.com",
                   "X-Forwarded-Groups": "staff,operator", "X-Forwarded-For": "198.51.100.7",
                   "X-Forwarded-Proto": "https"}
        page = call(f"{site}/queues/{queue}", headers=headers)
        assert page.status == 200
        assert "ada@example.com (operator)" in page.text
        cookie = page.headers["set-cookie"]
        assert "secure" in cookie.lower().split("; ")  # the proxy spoke HTTPS
        session = cookie.split(";")[0]
        csrf = page.text.split('name="shardq-csrf" content="')[1].split('"')[0]
        done = call(f"{site}/actions/queues/{queue}/pause", "POST", headers=headers,
                    form=urlencode({"csrf": csrf}).encode(), cookie=session)
        assert done.status == 303
        [row] = trail(dsn, action="pause", outcome="ok")
        assert (row["actor"], row["address"]) == ("ada@example.com", "198.51.100.7")
        # Another user behind the same cookie gets no session of the first's.
        other = {**headers, "X-Forwarded-User": "eve@example.com",
                 "X-Forwarded-Groups": "operator"}
        forged = call(f"{site}/actions/queues/{queue}/resume", "POST", headers=other,
                      form=urlencode({"csrf": csrf}).encode(), cookie=session)
        assert forged.status == 403
        # The proxy's cookies are the browser's credential: another site's page may not
        # act with them (a script, which sends no Origin, may).
        evil = call(f"{site}/api/queues/{queue}/resume", "POST",
                    headers={**headers, "Origin": "https://evil.example"})
        assert evil.status == 403
        assert trail(dsn, action="resume", outcome="refused")
        assert queue in timed.paused()
        no_role = {**headers, "X-Forwarded-Groups": "staff"}
        assert call(f"{site}/api/queues", headers=no_role).status == 403
        assert call(f"{site}/api/queues").status == 401  # no user named
    far = DashboardConfig(proxy_user_header="X-Forwarded-User",
                          proxy_default_role="viewer", trusted_proxies="10.0.0.5")
    with serving(create_app(timed, far)) as site:
        refused = call(f"{site}/api/queues", headers={"X-Forwarded-User": "ada"})
        assert refused.status == 403
        assert "trusted proxies" in refused.json()["error"]


def test_an_embedding_app_s_resolver_decides(timed: shardq.Client, dsn: str) -> None:
    queue = fresh("resolved")
    timed.enqueue(queue, {})

    async def resolver(request: Any) -> User | None:
        name = request.headers.get("X-Test-User")
        return User(name, "admin") if name else None

    with serving(create_app(timed, resolver=resolver)) as site:
        assert call(f"{site}/api/queues").status == 401
        done = call(f"{site}/api/queues/{queue}/purge", "POST",
                    headers={"X-Test-User": "app-admin"})
        assert done.status == 200
    [row] = trail(dsn, action="purge", outcome="ok")
    assert (row["actor"], row["role"]) == ("app-admin", "admin")


def test_the_janitor_keeps_the_trail_audit_keep_s_and_deletes_expired_sessions(
        site: str, timed: shardq.Client, people: dict[str, Any], clock: shardq.ManualClock,
        dsn: str) -> None:
    from shardq.loops.janitor import janitor_pass

    queue = fresh("kept")
    timed.enqueue(queue, {})
    call(f"{site}/api/queues/{queue}/pause", "POST", token=people["operator"])
    log_in(site, people["viewer"])
    clock.advance(13 * 3600)  # past the session's 12 hours
    report = janitor_pass(timed.statements)
    assert (report.expired_sessions, report.expired_audit) == (1, 0)
    kept = len(trail(dsn))
    assert kept == 2  # the pause and the login
    clock.advance(366 * 86400)
    assert janitor_pass(timed.statements).expired_audit == kept
    assert trail(dsn) == []


def test_the_cli_s_actions_are_recorded_and_shardq_audit_lists_them(
        client: shardq.Client, dsn: str) -> None:
    import json

    from tests.helpers import shardq_cli

    queue = fresh("cli")
    client.enqueue(queue, {})
    shardq_cli("queue", "pause", queue, "--dsn", dsn)
    shardq_cli("queue", "purge", queue, "--yes", "--dsn", dsn)
    [row] = trail(dsn, action="pause", queue=queue)
    assert (row["via"], row["outcome"]) == ("cli", "ok")
    assert "@" in row["actor"]
    assert row["role"].startswith("database:")
    lines = shardq_cli("audit", "--queue", queue, "--json", "--dsn", dsn).stdout.splitlines()
    assert [json.loads(line)["action"] for line in lines] == ["purge", "pause"]
    assert json.loads(lines[0])["detail"] == f"purged 1 waiting task(s) of {queue}"


def test_bad_users_files_and_settings_are_one_line_errors(tmp_path: Path) -> None:
    from shardq.core.errors import ConfigError

    path = tmp_path / "users"
    path.write_text("ada:owner:scrypt$1$2$3$4$5\n")
    path.chmod(0o600)
    with pytest.raises(ConfigError, match=r"line 1: no role 'owner'"):
        users.read(str(path))
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        users.read(str(path))
    with pytest.raises(ConfigError, match="give one of --token-file, --users-file"):
        DashboardConfig(token_file="t", users_file="u")
    with pytest.raises(ConfigError, match="needs --proxy-role-header or"):
        DashboardConfig(proxy_user_header="X-Forwarded-User")
    with pytest.raises(ConfigError, match="is not an address or a network"):
        DashboardConfig(trusted_proxies="10.0.0.5,proxy.internal")
    users.add(str(tmp_path / "more"), "ada", "viewer")
    with pytest.raises(ConfigError, match="already in"):
        users.add(str(tmp_path / "more"), "ada", "viewer")
