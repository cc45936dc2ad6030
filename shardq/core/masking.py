"""Masking fields of a task's payload: what ``@app.task(redact=...)`` and the dashboard's
``redact`` setting hide, in payloads and in the error messages that quote them.

A rule is either field names, masked wherever they occur in the payload's dicts (at any
depth, names compared as written), or a callable that takes a copy of the payload and
returns it masked.  A callable that raises hides everything: a rule that fails must not
show what it was meant to hide.
"""

from __future__ import annotations

import copy
import inspect
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from shardq.core.errors import ConfigError
from shardq.core.lograte import RateLimit

MASK = "***"
MIN_TEXT_CHARS = 4
"""The shortest value :func:`masked_text` masks in a message: shorter ones (a count of 1, a
flag "no") would mask every digit or word alike in it, and tell little on their own."""

Rule: TypeAlias = Sequence[str] | Callable[[Any], Any]
"""Field names to mask, or a callable from a payload to its masked copy."""

log = logging.getLogger("shardq.masking")
_failures = RateLimit()  # one line per rule every few seconds, not one per payload shown


def checked(rule: object, label: str) -> Rule | None:
    """``rule`` once it is a list or tuple of non-empty strings (as a tuple) or a callable;
    None for None or no names; ConfigError, naming ``label``, otherwise."""
    if rule is None or callable(rule):
        return rule
    if isinstance(rule, list | tuple) and all(isinstance(f, str) and f for f in rule):
        return tuple(rule) or None
    raise ConfigError(f"{label} must be a list or tuple of non-empty field names, or a "
                      f"callable (payload -> masked payload), got {rule!r}")


@dataclass(frozen=True)
class ArgumentsRule:
    """Field names as a task function's rule: masked at any depth of its payload, and so
    are its arguments of those names when a call gives them by position (``args[i]``)."""

    names: tuple[str, ...]
    positions: tuple[int, ...]

    def __call__(self, payload: Any) -> Any:
        """The payload masked."""
        out = _fields(payload, frozenset(self.names))
        if isinstance(out, dict) and isinstance(out.get("args"), list):
            args = out["args"]
            for i in self.positions:
                if i < len(args):
                    args[i] = MASK
        return out


def for_function(rule: Rule | None, fn: Callable[..., Any]) -> Rule | None:
    """The rule a task function's payloads are masked by: ``rule``, whose field names
    also mask the function's parameters of those names given by position."""
    if rule is None or callable(rule):
        return rule
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a signature that cannot be read: names only
        return rule
    by_position = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    # Positional parameters come first in a signature: their index is their position.
    positions = tuple(i for i, p in enumerate(params) if p.kind in by_position and p.name in rule)
    return ArgumentsRule(tuple(rule), positions) if positions else rule


def masked(payload: Any, rule: Rule) -> Any:
    """A copy of ``payload`` with what ``rule`` hides replaced by :data:`MASK` (the whole
    value of a field named, a dict or a list included)."""
    if callable(rule):
        try:
            return rule(copy.deepcopy(payload))  # the rule may change what it is given
        except Exception as exc:
            # The exception's message may quote the payload: only its type is logged.
            name = getattr(rule, "__qualname__", repr(rule))
            if _failures.allow((name, type(exc).__name__)) is not None:
                log.warning("the redact rule %s raised %s: every value of the payload is "
                            "masked", name, type(exc).__name__)
            return masked_everything(payload)
    return _fields(payload, frozenset(rule))


def _fields(value: Any, names: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: MASK if k in names else _fields(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_fields(v, names) for v in value]
    return value


def masked_everything(payload: Any) -> Any:
    """``payload``'s shape (its keys, its lists' lengths) with every other value masked."""
    if isinstance(payload, dict):
        return {k: masked_everything(v) for k, v in payload.items()}
    if isinstance(payload, list | tuple):
        return [masked_everything(v) for v in payload]
    return MASK


def masked_text(text: str, payload: Any, rule: Rule) -> str:
    """``text`` (an error message) with the values ``rule`` hides in ``payload`` masked
    wherever they appear in it, as ``str`` or ``repr`` writes them (values of at least
    :data:`MIN_TEXT_CHARS` characters)."""
    forms = {form for value in _hidden(payload, masked(payload, rule))
             for form in _forms(value) if len(form) >= MIN_TEXT_CHARS}
    if not forms:
        return text
    # Longest first: a value that holds another is masked whole.
    pattern = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
    return re.sub(pattern, MASK, text)


def _hidden(original: Any, shown: Any) -> Iterator[Any]:
    """The values of ``original`` that ``shown`` (its masked copy) does not show as they are."""
    if isinstance(original, dict) and isinstance(shown, dict):
        for k, v in original.items():
            yield from _hidden(v, shown[k]) if k in shown else _leaves(v)
    elif (isinstance(original, list | tuple) and isinstance(shown, list | tuple)
          and len(original) == len(shown)):
        for v, s in zip(original, shown, strict=True):
            yield from _hidden(v, s)
    elif type(original) is not type(shown) or original != shown:
        yield from _leaves(original)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _forms(value: Any) -> set[str]:
    """How a message may write ``value``: its text, and its ``repr`` (escapes and all)."""
    if isinstance(value, str):
        return {value, repr(value)[1:-1]}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {str(value)}
    return set()  # true, false and null tell nothing worth hiding
