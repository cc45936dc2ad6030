"""Settings of ``shardq dashboard`` (its CLI flags and SHARDQ_* variables come from here)."""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from shardq.core.config import DAY_S, MAX_PORT, check_settings, env_name, setting
from shardq.core.errors import ConfigError
from shardq.web.roles import ROLES

MIN_TOKEN_CHARS = 16
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# frame_ancestors: CSP sources ('self', https://intranet.example.com, *.example.com)
# separated by spaces; no ; or , which would end the directive or the policy.
FRAME_SOURCE = r"(?:'[a-z-]+'|[A-Za-z0-9*][A-Za-z0-9.:/*_~%+-]*)"
FRAME_SOURCES = re.compile(f"{FRAME_SOURCE}(?: +{FRAME_SOURCE})*")


@dataclass(frozen=True)
class DashboardConfig:
    """How ``shardq dashboard`` serves its pages and who may act through it."""

    host: str = setting("127.0.0.1", "address to listen on (127.0.0.1: this machine only)")
    port: int = setting(8080, "port to listen on", low=1, high=MAX_PORT)
    token_file: str | None = setting(
        None, "file holding the one token of an admin: a bearer token for the JSON API, "
              "entered once on the login page for the web pages (without it, --users or "
              "--proxy-user-header, or with --read-only, no action is served)")
    users_file: str | None = setting(
        None, "file of named credentials, each with a role (viewer, operator, admin), made "
              "with `shardq dashboard user add`: every page and call then needs one")
    proxy_user_header: str | None = setting(
        None, "trust an authenticating proxy (single sign-on): the request header that "
              "names the user, e.g. X-Forwarded-User; requests from other addresses than "
              "--trusted-proxies are refused")
    proxy_role_header: str | None = setting(
        None, "with --proxy-user-header: the header naming the user's role, or groups among "
              "which the highest role named counts (e.g. X-Forwarded-Groups)")
    proxy_default_role: str | None = setting(
        None, "with --proxy-user-header: the role of a user whose role header names none "
              "(without it, such a user is refused)")
    trusted_proxies: str = setting(
        "127.0.0.1,::1", "addresses or networks of the proxies whose X-Forwarded-Proto and "
                         "X-Forwarded-For count (comma-separated)")
    read_only: bool = setting(False, "serve no actions at all, whoever asks")
    hide_payloads: bool = setting(False, "show payloads' sizes, never their contents "
                                         "(payloads may hold personal data)")
    session_idle_s: float = setting(1800.0, "a login session unused this long ends",
                                    low=60, high=7 * DAY_S, tuning=True)
    session_max_s: float = setting(12 * 3600.0, "a login session ends this long after the "
                                   "login, used or not", low=60, high=30 * DAY_S, tuning=True)
    login_attempts: int = setting(10, "logins one address may try per --login-window-s",
                                  low=1, high=10_000, tuning=True)
    login_window_s: float = setting(60.0, "the window of --login-attempts", low=1,
                                    high=DAY_S, tuning=True)
    tls_cert_file: str | None = setting(
        None, "serve HTTPS with this certificate (PEM; with --tls-key-file)")
    tls_key_file: str | None = setting(None, "the private key of --tls-cert-file (PEM)")
    refresh_ms: int = setting(2000, "how often the pages refresh their figures",
                              low=250, high=3_600_000, tuning=True)
    frame_ancestors: str | None = setting(
        None, "origins allowed to frame the pages, e.g. 'self' https://intranet.example.com; "
              "default none")
    redact: tuple[str, ...] = setting(
        (), "payload fields masked in every task's payload, at any depth, and in its errors "
            "(beside the redact rules of --app's tasks)")

    def __post_init__(self) -> None:
        check_settings(self)
        # "--redact card,cvc" names two fields, as SHARDQ_REDACT=card,cvc does: taken as
        # one name, neither would be masked.
        names = tuple(n.strip() for f in self.redact for n in f.split(",") if n.strip())
        object.__setattr__(self, "redact", names)
        sources = [flag for flag, value in (("--token-file", self.token_file),
                                            ("--users-file", self.users_file),
                                            ("--proxy-user-header", self.proxy_user_header))
                   if value]
        if len(sources) > 1:
            raise ConfigError(f"give one of {', '.join(sources)}: each says who may use the "
                              "dashboard")
        if self.read_only and sources:
            raise ConfigError(f"--read-only serves no actions: give it or {sources[0]}, "
                              "not both")
        for flag, value in (("--proxy-role-header", self.proxy_role_header),
                            ("--proxy-default-role", self.proxy_default_role)):
            if value and not self.proxy_user_header:
                raise ConfigError(f"{flag} needs --proxy-user-header")
        if self.proxy_default_role and self.proxy_default_role not in ROLES:
            raise ConfigError(f"--proxy-default-role {self.proxy_default_role!r}: the roles "
                              "are " + ", ".join(ROLES))
        if self.proxy_user_header and not (self.proxy_role_header or self.proxy_default_role):
            raise ConfigError("--proxy-user-header needs --proxy-role-header or "
                              "--proxy-default-role: say which role the proxy's users get")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ConfigError("give --tls-cert-file and --tls-key-file together")
        if (self.frame_ancestors is not None
                and not FRAME_SOURCES.fullmatch(self.frame_ancestors)):
            raise ConfigError(
                f"frame_ancestors (--frame-ancestors, {env_name('frame_ancestors')}) takes "
                "sources separated by spaces, e.g. \"'self' https://intranet.example.com\", "
                f"got {self.frame_ancestors!r}")
        self.proxies()  # a bad address is refused at start, in one line

    def proxies(self) -> list[Network]:
        """The trusted proxies' networks."""
        found = []
        for part in self.trusted_proxies.split(","):
            if part.strip():
                try:
                    found.append(ipaddress.ip_network(part.strip(), strict=False))
                except ValueError:
                    raise ConfigError(f"--trusted-proxies: {part.strip()!r} is not an "
                                      "address or a network (10.0.0.5, 10.0.0.0/24)") from None
        return found


def read_token(path: str) -> str:
    """The token in file ``path`` (surrounding whitespace dropped); raises ConfigError when
    the file cannot be read, the token is shorter than 16 characters, or others than its
    owner may read it."""
    file = Path(path)
    try:
        mode = file.stat().st_mode
        token = file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc}") from exc
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"the token in {path} has {len(token)} characters; use at least "
                          f"{MIN_TOKEN_CHARS} (for example: python -c 'import secrets; "
                          f"print(secrets.token_urlsafe(32))' > {path})")
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"the token file {path} may be read by others than its owner: "
                          f"chmod 600 {path}")
    return token
