"""``shardq top`` in a real terminal (a pseudo-terminal): it shows every queue's counts,
refreshes, and quits on ``q``."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import shardq
from tests.conftest import Databases

ROWS, COLUMNS = 30, 120


class Terminal:
    """A process attached to a pseudo-terminal of ROWS x COLUMNS; its screen output is
    collected as it comes."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.proc = subprocess.Popen(list(args), stdin=slave, stdout=slave, stderr=slave,
                                     env={**env, "TERM": "xterm-256color",
                                          "COLUMNS": str(COLUMNS), "LINES": str(ROWS)},
                                     start_new_session=True)
        os.close(slave)
        self.screen = ""

    def read_until(self, pattern: str, timeout_s: float = 30) -> str:
        """Collect output until ``pattern`` (a regex over the text, escapes removed) shows."""
        deadline = time.monotonic() + timeout_s
        while not re.search(pattern, self.text):
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} on the screen: {self.text[-2000:]!r}"
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    self.screen += os.read(self.master, 65536).decode(errors="replace")
                except OSError:  # the process closed the terminal
                    break
        return self.text

    @property
    def text(self) -> str:
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]", " ", self.screen)

    def press(self, key: str) -> None:
        os.write(self.master, key.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def test_top_shows_queues_refreshes_and_quits_on_q(databases: Databases) -> None:
    url = databases.create()
    with shardq.Client(url) as client:
        client.enqueue_many("mail", [{"n": n} for n in range(1234)])
        client.enqueue_many("mail", [{"n": n} for n in range(7)], delay_s=3600)
        client.pause("reports", create=True)
        terminal = Terminal(sys.executable, "-m", "shardq", "top", "--dsn", url,
                            env=dict(os.environ))
        try:
            screen = terminal.read_until(r"reports.*paused")
            assert re.search(r"mail\s.*1,234\s.*\b7\b", screen), screen[-2000:]
            client.enqueue_many("mail", [{"n": n} for n in range(1000)])
            terminal.read_until(r"mail\s.*2,234\b")  # the next refresh shows them
            terminal.press("q")
            assert terminal.proc.wait(timeout=10) == 0
        finally:
            terminal.close()


def test_top_refuses_without_a_terminal(databases: Databases) -> None:
    result = subprocess.run([sys.executable, "-m", "shardq", "top", "--dsn",
                             databases.create()], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert result.returncode == 2
    assert "needs a terminal" in result.stderr
