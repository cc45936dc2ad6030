"""Certificates for TLS tests: a certificate authority and a server certificate it signs
for ``localhost`` and 127.0.0.1, made with the ``openssl`` command (the ``cryptography``
package is no dependency of shardq's), and a PostgreSQL that can serve them.

The embedded PostgreSQL wheel is built without OpenSSL, so a TLS server needs the
binaries of an installed PostgreSQL (Debian's ``postgresql`` package):
:func:`ssl_bindir` finds them, and the TLS tests skip, saying so, without them.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from tests.chaos.pg import ThrowawayPostgres

DAYS = "2"  # the certificates outlive any test run, and nothing else
# A P-256 key: made at once, where an RSA key takes a noticeable fraction of a second.
KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
SERVER_NAMES = "subjectAltName=DNS:localhost,IP:127.0.0.1"


@dataclass(frozen=True)
class Certificates:
    """The files of one certificate authority and the server certificate it signed."""

    ca: Path
    """The CA's certificate, PEM (a client's ``sslrootcert``)."""
    server_cert: Path
    """The server's certificate, PEM (``ssl_cert_file``)."""
    server_key: Path
    """The server certificate's private key, PEM, mode 0600 (``ssl_key_file``)."""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(directory: Path, name: str = "ca") -> tuple[Path, Path]:
    """A self-signed certificate authority in ``directory``: (certificate, key)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl("req", "-x509", *KEY, "-days", DAYS, "-subj", f"/CN=shardq test {name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-keyout", key.name, "-out", cert.name, cwd=directory)
    return cert, key


def make_certificates(directory: Path) -> Certificates:
    """A CA, and a server certificate for ``localhost`` and 127.0.0.1 that it signs."""
    ca_cert, ca_key = make_ca(directory)
    extensions = directory / "server.ext"
    extensions.write_text(f"{SERVER_NAMES}\nbasicConstraints=CA:FALSE\n"
                          "keyUsage=critical,digitalSignature\n"
                          "extendedKeyUsage=serverAuth\n")
    _openssl("req", *KEY, "-subj", "/CN=localhost", "-keyout", "server.key",
             "-out", "server.csr", cwd=directory)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", ca_cert.name, "-CAkey", ca_key.name,
             "-CAcreateserial", "-days", DAYS, "-extfile", extensions.name,
             "-out", "server.pem", cwd=directory)
    key = directory / "server.key"
    key.chmod(0o600)  # PostgreSQL refuses a key others may read
    return Certificates(ca_cert, directory / "server.pem", key)


def ssl_bindir() -> Path | None:
    """The bin directory of an installed PostgreSQL built with OpenSSL (the newest), or
    None; ``SHARDQ_TEST_PG_BINDIR`` names one to use instead."""
    configured = os.environ.get("SHARDQ_TEST_PG_BINDIR")
    candidates = [configured] if configured else sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name),
        reverse=True)
    for candidate in candidates:
        pg_config = Path(candidate) / "pg_config"
        if not (Path(candidate) / "postgres").is_file() or not pg_config.is_file():
            continue
        built = subprocess.run([str(pg_config), "--configure"], capture_output=True,
                               text=True, check=False).stdout
        if "openssl" in built:
            return Path(candidate)
    return None


def missing() -> str | None:
    """Why TLS tests cannot run here (None when they can)."""
    if shutil.which("openssl") is None:
        return "no openssl command to make certificates with (apt-get install openssl)"
    if ssl_bindir() is None:
        return ("no PostgreSQL built with OpenSSL in /usr/lib/postgresql/*/bin (the embedded "
                "wheel has no TLS): apt-get install postgresql")
    return None


@dataclass(frozen=True)
class TlsServer:
    """A throwaway PostgreSQL that takes TLS connections only (scram-sha-256 passwords for
    every role but ``postgres``), its certificates, and a CA that did not sign them."""

    pg: ThrowawayPostgres
    certificates: Certificates
    wrong_ca: Path

    def url(self, dbname: str, user: str = "postgres", password: str = "", *,
            sslrootcert: Path | None = None, **params: str) -> str:
        """A libpq URL of ``dbname`` as ``user``, verify-full against ``sslrootcert``
        (default: the server's CA)."""
        auth = f"{user}:{password}" if password else user
        query = urlencode({"sslmode": "verify-full",
                           "sslrootcert": str(sslrootcert or self.certificates.ca), **params})
        return f"postgresql://{auth}@127.0.0.1:{self.pg.port}/{dbname}?{query}"


@contextmanager
def tls_server(directory: Path) -> Iterator[TlsServer]:
    """A :class:`TlsServer` whose files live in ``directory``, stopped at the end."""
    bindir = ssl_bindir()
    assert bindir is not None, missing()
    certificates = make_certificates(directory)
    wrong_ca, _ = make_ca(directory / "other")
    pg = ThrowawayPostgres(
        bin_dir=bindir,
        settings={"ssl": "on", "ssl_cert_file": certificates.server_cert.name,
                  "ssl_key_file": certificates.server_key.name,
                  "password_encryption": "scram-sha-256"},
        hba=["hostnossl all all all reject",
             "hostssl all postgres 127.0.0.1/32 trust",
             "hostssl all all 127.0.0.1/32 scram-sha-256"],
        files=[certificates.server_cert, certificates.server_key])
    try:
        yield TlsServer(pg, certificates, wrong_ca)
    finally:
        pg.close()
