"""Behind a proxy: the addresses it forwards, and the users an authenticating proxy
names (single sign-on through oauth2-proxy and the like).

:class:`Forwarded` believes ``X-Forwarded-Proto`` and ``X-Forwarded-For`` only from
the peers of ``--trusted-proxies``: the scheme makes the session cookie ``Secure`` and
the client's address goes to the audit trail and the login throttle.  The ASGI
server's own handling of those headers must be off (``shardq dashboard`` turns it
off), so that the peer seen here is the proxy itself.

:class:`ProxyIdentity` takes the user from ``--proxy-user-header`` and the role from
``--proxy-role-header`` (the highest role it names, so a list of groups works) or
``--proxy-default-role``, and refuses a request that did not come from a trusted
proxy: anyone else could set the header.
"""

from __future__ import annotations

import ipaddress
import re

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from shardq.web.config import DashboardConfig, Network
from shardq.web.roles import ROLES, Role, User

NAME_MOST = 256  # characters of a user's name as a proxy gives it


def trusted(address: str | None, networks: list[Network]) -> bool:
    """Whether ``address`` lies in one of ``networks``."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    return any(ip in network for network in networks)


class Forwarded:
    """ASGI middleware: the scheme and client a trusted proxy forwarded."""

    def __init__(self, app: ASGIApp, trusted: list[Network]) -> None:
        self.app, self.trusted = app, trusted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = scope.get("client")
        if scope["type"] == "http" and peer and trusted(peer[0], self.trusted):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in scope["headers"]}
            proto = headers.get("x-forwarded-proto", "").split(",")[0].strip()
            if proto in ("http", "https"):
                scope = {**scope, "scheme": proto}
            # The client is the last hop that is not one of our proxies.
            hops = [h.strip() for h in headers.get("x-forwarded-for", "").split(",")
                    if h.strip()]
            for hop in reversed(hops):
                if not trusted(hop, self.trusted):
                    scope = {**scope, "shardq.client": hop}
                    break
        await self.app(scope, receive, send)


class ProxyIdentity:
    """The user an authenticating proxy names (see the module's docstring)."""

    def __init__(self, config: DashboardConfig) -> None:
        assert config.proxy_user_header is not None
        self.user_header = config.proxy_user_header
        self.role_header = config.proxy_role_header
        self.default_role = config.proxy_default_role
        self.trusted = config.proxies()

    def __call__(self, request: Request) -> User | None:
        peer = request.client.host if request.client else None
        if not trusted(peer, self.trusted):
            raise HTTPException(403, f"requests from {peer} are refused: this dashboard "
                                     "serves only through its trusted proxies")
        name = request.headers.get(self.user_header, "").strip()
        if not name:
            return None
        if len(name) > NAME_MOST:
            raise HTTPException(400, f"the proxy's user name has more than {NAME_MOST} "
                                     "characters")
        role = self._role(request.headers.get(self.role_header or "", ""))
        if role is None:
            raise HTTPException(403, f"{name} has no dashboard role (the proxy's "
                                     f"{self.role_header} names none of "
                                     + ", ".join(ROLES) + ")")
        return User(name, role)

    def _role(self, header: str) -> Role | None:
        named = set(re.split(r"[,\s]+", header.strip())) if header else set()
        for role in reversed(ROLES):
            if role in named:
                return role
        for role in ROLES:
            if role == self.default_role:
                return role
        return None
