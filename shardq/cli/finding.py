"""``shardq doctor``'s checks: their names, and what one found."""

from __future__ import annotations

from dataclasses import dataclass

CHECKS = ("pooler", "server version", "autovacuum", "index bloat", "janitor vacuum",
          "pool size", "LISTEN/NOTIFY", "limits")
"""Every check's name, in the order doctor runs them (light: the parser reads them)."""

@dataclass(frozen=True)
class Finding:
    """One check's result: ``ok``, what was seen, and advice when not ok."""

    check: str
    ok: bool
    seen: str
    advice: str = ""
