"""shardq's modules import one way: a module never imports one of a higher layer.

The layers, lowest first: ``core`` (settings, errors, plans, runners, statements),
``maths`` (pure functions of time and figures), ``ops`` (operations as plans), then
``loops`` (the blocking loops) and ``text`` (text for people), then the client API
(``api``, ``client``, ``aclient``, ``app``, ``taskfunction``, ``handler``), then
``worker``, then the front ends (``cli``, ``web``, ``spark``, ``contrib``).  Imports
under TYPE_CHECKING and inside functions count too: a climb is a climb wherever it is
written.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "shardq"
LAYERS = [
    {"core"},
    {"maths", "flows"},
    {"ops"},
    {"loops", "text", "durable"},
    {"api", "client", "aclient", "app", "taskfunction", "handler"},
    {"worker"},
    {"cli", "web", "spark", "contrib", "__main__"},
]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PUBLIC = RANK["client"]
"""The package's own names (``shardq.Client``, ...) are the client API's layer."""


def rank(module: str) -> int:
    """A module's layer."""
    parts = module.split(".")
    return RANK[parts[1]] if len(parts) > 1 else PUBLIC


def imported(path: Path) -> list[tuple[int, str]]:
    """Every shardq module ``path`` imports, with the line it is imported on."""
    return imported_from(path, module_name(path))


def imported_from(path: Path, name: str) -> list[tuple[int, str]]:
    """Every shardq module the source at ``path``, module ``name``, imports
    (``from shardq.ops import flow`` names ``shardq.ops``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = node.module or ""
            if node.level:
                source = f"{base}.{source}" if source else base
            found.append((node.lineno, source))
            if source == "shardq":  # `from shardq import ops`: the layer is the name's
                found += [(node.lineno, f"shardq.{alias.name}") for alias in node.names
                          if alias.name in RANK]
    return [(line, target) for line, target in found
            if target == "shardq" or target.startswith("shardq.")]


MODULES = sorted(ROOT.rglob("*.py"))


def test_a_climb_is_found(tmp_path: Path) -> None:
    """The check itself: a core module importing an operation is one climb."""
    module = ROOT / "core" / "example.py"
    assert rank(module_name(module)) == 0
    source = tmp_path / "example.py"
    source.write_text("from shardq.ops import flow\nfrom .plan import Plan\n")
    assert [rank(target) for _, target in imported_from(source, "shardq.core.example")] == [2, 0]


def test_every_top_level_part_has_a_layer() -> None:
    parts = {path.relative_to(ROOT).parts[0].removesuffix(".py") for path in MODULES}
    assert parts - {"__init__"} == set(RANK)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_no_import_climbs_a_layer(path: Path) -> None:
    if path == ROOT / "__init__.py":
        return  # the package loads its public names lazily, from every layer
    own = rank(module_name(path))
    climbs = [f"line {line}: {target}" for line, target in imported(path)
              if rank(target) > own]
    assert not climbs, f"{module_name(path)} imports a higher layer: {climbs}"
