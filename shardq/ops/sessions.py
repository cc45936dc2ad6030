"""The dashboard's login sessions, kept in ``shardq.sessions``.

A session's cookie holds a random id; the table holds its SHA-256, so a reader of the
table (a backup, a read-only role) cannot use a row to log in.  A session is refused
once idle for its ``idle_s`` or past its absolute expiry, whichever comes first, and
the janitor deletes it after its expiry (:func:`purge`).  It also holds the CSRF token
of its pages' forms, and the fingerprint of the credential it was opened with, so a
credential removed or replaced ends its sessions at their next request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from shardq.core.plan import Plan, Steps, plan
from shardq.core.statements import Statements

TOUCH_EVERY_S = 60.0  # a session's last use is written at most this often


@dataclass(frozen=True)
class Session:
    """A live session: who, with which role and credential, and its forms' CSRF token."""

    actor: str
    role: str
    credential: str
    csrf: str


@dataclass(frozen=True)
class Opened:
    """A new session: the cookie's value (shown once, never stored) and the session."""

    cookie: str
    session: Session


def hashed(cookie: str) -> str:
    """The id a session is stored under: the SHA-256 of its cookie, in hex."""
    return hashlib.sha256(cookie.encode()).hexdigest()


def open_session(st: Statements, actor: str, role: str, credential: str, *,
                 address: str | None, idle_s: float, max_s: float) -> Plan[Opened]:
    """Open a session of ``actor``; its cookie and CSRF token are new random values."""
    cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)

    def steps() -> Steps[Opened]:
        yield st.execute("session_open", {
            "id": hashed(cookie), "actor": actor, "role": role, "credential": credential,
            "csrf": csrf, "address": address, "idle_s": int(idle_s), "max_s": max_s})
        return Opened(cookie, Session(actor, role, credential, csrf))

    return plan(steps, idempotent=False)


def get(st: Statements, cookie: str) -> Plan[Session | None]:
    """The live session of ``cookie``, None when it never was, ended, idled out or
    expired; a session not touched for :data:`TOUCH_EVERY_S` is touched."""
    sid = hashed(cookie)

    def steps() -> Steps[Session | None]:
        rows = yield st.fetch("session_get", {"id": sid, "touch_s": TOUCH_EVERY_S})
        if not rows:
            return None
        actor, role, credential, csrf, stale = rows[0]
        if stale:
            yield st.execute("session_touch", {"id": sid})
        return Session(actor, role, credential, csrf)

    return plan(steps)


def close(st: Statements, cookie: str) -> Plan[bool]:
    """End the session of ``cookie``; whether there was one."""
    sid = hashed(cookie)

    def steps() -> Steps[bool]:
        return bool((yield st.fetch("session_close", {"id": sid})))

    return plan(steps)


def end_all(st: Statements, actor: str) -> Plan[int]:
    """End every session of ``actor``; how many."""
    def steps() -> Steps[int]:
        return len((yield st.fetch("sessions_end", {"actor": actor})))

    return plan(steps)


def purge(st: Statements, limit: int) -> Plan[int]:
    """Delete up to ``limit`` sessions past their expiry (the janitor's retention)."""
    def steps() -> Steps[int]:
        return len((yield st.fetch(st.query("sessions_purge", limit))))

    return plan(steps)
