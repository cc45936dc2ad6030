"""What every dashboard route needs: the statements, the authority and the settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request

from shardq.core.statements import Statements
from shardq.web.auth import Authority
from shardq.web.masks import Masks


@dataclass(frozen=True)
class Context:
    """One dashboard's statements layer, who may use it (its authority) and how it shows
    things."""

    st: Statements
    authority: Authority
    hide_payloads: bool
    refresh_ms: int
    masks: Masks = field(default_factory=Masks)
    """What is masked in tasks' payloads (see :mod:`shardq.web.masks`)."""

    @property
    def actions(self) -> bool:
        """Whether this dashboard serves actions (it knows who acts, and is not
        read-only)."""
        return self.authority.acts


def context(request: Request) -> Context:
    """The dashboard's context, from the application the request reached."""
    ctx: Context = request.app.state.shardq
    return ctx
