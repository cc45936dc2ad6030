"""What every dashboard route needs: the statements, the guard and the settings."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from shardq.core.statements import Statements
from shardq.web.auth import Guard


@dataclass(frozen=True)
class Context:
    """One dashboard's statements layer, its guard (None: no actions are served) and how
    it shows things."""

    st: Statements
    guard: Guard | None
    hide_payloads: bool
    refresh_ms: int

    @property
    def actions(self) -> bool:
        """Whether this dashboard serves actions (it has a token and is not read-only)."""
        return self.guard is not None


def context(request: Request) -> Context:
    """The dashboard's context, from the application the request reached."""
    ctx: Context = request.app.state.shardq
    return ctx
