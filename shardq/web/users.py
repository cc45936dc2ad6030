"""The dashboard's named credentials: a file of ``name:role:hash`` lines.

``shardq dashboard user add NAME --role R --users FILE`` makes a random token, writes
its scrypt hash and prints the token once; ``shardq dashboard --users FILE`` serves the
dashboard to those holding one.  A token reads ``NAME.SECRET``: the name says which
line to check, so a login costs one scrypt, not one per user.  The file is read again
whenever it changes, so a credential added, replaced or removed counts at once (a
removed or replaced one ends its sessions at their next request); it must be readable
by its owner only.  Lines starting with ``#`` and blank lines are ignored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from shardq.core.errors import ConfigError
from shardq.web.roles import Role, User, role_of

# scrypt's cost: about 50 ms and 16 MiB a check (OWASP's minimum is N=2^17 with r=8 for
# passwords; a token of 256 random bits needs no more than this to resist guessing, and
# verified tokens are cached, so an API client does not pay it per call).
N, R, P = 2**14, 8, 1
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}")
CACHED_MOST = 1024  # verified tokens remembered (by their SHA-256) until the file changes


@dataclass(frozen=True)
class Credential:
    """One line of the file."""

    name: str
    role: Role
    hashed: str

    @property
    def fingerprint(self) -> str:
        """Names this credential in its sessions: a new token for the name changes it."""
        return hashlib.sha256(self.hashed.encode()).hexdigest()[:32]

    @property
    def user(self) -> User:
        """The user it logs in as."""
        return User(self.name, self.role)

    def line(self) -> str:
        """The credential as the file holds it."""
        return f"{self.name}:{self.role}:{self.hashed}"


def hash_token(token: str) -> str:
    """``token``'s scrypt hash with a random salt, as ``scrypt$N$r$p$salt$hash``."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(token.encode(), salt=salt, n=N, r=R, p=P, dklen=32)
    return "$".join(["scrypt", str(N), str(R), str(P), _b64(salt), _b64(digest)])


def verify(token: str, hashed: str) -> bool:
    """Whether ``token`` has the hash ``hashed`` (in constant time)."""
    try:
        kind, n, r, p, salt, digest = hashed.split("$")
        if kind != "scrypt":
            return False
        got = hashlib.scrypt(token.encode(), salt=_unb64(salt), n=int(n), r=int(r),
                             p=int(p), dklen=32, maxmem=128 * int(n) * int(r) * 2)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, _unb64(digest))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def parse(text: str, path: str) -> dict[str, Credential]:
    """The credentials in a file's ``text``; ConfigError naming the line of a bad one."""
    found: dict[str, Credential] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(":")
        role, _, hashed = rest.partition(":")
        where = f"{path}, line {number}"
        if not NAME.fullmatch(name):
            raise ConfigError(f"{where}: give name:role:hash, with a name of letters, digits "
                              "and _.@+- (at most 64)")
        try:
            checked = role_of(role)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if not hashed.startswith("scrypt$") or hashed.count("$") != 5:
            raise ConfigError(f"{where}: the hash is not one `shardq dashboard user add` "
                              "writes")
        if name in found:
            raise ConfigError(f"{where}: {name} is there twice")
        found[name] = Credential(name, checked, hashed)
    return found


class UsersFile:
    """The credentials of one file, read again when it changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._users: dict[str, Credential] = {}
        self._verified: dict[str, Credential] = {}
        self.users()  # a missing or bad file is refused at start, in one line

    def users(self) -> dict[str, Credential]:
        """The file's credentials by name, as it holds them now."""
        try:
            info = os.stat(self.path)
        except OSError as exc:
            raise ConfigError(f"cannot read the users file {self.path}: {exc.strerror}") from exc
        with self._lock:
            # A rewrite is a rename (see _write): a new inode, whatever the clock says.
            seen = (info.st_ino, info.st_mtime_ns, info.st_size)
            if self._seen != seen:
                self._users = read(self.path)
                self._verified.clear()
                self._seen = seen
            return self._users

    def check(self, token: str) -> Credential | None:
        """The credential ``token`` is the token of, or None."""
        name = token.rpartition(".")[0]
        found = self.users().get(name)
        if found is None:
            return None
        key = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            if self._verified.get(key) == found:
                return found
        if not verify(token, found.hashed):
            return None
        with self._lock:
            if len(self._verified) >= CACHED_MOST:
                self._verified.clear()
            self._verified[key] = found
        return found

    def current(self, name: str, fingerprint: str) -> Credential | None:
        """The credential of a session opened as ``name`` with ``fingerprint``, if the file
        still holds it unchanged."""
        found = self.users().get(name)
        return found if found is not None and found.fingerprint == fingerprint else None


def read(path: str) -> dict[str, Credential]:
    """The credentials in file ``path``: ConfigError when it cannot be read, holds a bad
    line, or may be read by others than its owner."""
    file = Path(path)
    try:
        mode = file.stat().st_mode
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the users file {path}: {exc}") from exc
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"the users file {path} may be read by others than its owner: "
                          f"chmod 600 {path}")
    return parse(text, path)


def add(path: str, name: str, role: str, *, replace: bool = False) -> str:
    """Add (or with ``replace``, give a new token to) user ``name`` with ``role`` in file
    ``path`` (made, readable by its owner only, when missing); returns the new token."""
    if not NAME.fullmatch(name):
        raise ConfigError(f"the name {name!r}: use letters, digits and _.@+- (at most 64)")
    try:
        checked = role_of(role)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    users = read(path) if Path(path).exists() else {}
    if name in users and not replace:
        raise ConfigError(f"{name} is already in {path}: add --replace to give it a new "
                          "token (its sessions end)")
    token = f"{name}.{secrets.token_urlsafe(32)}"
    users[name] = Credential(name, checked, hash_token(token))
    _write(path, users)
    return token


def remove(path: str, name: str) -> bool:
    """Remove user ``name`` from file ``path``; whether it was there."""
    users = read(path)
    if users.pop(name, None) is None:
        return False
    _write(path, users)
    return True


def _write(path: str, users: dict[str, Credential]) -> None:
    # A new file beside it, then a rename: a dashboard reading it meanwhile sees the old
    # credentials or the new, never half a file.
    temp = f"{path}.{secrets.token_hex(4)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("# shardq dashboard users: name:role:scrypt hash of the token\n")
        out.writelines(c.line() + "\n" for c in users.values())
    os.replace(temp, path)
