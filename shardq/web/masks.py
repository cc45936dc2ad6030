"""What the dashboard masks in tasks' payloads, and how much of a payload it shows.

Each task is masked by its function's ``redact`` rule, when the dashboard was given the
app (``create_app(..., app=...)``, ``shardq dashboard --app``), then by the fields of
the ``redact`` setting, masked in every task's payload; its errors are masked alike,
where they quote a masked value.  How much is shown is a :data:`Show`: the payload so
masked (``full``), only its shape (``masked``: every value masked, as a viewer sees
it), or only its size (``sizes``, the ``hide_payloads`` setting).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from shardq.core.masking import Rule, masked, masked_everything, masked_text
from shardq.core.task import TaskInfo

if TYPE_CHECKING:
    from shardq.app import App

Show = Literal["full", "masked", "sizes"]


@dataclass(frozen=True)
class Masks:
    """The rules of an app's tasks (by task name, and by queue for raw handlers) and the
    fields masked in every task's payload."""

    by_name: Mapping[str, Rule] = field(default_factory=dict)
    by_queue: Mapping[str, Rule] = field(default_factory=dict)
    fields: tuple[str, ...] = ()

    @classmethod
    def of(cls, app: App | None, fields: tuple[str, ...] = ()) -> Masks:
        """The masks of ``app``'s tasks (none without an app), and ``fields``."""
        if app is None:
            return cls(fields=fields)
        return cls({n: h.redact for n, h in app.tasks.items() if h.redact is not None},
                   {q: h.redact for q, h in app.raw.items() if h.redact is not None}, fields)

    def rule(self, task: TaskInfo) -> Rule | None:
        """The rule ``task`` is masked by (its function's, then the fields), or None.
        A raw handler's queue decides before a name, as it does in a worker."""
        payload = task.payload
        name = payload.get("task") if isinstance(payload, dict) else None
        own = self.by_queue.get(task.queue) or (self.by_name.get(name)
                                                if isinstance(name, str) else None)
        if own is None or not self.fields:
            return own or self.fields or None
        fields = self.fields
        return lambda p: masked(masked(p, own), fields)


def shown(task: TaskInfo, show: Show, masks: Masks) -> TaskInfo:
    """``task`` as the dashboard shows it: its errors masked, and its payload and durable
    steps' values masked by its rule (``full``), or every value masked (``masked``).
    With ``sizes`` the payload and values stay whole: only their sizes are shown."""
    rule = masks.rule(task)
    if show == "masked":
        rule = masked_everything
    if rule is None:
        return task
    payload = task.payload

    def text(error: str | None) -> str | None:
        return None if error is None else masked_text(error, payload, rule)

    changed: dict[str, Any] = {
        "last_error": text(task.last_error),
        "history": tuple(dataclasses.replace(a, error=text(a.error)) for a in task.history)}
    if show != "sizes":
        changed["payload"] = masked(payload, rule)
        changed["steps"] = tuple(dataclasses.replace(s, value=masked(s.value, rule))
                                 for s in task.steps)
    return dataclasses.replace(task, **changed)
