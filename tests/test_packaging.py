"""The wheel carries the SQL files, migrations and the dashboard's templates and static
files, and works without a checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(ROOT)], check=True, capture_output=True)
    [built] = out.glob("shardq-*.whl")
    return built


def test_wheel_contents(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for sql_file in (ROOT / "sql").rglob("*.sql"):
        assert "shardq/sql/" + sql_file.relative_to(ROOT / "sql").as_posix() in names
    for migration in (ROOT / "migrations").rglob("*.py"):
        assert "shardq/migrations/" + migration.relative_to(ROOT / "migrations").as_posix() \
            in names
    for template in (ROOT / "shardq" / "web" / "templates").glob("*.html"):
        assert "shardq/web/templates/" + template.name in names  # the dashboard's pages
    for asset in (ROOT / "shardq" / "web" / "static").iterdir():
        assert "shardq/web/static/" + asset.name in names  # its style sheet, script, icon
    assert "shardq/py.typed" in names


def test_installed_wheel_migrates_and_claims(wheel: Path, tmp_path: Path, databases: Any) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    url = databases.create(migrated=False)
    env = {**os.environ, "PYTHONPATH": str(site), "SHARDQ_DSN": url}
    run = {"cwd": tmp_path, "env": env, "check": True, "capture_output": True, "text": True}
    subprocess.run([sys.executable, "-m", "shardq", "migrate"], **run)  # type: ignore[call-overload]
    script = ("import shardq, pathlib; c = shardq.Client(); "
              f"assert str(pathlib.Path(shardq.__file__).parent).startswith({str(site)!r}); "
              "c.enqueue('w', {}); print(len(c.claim('w')))")
    result = subprocess.run([sys.executable, "-c", script], **run)  # type: ignore[call-overload]
    assert result.stdout.strip() == "1"
