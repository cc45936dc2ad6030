"""JDBC URLs and writer options for Spark's JDBC data source (no Spark needed here).

PostgreSQL and CockroachDB both speak through pgjdbc (``org.postgresql.Driver``); what
differs is how the writer batches and commits:

- PostgreSQL: each partition is one transaction (a failed Spark task rolls back what
  it wrote), batches of :data:`POSTGRESQL_BATCH_SIZE` rows.
- CockroachDB: batches of 128 rows (pgjdbc rewrites batches into multi-row INSERTs in
  powers of two, and CockroachDB's pgjdbc guidance is 128), each committed on its own
  (``isolationLevel=NONE``): an implicit single-statement transaction that CockroachDB
  retries itself on contention; ``write_tasks`` therefore stages every write there and
  merges it in one transaction.  A Spark task that still fails is retried by Spark
  (``spark.task.maxFailures``) and stages its partition again, so use
  ``mode="idempotent"`` where a task must never be written twice.

Common to both: ``stringtype=unspecified`` (strings reach uuid and jsonb columns as
untyped literals the server casts) and ``reWriteBatchedInserts=true``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from shardq.core.dsn import authority
from shardq.core.errors import ConfigError

DRIVER = "org.postgresql.Driver"
# Rows per executeBatch on PostgreSQL; bench/spark/insert.py measured 1,000 to 20,000
# (see bench/results/spark_insert.md): past a few thousand the rate is flat.
POSTGRESQL_BATCH_SIZE = 5000
# CockroachDB: pgjdbc's rewrite works in powers of two up to 128 rows a statement.
COCKROACHDB_BATCH_SIZE = 128

# libpq URL parameters that pgjdbc knows under another name (or the same one).
_LIBPQ_TO_JDBC = {
    "sslmode": "sslmode",
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "sslpassword": "sslpassword",
    "application_name": "ApplicationName",
    "connect_timeout": "connectTimeout",
    "options": "options",
    "target_session_attrs": "targetServerType",
}
_JDBC_TO_LIBPQ = {v: k for k, v in _LIBPQ_TO_JDBC.items()}
SYSTEM_CAS = "org.postgresql.ssl.DefaultJavaSSLFactory"  # the JVM's trust store
# libpq's target_session_attrs as pgjdbc's targetServerType names them: pgjdbc's
# "primary" is a server that takes writes (libpq's "read-write"), its "secondary" one that
# does not.  pgjdbc refuses libpq's words ("Invalid targetServerType value").
_SESSION_ATTRS_TO_JDBC = {"any": "any", "read-write": "primary", "primary": "primary",
                          "read-only": "secondary", "standby": "secondary",
                          "prefer-standby": "preferSecondary"}
_JDBC_TO_SESSION_ATTRS = {"any": "any", "primary": "read-write", "master": "read-write",
                          "secondary": "read-only", "slave": "read-only",
                          "preferSecondary": "prefer-standby", "preferSlave": "prefer-standby"}
_SCHEMES = ("postgresql", "postgres", "cockroachdb")


@dataclass(frozen=True)
class Target:
    """Where Spark writes: a JDBC URL, its connection properties, and the engine."""

    jdbc_url: str
    properties: dict[str, str]
    dialect: str


def jdbc_target(url: str) -> Target:
    """Turn a libpq URL (``postgresql://user:pass@host:port/db?sslmode=...``), or libpq's
    ``key=value`` settings, into a JDBC URL and properties; ``cockroachdb://`` marks the
    engine as CockroachDB.  Every host of a multi-host URL is kept, and
    ``target_session_attrs`` becomes pgjdbc's ``targetServerType`` (``read-write``:
    ``primary``), so the writer finds the primary of a failover pair as psycopg does.

    A ``jdbc:postgresql://`` URL is taken as it is (user and password may sit in its
    query string).  Unix-socket URLs are refused: JDBC speaks TCP only.  TLS parameters
    (``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``, ``sslpassword``) carry over,
    meaning to pgjdbc what they mean to libpq (see :func:`_tls_as_pgjdbc`); pgjdbc wants
    a client certificate's key as PKCS-8 DER (``.pk8``) or PKCS-12, not libpq's PEM.
    """
    if url.startswith("jdbc:"):
        if not url.startswith("jdbc:postgresql://"):
            raise ConfigError(f"only jdbc:postgresql:// URLs are supported, got {url[:20]!r}")
        return Target(url, {}, "postgresql")
    if "://" not in url:
        url = _url_of(url)
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0]
    if scheme not in _SCHEMES:
        raise ConfigError(f"a database URL must start with postgresql:// or cockroachdb://, "
                          f"got {parts.scheme or url[:20]!r}")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if query.pop("host", "").startswith("/") or not parts.hostname:
        raise ConfigError("Spark's JDBC writer needs a TCP address (host:port); "
                          "a unix-socket URL cannot be used")
    properties = _credentials(parts.username, parts.password, query)
    params = _jdbc_params(query)
    # Every host:port of a multi-host URL: pgjdbc tries them in turn, as libpq does.
    host = parts.netloc.rpartition("@")[2]
    database = parts.path.lstrip("/") or properties.get("user", "postgres")
    jdbc = f"jdbc:postgresql://{host}/{quote(unquote(database), safe='')}"
    if params:
        jdbc += "?" + urlencode(params)
    return Target(jdbc, properties, "cockroachdb" if scheme == "cockroachdb" else "postgresql")


def _credentials(username: str | None, password: str | None,
                 query: dict[str, str]) -> dict[str, str]:
    """The user and password of a URL, as JDBC properties (taken out of ``query``)."""
    properties: dict[str, str] = {}
    if username:
        properties["user"] = unquote(username)
    if password is not None:
        properties["password"] = unquote(password)
    for name in ("user", "password"):
        if name in query:
            properties[name] = query.pop(name)
    return properties


def _jdbc_params(query: dict[str, str]) -> dict[str, str]:
    """A libpq URL's query parameters under pgjdbc's names (and values)."""
    if "target_session_attrs" in query:
        attrs = query["target_session_attrs"]
        if attrs not in _SESSION_ATTRS_TO_JDBC:
            raise ConfigError(f"target_session_attrs={attrs!r} has no JDBC equivalent (use one "
                              f"of {', '.join(_SESSION_ATTRS_TO_JDBC)})")
        query = {**query, "target_session_attrs": _SESSION_ATTRS_TO_JDBC[attrs]}
    return {_LIBPQ_TO_JDBC.get(k, k): v for k, v in _tls_as_pgjdbc(query).items()}


def _tls_as_pgjdbc(query: dict[str, str]) -> dict[str, str]:
    """libpq's TLS parameters where pgjdbc reads them otherwise.

    - ``sslrootcert=system`` (libpq 16+: the system's CAs) is pgjdbc's
      ``DefaultJavaSSLFactory``, which trusts the Java runtime's CAs;
    - ``sslmode=require`` with an ``sslrootcert`` checks the server's certificate against
      it in libpq (as ``verify-ca``), where pgjdbc's ``require`` checks nothing.
    """
    found = dict(query)
    if found.get("sslrootcert") == "system":
        del found["sslrootcert"]
        found.setdefault("sslfactory", SYSTEM_CAS)
    elif found.get("sslmode") == "require" and found.get("sslrootcert"):
        found["sslmode"] = "verify-ca"
    return found


def _url_of(settings: str) -> str:
    """libpq's ``key=value`` settings as a URL: each host with its port (one port for
    every host when one is given), the other settings in the query string."""
    try:
        params = conninfo_to_dict(settings)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"not a libpq URL or key=value settings: {exc}") from None
    hosts = str(params.pop("host", ""))
    if any(not h or h.startswith("/") for h in hosts.split(",")):
        return "postgresql://"  # a unix socket: refused below, as a URL naming one is
    netloc = authority(hosts, str(params.pop("port", "")))
    user, password = params.pop("user", None), params.pop("password", None)
    if user:
        netloc = (quote(str(user), safe="")
                  + (f":{quote(str(password), safe='')}" if password else "") + "@" + netloc)
    path = quote(str(params.pop("dbname", "")), safe="")
    query = urlencode({k: str(v) for k, v in params.items()})
    return f"postgresql://{netloc}/{path}" + (f"?{query}" if query else "")


def libpq_url(jdbc_url: str, properties: Mapping[str, str] | None = None) -> str:
    """The libpq URL (for psycopg) of a ``jdbc:postgresql://`` URL and its properties."""
    if not jdbc_url.startswith("jdbc:postgresql://"):
        raise ConfigError(f"not a jdbc:postgresql:// URL: {jdbc_url[:20]!r}")
    parts = urlsplit(jdbc_url[len("jdbc:"):])
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(properties or {})
    user, password = query.pop("user", None), query.pop("password", None)
    auth = ""
    if user:
        auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
    params = {_JDBC_TO_LIBPQ[k]: v for k, v in query.items() if k in _JDBC_TO_LIBPQ}
    if query.get("sslfactory") == SYSTEM_CAS:
        params.setdefault("sslrootcert", "system")
    if "target_session_attrs" in params:
        attrs = _JDBC_TO_SESSION_ATTRS.get(params.pop("target_session_attrs"))
        if attrs is not None:  # preferPrimary: libpq has nothing like it
            params["target_session_attrs"] = attrs
    out = f"postgresql://{auth}{parts.netloc}{parts.path}"
    return out + ("?" + urlencode(params) if params else "")


def writer_options(target: Target, table: str, *, dialect: str | None = None,
                   batch_size: int | None = None,
                   extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The options of ``df.write.format("jdbc")`` that append rows to ``table``.

    ``dialect`` (default: the target's) picks the batch size and commit mode;
    ``extra`` options are applied last and win.
    """
    engine = dialect or target.dialect
    if engine not in ("postgresql", "cockroachdb"):
        raise ConfigError(f"unknown dialect {engine!r}")
    crdb = engine == "cockroachdb"
    size = batch_size or (COCKROACHDB_BATCH_SIZE if crdb else POSTGRESQL_BATCH_SIZE)
    if size < 1:
        raise ConfigError(f"batch_size must be positive, got {size}")
    options = {
        "url": target.jdbc_url,
        "dbtable": table,
        "driver": DRIVER,
        **target.properties,
        "stringtype": "unspecified",
        "reWriteBatchedInserts": "true",
        "batchsize": str(size),
        # PostgreSQL: one transaction per partition.  CockroachDB: every batch commits
        # alone, as an implicit transaction the server retries on contention.
        "isolationLevel": "NONE" if crdb else "READ_COMMITTED",
        "ApplicationName": "shardq-spark",
    }
    options.update(extra or {})
    return options


# Rows per round trip of a JDBC read (pgjdbc streams through a cursor when it is set).
READ_FETCH_SIZE = 10_000


def reader_options(target: Target, dbtable: str, *, bucket_count: int | None = None,
                   num_partitions: int | None = None,
                   extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The options of ``spark.read.format("jdbc")`` that read the subquery ``dbtable``.

    With ``bucket_count`` the read is split on its ``bucket`` column into
    ``num_partitions`` ranges of buckets (default: one partition per bucket).
    ``extra`` options are applied last and win.
    """
    options = {
        "url": target.jdbc_url,
        "dbtable": dbtable,
        "driver": DRIVER,
        **target.properties,
        "fetchsize": str(READ_FETCH_SIZE),
        "ApplicationName": "shardq-spark",
    }
    if bucket_count is not None:
        parts = num_partitions or bucket_count
        if not 1 <= parts <= bucket_count:
            raise ConfigError(f"num_partitions must be between 1 and the bucket count "
                              f"({bucket_count}), got {parts}")
        options.update(partitionColumn="bucket", lowerBound="0",
                       upperBound=str(bucket_count), numPartitions=str(parts))
    options.update(extra or {})
    return options
