"""What the Spark tests share: the JDBC jar, whether Spark can run here, and one local Spark
session for all the Spark modules, which share an xdist worker (tests/conftest.py's
``spark`` and ``dbs`` fixtures)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

JAR = Path(os.environ.get("SHARDQ_TEST_JDBC_JAR", "/usr/share/java/postgresql.jar"))
JVM_ZONE, SESSION_ZONE = "America/New_York", "Asia/Kolkata"
# The tests' JVMs live seconds: the C1 compiler alone and the serial collector halve the
# CPU a start takes (14 s to 7 s on a 2-core machine), and nothing runs long enough to
# gain from C2.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def quick_jvm(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a process that starts its own Spark: its JVM is started with
    :data:`QUICK_JVM`."""
    return {**env, "PYSPARK_SUBMIT_ARGS": f"--driver-java-options '{QUICK_JVM}' pyspark-shell"}


def require_spark() -> None:
    """Skip the calling module, saying what is missing, unless PySpark, a Java runtime and
    the PostgreSQL JDBC jar are all here (call it at module level, before importing
    pyspark)."""
    pytest.importorskip("pyspark", reason="PySpark is not installed: pip install -e '.[test]'")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark (apt-get install default-jre-headless)",
                    allow_module_level=True)
    if not JAR.is_file():
        pytest.skip(f"no PostgreSQL JDBC driver at {JAR} "
                    "(apt-get install libpostgresql-jdbc-java)", allow_module_level=True)


def scalar_of(spark: Any, text: str) -> Any:
    """The one value of a Spark SQL query."""
    [row] = spark.sql(text).collect()
    return row[0]


@contextmanager
def local_spark() -> Iterator[Any]:
    """A local Spark (2 threads, a failed task tried twice) whose JVM runs in New York and
    whose session in Kolkata, so a time that went through a zone comes out shifted."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,2]").appName("shardq-tests")
        .config("spark.jars", str(JAR))
        .config("spark.driver.extraJavaOptions", f"-Duser.timezone={JVM_ZONE} {QUICK_JVM}")
        .config("spark.sql.session.timeZone", SESSION_ZONE)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # The JVM's own default zone, read through SQL's reflect() (it runs in this JVM).
    default_zone = scalar_of(session, "SELECT reflect('java.util.TimeZone', 'getDefault')")
    assert f'id="{JVM_ZONE}"' in default_zone, default_zone
    try:
        yield session
    finally:
        session.stop()
