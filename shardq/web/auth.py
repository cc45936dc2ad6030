"""Who a request comes from, and whether they may act.

Four ways to know who a request comes from, one per dashboard:

- **open** (no credential given): anyone reads, no one acts;
- **one token** (``--token-file``): whoever holds it is ``admin``; others read;
- **named credentials** (``--users-file``): every page and call needs one, and its
  role says what it may do (:mod:`shardq.web.users`, :mod:`shardq.web.roles`);
- **a resolver**: a trusted authenticating proxy's headers
  (:class:`shardq.web.proxy.ProxyIdentity`), or a function of an app that mounts the
  dashboard (request -> :class:`~shardq.web.roles.User` or None).

The JSON API takes ``Authorization: Bearer <token>``.  The pages keep a session:
a random id in an HttpOnly, SameSite=Strict cookie (``Secure`` over HTTPS), its hash
and its forms' CSRF token in ``shardq.sessions`` (:mod:`shardq.ops.sessions`); a
login opens one, logout ends it, and so do idleness, age, and the removal of the
credential it was opened with.  Behind a resolver a session is opened on the first
page, for its forms' CSRF token, and holds only while the resolver names the same
user.  Logins are limited per address (:class:`Throttle`).
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request

from shardq.core.statements import Statements
from shardq.ops import audit, sessions
from shardq.ops.sessions import Session
from shardq.web.config import DashboardConfig
from shardq.web.roles import User, role_of
from shardq.web.users import UsersFile

COOKIE = "shardq_session"
Resolver = Callable[[Request], "User | Awaitable[User | None] | None"]
Mode = Literal["open", "token", "users", "resolver"]
ADMIN = "admin"  # the one token's user


@dataclass(frozen=True)
class Caller:
    """What a request was found to come from: a user (None: anonymous), its page session
    (None for the API and anonymous callers), and the session cookie to set when one was
    opened for it."""

    user: User | None
    session: Session | None = None
    new_cookie: str | None = None


class Throttle:
    """At most ``attempts`` logins per address per ``window_s`` (in this process)."""

    ADDRESSES_MOST = 10_000  # addresses remembered; the oldest are forgotten first

    def __init__(self, attempts: int, window_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.attempts, self.window_s, self.clock = attempts, window_s, clock
        self._tries: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, address: str) -> float:
        """Count an attempt from ``address``: 0 when allowed, else the seconds to wait."""
        now = self.clock()
        with self._lock:
            tries = self._tries.pop(address, None) or deque()
            while tries and tries[0] <= now - self.window_s:
                tries.popleft()
            self._tries[address] = tries  # the newest address last: forgotten last
            if len(tries) >= self.attempts:
                return tries[0] + self.window_s - now
            tries.append(now)
            while len(self._tries) > self.ADDRESSES_MOST:
                del self._tries[next(iter(self._tries))]
            return 0.0


class Authority:
    """Finds who requests come from, opens and ends their sessions."""

    def __init__(self, config: DashboardConfig, *, token: str | None = None,
                 users: UsersFile | None = None, resolver: Resolver | None = None) -> None:
        if sum(x is not None for x in (token, users, resolver)) > 1:
            raise ValueError("give one of token, users and resolver")
        self.config = config
        self._token = token.encode() if token else None
        self.users, self.resolver = users, resolver
        self.mode: Mode = ("token" if token else "users" if users else
                           "resolver" if resolver else "open")
        self.throttle = Throttle(config.login_attempts, config.login_window_s)

    @property
    def acts(self) -> bool:
        """Whether any action is served."""
        return self.mode != "open" and not self.config.read_only

    @property
    def open_reads(self) -> bool:
        """Whether anonymous requests may read (open and one-token dashboards)."""
        return self.mode in ("open", "token")

    @property
    def logs_in(self) -> bool:
        """Whether the pages have a login form (a token to type)."""
        return self.mode in ("token", "users")

    def credential(self, token: str) -> tuple[User, str] | None:
        """The user ``token`` logs in as, with the fingerprint of its credential."""
        if self._token is not None:
            if hmac.compare_digest(token.encode(), self._token):
                return User(ADMIN, "admin"), _fingerprint(self._token)
            return None
        found = self.users.check(token) if self.users is not None else None
        return (found.user, found.fingerprint) if found is not None else None

    def _still(self, session: Session) -> bool:
        # The credential a session was opened with must still be there, unchanged.
        if self._token is not None:
            return hmac.compare_digest(session.credential, _fingerprint(self._token))
        if self.users is not None:
            return self.users.current(session.actor, session.credential) is not None
        return True

    async def identify(self, st: Statements, request: Request, *, page: bool) -> Caller:
        """Who ``request`` comes from (for a ``page``, with its session)."""
        if self.resolver is not None:
            user = self.resolver(request)
            if inspect.isawaitable(user):
                user = await user
            if user is None:
                return Caller(None)
            if not page:
                return Caller(user)
            return await run_in_threadpool(self._resolved_session, st, request, user)
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            found = await run_in_threadpool(self.credential, token.strip())
            if found is None:
                raise HTTPException(403, "wrong token", headers={"WWW-Authenticate": "Bearer"})
            return Caller(found[0])
        cookie = request.cookies.get(COOKIE)
        if not cookie or self.mode == "open":
            return Caller(None)
        session = await run_in_threadpool(self._session, st, cookie)
        if session is None:
            return Caller(None)
        return Caller(User(session.actor, role_of(session.role)), session)

    def _session(self, st: Statements, cookie: str) -> Session | None:
        session = st.perform(sessions.get(st, cookie))
        if session is not None and not self._still(session):
            st.perform(sessions.close(st, cookie))
            return None
        return session

    def _resolved_session(self, st: Statements, request: Request, user: User) -> Caller:
        cookie = request.cookies.get(COOKIE)
        session = st.perform(sessions.get(st, cookie)) if cookie else None
        if session is not None and session.actor == user.name:
            return Caller(user, session)
        opened = self.open(st, user, "resolver", address(request))
        return Caller(user, opened.session, opened.cookie)

    def open(self, st: Statements, user: User, credential: str,
             address: str | None) -> sessions.Opened:
        """Open a session of ``user``."""
        return st.perform(sessions.open_session(
            st, user.name, user.role, credential, address=address,
            idle_s=self.config.session_idle_s, max_s=self.config.session_max_s))


def _fingerprint(token: bytes) -> str:
    return hashlib.sha256(b"shardq dashboard token\0" + token).hexdigest()[:32]


def address(request: Request) -> str | None:
    """The address a request came from: the client's, as a trusted proxy forwarded it
    (:class:`shardq.web.proxy.Forwarded`), else the peer's."""
    forwarded = request.scope.get("shardq.client")
    if forwarded:
        return str(forwarded)
    return request.client.host if request.client else None


def actor(request: Request, user: User | None) -> audit.Actor:
    """``user`` as the audit trail names it, with the door and the address (nobody known:
    ``?``, role ``none``)."""
    via: audit.Via = "api" if is_api(request) else "page"
    if user is None:
        return audit.Actor("?", "none", via, address(request))
    return audit.Actor(user.name, user.role, via, address(request))


def cross_site(request: Request) -> bool:
    """Whether a browser sent the request from another site's page: its ``Origin`` names
    another host, or ``Sec-Fetch-Site`` says ``cross-site``.  Scripts send neither."""
    if request.headers.get("sec-fetch-site") == "cross-site":
        return True
    origin = request.headers.get("origin")
    return bool(origin) and urlsplit(origin).netloc != request.headers.get("host", "")


def is_api(request: Request) -> bool:
    """Whether the request is one of the JSON API's."""
    return request.url.path.startswith(str(request.scope.get("root_path", "")) + "/api/")
