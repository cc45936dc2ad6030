"""Who may act: the token, the bearer header of the JSON API, and the pages' session.

The JSON API's actions need ``Authorization: Bearer <token>``: none gives 401, a
wrong one 403.  The web pages ask for the token once, on the login page, and keep a
session cookie (an HMAC of the token, HttpOnly, SameSite=Strict); each form carries
a CSRF field (another HMAC of the token) that a page of another site cannot know, so
a form posted without it, or with a wrong one, gets 403 even with the cookie.  A
dashboard without a token, or read-only, has no actions to guard: their routes are
not served at all.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.exceptions import HTTPException
from starlette.requests import Request

COOKIE = "shardq_session"


class Guard:
    """Checks requests against one token."""

    def __init__(self, token: str) -> None:
        self._key = token.encode()

    def _mac(self, purpose: str) -> str:
        return hmac.new(self._key, purpose.encode(), hashlib.sha256).hexdigest()

    def matches(self, token: str) -> bool:
        """Whether ``token`` is the token (in constant time)."""
        return hmac.compare_digest(token.encode(), self._key)

    @property
    def session(self) -> str:
        """The session cookie's value."""
        return self._mac("session")

    @property
    def csrf(self) -> str:
        """The CSRF field every form carries."""
        return self._mac("csrf")

    def logged_in(self, request: Request) -> bool:
        """Whether the request carries the session cookie."""
        return hmac.compare_digest(request.cookies.get(COOKIE, ""), self.session)

    def check_bearer(self, request: Request) -> None:
        """Raise 401 without a bearer token, 403 with a wrong one."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HTTPException(401, "this action needs the token: Authorization: Bearer ...",
                                headers={"WWW-Authenticate": "Bearer"})
        if not self.matches(token.strip()):
            raise HTTPException(403, "wrong token")

    def check_form(self, request: Request, csrf: str) -> None:
        """Raise 401 without the session cookie, 403 with a wrong CSRF field."""
        if not self.logged_in(request):
            raise HTTPException(401, "log in with the token first")
        if not hmac.compare_digest(csrf, self.csrf):
            raise HTTPException(403, "the form's CSRF field is missing or wrong")
