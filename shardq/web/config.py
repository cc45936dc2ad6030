"""Settings of ``shardq dashboard`` (its CLI flags and SHARDQ_* variables come from here)."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from shardq.core.config import MAX_PORT, check_settings, env_name, setting
from shardq.core.errors import ConfigError

MIN_TOKEN_CHARS = 16
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
        None, "file holding the token that actions need: a bearer token for the JSON API, "
              "entered once on the login page for the web pages (without it, or with "
              "--read-only, no action is served)")
    read_only: bool = setting(False, "serve no actions at all, whoever asks")
    hide_payloads: bool = setting(False, "show payloads' sizes, never their contents "
                                         "(payloads may hold personal data)")
    refresh_ms: int = setting(2000, "how often the pages refresh their figures",
                              low=250, high=3_600_000, tuning=True)
    frame_ancestors: str | None = setting(
        None, "origins allowed to frame the pages, e.g. 'self' https://intranet.example.com; "
              "default none")

    def __post_init__(self) -> None:
        check_settings(self)
        if self.read_only and self.token_file:
            raise ConfigError("--read-only serves no actions: give it or --token-file, "
                              "not both")
        if (self.frame_ancestors is not None
                and not FRAME_SOURCES.fullmatch(self.frame_ancestors)):
            raise ConfigError(
                f"frame_ancestors (--frame-ancestors, {env_name('frame_ancestors')}) takes "
                "sources separated by spaces, e.g. \"'self' https://intranet.example.com\", "
                f"got {self.frame_ancestors!r}")


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
