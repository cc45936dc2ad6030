"""The tests marked ``behaviour`` (which CI runs again through PgBouncer, in each pooling
mode) call every public call of the clients and of task functions."""

from __future__ import annotations

import re
from pathlib import Path

import shardq
from tests.clients import SHARED

TESTS = Path(__file__).resolve().parent


def public_calls(cls: type) -> set[str]:
    """The public methods ``cls`` defines itself."""
    return {name for name, value in vars(cls).items()
            if not name.startswith("_") and callable(value)}


def test_every_public_call_is_made_by_a_behaviour_test() -> None:
    texts = (path.read_text(encoding="utf-8") for path in sorted(TESTS.rglob("test_*.py")))
    marked = [text for text in texts if "pytest.mark.behaviour" in text]
    assert len(marked) > 20
    source = "\n".join(marked)
    calls = (set(SHARED) | public_calls(shardq.Client) | public_calls(shardq.AsyncClient)
             | public_calls(shardq.TaskFunction))
    assert {"enqueue", "janitor", "aenqueue_many", "defer_many"} <= calls
    assert sorted(name for name in calls if not re.search(rf"\.{name}\(", source)) == []
