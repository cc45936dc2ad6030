"""Selecting the suite's records and summarising them: medians and side-by-side ratios."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

from bench.harness import median

Record = dict[str, Any]
T = TypeVar("T")


def select(records: list[Record], scenario: str, **match: Any) -> list[Record]:
    """The records of ``scenario`` whose fields equal ``match``."""
    return [r for r in records if r["scenario"] == scenario
            and all(r.get(k) == v for k, v in match.items())]


def med(records: list[Record], key: str) -> float:
    """Median of ``key`` over ``records`` (nan when none)."""
    return median([float(r[key]) for r in records if key in r])


def paired_ratio(a: list[Record], b: list[Record], key: str) -> float:
    """Median over repetitions of a[key] ÷ b[key] for runs of the same repetition."""
    by_rep = {r["rep"]: r[key] for r in b if r.get(key)}
    ratios = [r[key] / by_rep[r["rep"]] for r in a if r["rep"] in by_rep and by_rep[r["rep"]]]
    return median(ratios)


def fmt_ratio(x: float) -> str:
    """``1.23x`` or n/a."""
    return "n/a" if math.isnan(x) else f"{x:.2f}x"


def rotated(items: Sequence[T], rep: int) -> list[T]:
    """``items`` in repetition ``rep``'s order: each repetition another goes first."""
    k = rep % len(items)
    return [*items[k:], *items[:k]]
