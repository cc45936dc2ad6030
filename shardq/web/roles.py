"""Who may do what on the dashboard: three roles, each including the one before.

- ``viewer`` reads every page and the JSON API's reads; payloads are shown redacted
  (their keys, every value masked);
- ``operator`` also pauses and resumes queues, changes their limits, cancels tasks and
  flows, and retries (redrives) dead letters;
- ``admin`` also purges queues and dead letters and reads the audit trail.

:data:`ACTIONS` names every action with the least role that may do it; the audit
trail records actions by these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["viewer", "operator", "admin"]
ROLES: tuple[Role, ...] = ("viewer", "operator", "admin")

ACTIONS: dict[str, Role] = {
    "pause": "operator",
    "resume": "operator",
    "limits": "operator",
    "cancel": "operator",
    "cancel_flow": "operator",
    "retry_dead": "operator",
    "redrive": "operator",
    "purge": "admin",
    "purge_dead": "admin",
    "audit": "admin",
}


@dataclass(frozen=True)
class User:
    """Whoever a request comes from: a name and a role."""

    name: str
    role: Role

    def may(self, action: str) -> bool:
        """Whether this user's role may do ``action`` (a key of :data:`ACTIONS`)."""
        return ROLES.index(self.role) >= ROLES.index(ACTIONS[action])


def role_of(text: str) -> Role:
    """``text`` as a role; ValueError naming the roles otherwise."""
    for role in ROLES:
        if text == role:
            return role
    raise ValueError(f"no role {text!r}: the roles are " + ", ".join(ROLES))
