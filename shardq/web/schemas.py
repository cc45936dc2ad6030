"""JSON schemas (draft 2020-12, as OpenAPI 3.1 takes them) of the Python types the
dashboard's API answers with, read from their type hints.

A dataclass becomes an object with one property per field, each required and no
others, put once among the document's components and referred to by ``$ref``
elsewhere.  Answers are written from the dataclasses (``dataclasses.asdict`` with
uuids and times as text), so the schema follows a dataclass when it changes.  The
types known: ``str``, ``int``, ``float``, ``bool``, ``None``, ``datetime`` (text,
``date-time``), ``UUID`` (text, ``uuid``), ``Any`` (any JSON), ``X | Y`` and
``Optional``, ``list``, ``tuple``, ``Sequence``, ``dict``, ``Literal`` and nested
dataclasses; another raises TypeError, so a field of a new type cannot pass unseen.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

Schema = dict[str, Any]
PREFIX = "#/components/schemas/"
_SCALARS: dict[type, Schema] = {
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    type(None): {"type": "null"},
    datetime: {"type": "string", "format": "date-time"},
    UUID: {"type": "string", "format": "uuid"},
}


class Schemas:
    """Schemas of types, and the dataclasses' among the components (:attr:`components`)."""

    def __init__(self) -> None:
        self.components: dict[str, Schema] = {}

    def of(self, tp: Any) -> Schema:
        """The schema of the type ``tp``."""
        if tp is Any:
            return {}
        if tp in _SCALARS:
            return dict(_SCALARS[tp])
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            return self.record(tp)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (types.UnionType, typing.Union):
            return {"anyOf": [self.of(a) for a in args]}
        if origin is typing.Literal:
            return {"enum": list(args)}
        if origin in (list, Sequence) or (origin is tuple and args[1:] == (Ellipsis,)):
            return {"type": "array", "items": self.of(args[0])}
        if origin in (dict, Mapping) and args[0] is str:
            return {"type": "object", "additionalProperties": self.of(args[1])}
        raise TypeError(f"no JSON schema for the type {tp!r}")

    def record(self, cls: type, *, name: str | None = None, drop: Iterable[str] = (),
               optional: Iterable[str] = (), extra: Mapping[str, Schema] | None = None,
               either: tuple[str, str] | None = None) -> Schema:
        """A ``$ref`` to the dataclass ``cls``'s schema (made on first use, under ``name``,
        by default the class's): its fields but those of ``drop``, each required but
        those of ``optional``, with the ``extra`` properties (not required); with
        ``either``, an object has exactly one of those two properties.  A schema with
        more than a dataclass's fields is made under its own name before the dataclass
        is met in another's fields."""
        name = name or cls.__name__
        ref = {"$ref": PREFIX + name}
        if name in self.components:
            return ref
        self.components[name] = {}  # a placeholder: a dataclass that holds itself
        hints = typing.get_type_hints(cls)
        fields = [f.name for f in dataclasses.fields(cls) if f.name not in set(drop)]
        properties = {f: self.of(hints[f]) for f in fields}
        properties.update(extra or {})
        schema: Schema = {"type": "object", "properties": properties,
                          "required": [f for f in fields if f not in set(optional)],
                          "additionalProperties": False}
        if either is not None:
            schema["oneOf"] = [{"required": [key]} for key in either]
        if cls.__doc__:
            schema["description"] = plain_text(cls.__doc__)
        self.components[name] = schema
        return ref


def obj(**properties: Schema) -> Schema:
    """An object with these properties, each required, and no others."""
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def plain_text(doc: str) -> str:
    """A docstring as Markdown: its lines joined, its reST roles and double backquotes
    made code."""
    paragraphs = re.split(r"\n\s*\n", doc.strip())
    text = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")
