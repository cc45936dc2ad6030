"""Masking passwords in DSNs and in messages that quote them.

A module of its own, below ``config``, ``validate`` and ``db``: each of them needs it,
and ``db`` depends on the other two.
"""

from __future__ import annotations

import re

# A URL's password: after "scheme://user:" up to the last "@" of the same word, so that a
# raw "@" in the password (user:p@ss@host) is masked too.
_URL_PASSWORD = re.compile(r"(\w[\w+.-]*://[^:/@\s]*:)\S*@")
# A key=value password (libpq's password= and sslpassword=, a URL's ?password=), its value
# either quoted ('a b c', with \' inside) or running to the next space or "&".
_KEY_PASSWORD = re.compile(r"(password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s&]*)", re.IGNORECASE)


def redact(dsn: str) -> str:
    """The text (a DSN, or a message quoting one) with every password replaced by ``***``."""
    dsn = _URL_PASSWORD.sub(r"\1***@", dsn)
    return _KEY_PASSWORD.sub(r"\1***", dsn)
