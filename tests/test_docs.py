"""Every example in the documentation runs, against a real database.

Each Markdown page under ``docs/`` is one test: its ```` ```python ```` blocks are
executed in order in one namespace (a page builds on its earlier blocks), in a
working directory of its own, with ``SHARDQ_DSN`` naming a fresh migrated database.
Shell blocks run only where the page marks them runnable.  An HTML comment on the line
before a block says what to do with it:

- ``<!-- skip: reason -->``: not run (a fragment, or it needs what a test cannot
  have); the reason is required, and skipped blocks are counted and reported;
- ``<!-- file: NAME -->``: a Python block written to ``NAME`` in the working
  directory (importable, and a ``module:app`` target for ``shardq consume``);
- ``<!-- run -->``: a shell block run with bash, which must exit 0 (``run: exit=N``:
  must exit N);
- ``<!-- run: background -->``: a one-command shell block started and left running
  until the page's last block has run, then stopped with SIGTERM (``stop=INT``: SIGINT),
  after which it must exit 0 (``ready=URL``: wait until URL answers before going on;
  ``ready=TEXT``: until its output holds TEXT);
- ``pgbouncer`` among a run marker's options: the block needs a PgBouncer, and is run by
  tests/test_pooler.py, which starts one and points the page's addresses at it (here
  it is left out).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, Databases

DOCS = ROOT / "docs"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)")
MARKER = re.compile(r"^\s*<!-- (?P<verb>skip|file|run)(?::\s*(?P<arg>.*?))? -->\s*$")
PYTHON, SHELL = {"python", "py"}, {"sh", "bash", "shell", "console"}
COMMAND_TIMEOUT_S = 120
READY_TIMEOUT_S = 30
STOP_TIMEOUT_S = 40


@dataclass
class Block:
    """One fenced code block of a page, with the marker before it (if any)."""

    page: str
    line: int
    lang: str
    text: str
    verb: str | None = None
    arg: str = ""

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def blocks(text: str, page: str) -> list[Block]:
    """The page's fenced blocks, with their markers; a malformed marker is an error."""
    found: list[Block] = []
    lines = text.splitlines()
    marker: re.Match[str] | None = None
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if re.match(r"^\s*<!-- (skip|file|run)\b", lines[i]):
            marker = MARKER.match(lines[i])
            if marker is None:
                raise ValueError(f"docs/{page}:{i + 1}: malformed marker {lines[i].strip()!r}")
        elif fence:
            indent, start, body = fence.group("indent"), i + 1, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i].removeprefix(indent))
                i += 1
            block = Block(page, start, fence.group("lang"), "\n".join(body) + "\n")
            if marker is not None:
                block.verb, block.arg = marker.group("verb"), marker.group("arg") or ""
            found.append(block)
            marker = None
        elif lines[i].strip():
            marker = None  # a marker applies to the block right after it
        i += 1
    return found


def page_blocks() -> dict[str, list[Block]]:
    """Every page with Python blocks or marked shell blocks, by its path under docs/ (the
    README by its name at the root)."""
    pages = {}
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        page = path.relative_to(ROOT if path.parent == ROOT else DOCS).as_posix()
        code = [b for b in blocks(path.read_text(encoding="utf-8"), page)
                if b.lang in PYTHON | SHELL]
        if any(b.lang in PYTHON or b.verb for b in code):
            pages[page] = code
    return pages


PAGES = page_blocks()
# Pages whose examples need a server of their own, run by the test named.
OWN_SERVER = {"how-to/security.md": "tests/test_security_docs.py (TLS and roles)"}


@dataclass
class Run:
    """A page's run: its namespace, working directory and background commands (``pooler``:
    the blocks marked ``pgbouncer`` run too)."""

    workdir: Path
    pooler: bool = False
    namespace: dict[str, object] = field(default_factory=lambda: {"__name__": "__docs__"})
    background: list[tuple[Block, subprocess.Popen[bytes], Path, signal.Signals]] = field(
        default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"python": 0, "shell": 0,
                                                            "skipped": 0, "not marked": 0})

    def block(self, block: Block) -> None:
        """Run, write, start or skip one block, as its marker says."""
        if block.verb == "skip":
            if not block.arg:
                raise ValueError(f"{block.where}: a skip marker needs a reason")
            self.counts["skipped"] += 1
        elif block.verb == "file":
            if block.lang not in PYTHON or not block.arg:
                raise ValueError(f"{block.where}: `file: NAME` is for Python blocks")
            (self.workdir / block.arg).write_text(block.text, encoding="utf-8")
            self.counts["python"] += 1
        elif block.lang in PYTHON:
            if block.verb is not None:
                raise ValueError(f"{block.where}: Python blocks take skip or file, not run")
            self.python(block)
        elif block.verb == "run":
            self.shell(block)
        else:
            self.counts["not marked"] += 1

    def python(self, block: Block) -> None:
        code = compile(block.text, block.where, "exec")
        try:
            exec(code, self.namespace)
        except Exception as exc:
            raise AssertionError(f"{block.where}: the example raised {exc!r}") from exc
        self.counts["python"] += 1

    def shell(self, block: Block) -> None:
        options: dict[str, str] = {}
        for part in shlex.split(block.arg):
            name, _, value = part.partition("=")
            options[name] = value
        if "pgbouncer" in options and not self.pooler:
            self.counts["not marked"] += 1
            return
        if "background" in options:
            self.start(block, options.get("ready"), options.get("stop", "TERM"))
            return
        expected = int(options.get("exit", "0"))
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=self.workdir,
                              env=environment(), capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
        if done.returncode != expected:
            raise AssertionError(f"{block.where}: exit status {done.returncode}, not "
                                 f"{expected}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}")
        self.counts["shell"] += 1

    def start(self, block: Block, ready: str | None, stop: str) -> None:
        command = [line for line in block.text.splitlines() if line.strip()]
        if len(command) != 1:
            raise ValueError(f"{block.where}: a background block is one command")
        log = self.workdir / f"background-{block.line}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(["bash", "-c", "exec " + command[0]], cwd=self.workdir,
                                       env=environment(), stdout=out, stderr=subprocess.STDOUT)
        self.background.append((block, process, log, signal.Signals[f"SIG{stop}"]))
        if ready:
            wait_ready(block, process, log, ready)
        self.counts["shell"] += 1

    def stop(self) -> None:
        """Stop each background command (SIGTERM, or its ``stop=``); each must then exit 0."""
        failures = []
        for block, process, log, stop in reversed(self.background):
            if process.poll() is None:
                process.send_signal(stop)
            try:
                status = process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                status = process.wait()
            if status != 0:
                failures.append(f"{block.where}: exit status {status}\n{log.read_text()}")
        self.background.clear()
        assert not failures, "\n".join(failures)


def environment() -> dict[str, str]:
    """This process's environment, with its Python's scripts (``shardq``) on the PATH and
    the repository's root on the Python path (the docs' commands run from a checkout)."""
    scripts = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONPATH": path}


def wait_ready(block: Block, process: subprocess.Popen[bytes], log: Path, ready: str) -> None:
    """Wait, while the process runs, until URL ``ready`` answers (any HTTP status) or,
    for any other ``ready``, until the process's output holds it."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{block.where}: exited with {process.returncode} before "
                                 f"it was ready ({ready})\n{log.read_text()}")
        if answers(ready) if ready.startswith("http://") else ready in log.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{block.where}: not ready ({ready}) in {READY_TIMEOUT_S}s\n"
                         f"{log.read_text()}")


def answers(url: str) -> bool:
    """Whether an HTTP server answers at ``url``, with any status."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def run_page(code: list[Block], workdir: Path, *, pooler: bool = False) -> dict[str, int]:
    """Run one page's blocks in order (``pooler``: those marked ``pgbouncer`` too); returns
    what was run and skipped."""
    run = Run(workdir, pooler)
    try:
        for block in code:
            run.block(block)
    finally:
        run.stop()
    return run.counts


@pytest.fixture
def page_env(databases: Databases, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh migrated database in SHARDQ_DSN and a working directory on sys.path; the
    modules a page wrote are forgotten afterwards (the next page may reuse the names)."""
    monkeypatch.setenv("SHARDQ_DSN", databases.create())
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "") or "").startswith(str(tmp_path)):
            del sys.modules[name]


@pytest.mark.parametrize("page", sorted(set(PAGES) - set(OWN_SERVER)))
def test_page_examples_run(page: str, page_env: Path) -> None:
    counts = run_page(PAGES[page], page_env)
    assert counts["python"] + counts["shell"] > 0 or counts["skipped"] > 0


def test_skipped_blocks_are_few_and_explained(capsys: pytest.CaptureFixture[str]) -> None:
    skipped = [b for code in PAGES.values() for b in code if b.verb == "skip"]
    python = [b for code in PAGES.values() for b in code if b.lang in PYTHON]
    assert all(b.arg for b in skipped)
    report = [f"docs examples: {len(python)} Python blocks, {len(skipped)} skipped:",
              *(f"  {b.where}: {b.arg}" for b in skipped)]
    with capsys.disabled():  # the count and the reasons belong in every run's output
        print("\n" + "\n".join(report))
    assert len(skipped) <= len(python) // 5, "\n".join(report)


BROKEN = """\
# A page

```python
value = 1
```

```python
assert value == 2, "the example no longer holds"
```
"""


def test_a_broken_example_fails_its_page(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"docs/broken.md:7: the example raised"):
        run_page(blocks(BROKEN, "broken.md"), tmp_path)


def test_a_failing_command_fails_its_page(tmp_path: Path) -> None:
    page = "<!-- run -->\n```sh\nshardq migrate --sql --dialect nosuch\n```\n"
    with pytest.raises(AssertionError, match=r"docs/cmd.md:2: exit status 2, not 0"):
        run_page(blocks(page, "cmd.md"), tmp_path)


def test_a_background_command_must_stop_cleanly(tmp_path: Path) -> None:
    page = "<!-- run: background -->\n```sh\nsleep 60\n```\n"
    with pytest.raises(AssertionError, match=r"docs/bg.md:2: exit status -15"):
        run_page(blocks(page, "bg.md"), tmp_path)


def test_markers_must_be_well_formed() -> None:
    with pytest.raises(ValueError, match="malformed marker"):
        blocks("<!-- run background -->\n```sh\ntrue\n```\n", "bad.md")
    with pytest.raises(ValueError, match="needs a reason"):
        run_page(blocks("<!-- skip -->\n```python\npass\n```\n", "bad.md"), Path("."))


LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")


def test_the_async_page_shows_the_fastapi_example_as_it_is() -> None:
    """docs/how-to/async.md has examples/fastapi_app.py inline, so that it reads on GitHub
    too: the copy must be the file, which tests/test_fastapi_example.py runs."""
    [shown] = [b for b in PAGES["how-to/async.md"] if "examples/fastapi_app.py" in b.arg]
    assert shown.text == (ROOT / "examples" / "fastapi_app.py").read_text(encoding="utf-8")


def test_readme_links_resolve() -> None:
    """The README's relative links (into docs/, from the repository's root) name files
    that exist."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [m["target"] for m in LINK.finditer(readme)
               if "://" not in m["target"] and not (ROOT / m["target"]).exists()]
    assert LINK.search(readme)
    assert not missing


HEAD_NAMED = re.compile(r"\b(?P<revision>\d{4}) \(head\)")


def test_the_head_revision_the_docs_name_is_the_migrations_head() -> None:
    """A page that quotes ``shardq migrate`` (``... revision NNNN (head)``) names the
    newest revision in migrations/versions, so a new migration makes it say so."""
    head = max(p.name[:4] for p in (ROOT / "migrations" / "versions").glob("[0-9]*.py"))
    named = {(path.relative_to(ROOT).as_posix(), m["revision"])
             for path in [ROOT / "README.md", *DOCS.rglob("*.md")]
             for m in HEAD_NAMED.finditer(path.read_text(encoding="utf-8"))}
    assert ("docs/how-to/schema.md", head) in named
    assert {page for page, revision in named if revision != head} == set()
