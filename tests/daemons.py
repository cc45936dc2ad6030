"""``shardq consume`` processes for tests: their output is read as it comes, so a test can
wait for a line while the process runs."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


class Daemon:
    """A ``shardq consume ARGS`` process, started in the checkout's root."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "shardq", "consume", *args], env=env, cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        # A reader thread, so the test can wait for a line while the process runs.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        """What the process wrote so far (stdout and stderr)."""
        return "".join(self.lines)

    def saw(self, text: str, since: int = 0) -> bool:
        """Whether a line from the ``since``-th on holds ``text``."""
        return any(text in line for line in self.lines[since:])

    def signal(self, signum: int = signal.SIGTERM) -> None:
        """Send the process ``signum``."""
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 60) -> tuple[int, str]:
        """The exit code and the whole output, once the process exited."""
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code, self.output

    def stop(self) -> int:
        """SIGTERM, then the exit code."""
        self.signal()
        return self.wait()[0]

    def kill(self) -> None:
        """Kill the process if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)


@contextmanager
def app_daemon(directory: Path, name: str, source: str, dsn: str
               ) -> Iterator[tuple[ModuleType, Daemon]]:
    """``source`` written to ``directory/name.py`` and imported here, and a ``shardq consume
    name:app`` on ``dsn`` that imports the same module; at the end the daemon is stopped
    (SIGTERM: its exit code is then ``daemon.proc.returncode``) and the module forgotten."""
    (directory / f"{name}.py").write_text(source)
    env = {**os.environ, "SHARDQ_DSN": dsn,
           "PYTHONPATH": os.pathsep.join([str(directory), str(ROOT)])}
    sys.path.insert(0, str(directory))
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(directory))
    daemon = Daemon(env, f"{name}:app")
    try:
        yield module, daemon
    finally:
        sys.modules.pop(name, None)
        daemon.stop()
