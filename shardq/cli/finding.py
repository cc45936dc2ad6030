"""What one of ``shardq doctor``'s checks found."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """One check's result: ``ok``, what was seen, and advice when not ok."""

    check: str
    ok: bool
    seen: str
    advice: str = ""
