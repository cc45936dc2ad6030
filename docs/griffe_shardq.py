"""A Griffe extension for the API reference (loaded by mkdocs.yml's mkdocstrings options).

- A client call is declared once as a method that makes a plan (``@operation``, see
  ``shardq.api``): on a ``Client`` it returns the plan's value, on an ``AsyncClient``
  an awaitable of it.  The reference shows what the caller gets: ``T``, not ``Plan[T]``.
- The docstrings name objects with reStructuredText roles (``:class:`Client```), which
  Markdown would print as they are: they become inline code.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|mod|attr|exc|data|obj):`~?([^`]+)`")


class ShardqReference(griffe.Extension):
    """Operations return their plan's value; roles become code."""

    def on_function_instance(self, *, node: ast.AST | griffe.ObjectNode, func: griffe.Function,
                             agent: griffe.Visitor | griffe.Inspector, **kwargs: Any) -> None:
        """An ``@operation`` method's return annotation ``Plan[T]`` reads ``T``."""
        returns = func.returns
        is_operation = any(str(d.value) == "operation" for d in func.decorators)
        if (is_operation and isinstance(returns, griffe.ExprSubscript)
                and str(returns.left) == "Plan"):
            func.returns = returns.slice

    def on_instance(self, *, node: ast.AST | griffe.ObjectNode, obj: griffe.Object,
                    agent: griffe.Visitor | griffe.Inspector, **kwargs: Any) -> None:
        """Docstrings' roles become inline code."""
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
