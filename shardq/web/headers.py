"""Hardened headers on every response of the dashboard: a strict Content-Security-Policy
(its pages load their style and script from its own files and inline none), no
framing unless ``frame_ancestors`` allows it, no MIME sniffing, no referrer to other
sites, a browsing context of its own, and HSTS over HTTPS."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Everything from the dashboard's own origin, nothing else; forms post to it only.
POLICY = ("default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'",
          "connect-src 'self'", "form-action 'self'", "base-uri 'none'")
HSTS = (b"strict-transport-security", b"max-age=31536000")


def policy(frame_ancestors: str | None = None) -> str:
    """The Content-Security-Policy: ``frame_ancestors`` (CSP sources, such as ``'self'
    https://intranet.example.com``) may frame the pages; None: no page may."""
    return "; ".join([*POLICY, "frame-ancestors " + (frame_ancestors or "'none'")])


def headers(frame_ancestors: str | None = None) -> list[tuple[str, str]]:
    """The headers every response carries (HSTS aside: only over HTTPS)."""
    fixed = [("Content-Security-Policy", policy(frame_ancestors)),
             ("X-Content-Type-Options", "nosniff"),
             ("Referrer-Policy", "same-origin"),
             ("Cross-Origin-Opener-Policy", "same-origin")]
    # X-Frame-Options knows no list of origins: the policy's frame-ancestors says them
    # to browsers that read it; older ones are then left to frame as they like.
    return fixed if frame_ancestors else [*fixed, ("X-Frame-Options", "DENY")]


class SecurityHeaders:
    """ASGI middleware: adds :func:`headers` to every HTTP response, and
    ``Strict-Transport-Security`` to those of requests that came over HTTPS (as uvicorn
    sees them, behind a proxy it trusts with ``X-Forwarded-Proto``)."""

    def __init__(self, app: ASGIApp, frame_ancestors: str | None = None) -> None:
        self.app = app
        self.headers = [(name.lower().encode(), value.encode())
                        for name, value in headers(frame_ancestors)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = [*self.headers, HSTS] if scope.get("scheme") == "https" else self.headers

        async def hardened(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *added]
            await send(message)

        await self.app(scope, receive, hardened)
