"""A queue-name check on bytes (PostgreSQL 14+).

Revision ID: 0015
Revises: 0014

The rule stays as revisions 0002 and 0009 wrote it: 1-128 of the ASCII letters,
digits and ``_ . : -``, starting with a letter or digit.  Revision 0009 checked the
characters with ``translate``, which compares every character of the name with every
character of the allowed set through the multibyte code path: about 1.7 µs per row
for a 13-character name, the largest single cost of a COPY of new tasks after the
index inserts.  This revision strips the allowed bytes from the name's UTF-8 bytes
with ``ltrim(bytea, bytea)`` (PostgreSQL 14+) and wants nothing left: a byte of a
non-ASCII character is never in the set, so the rule is the same, at about 0.25 µs.
The length is counted in bytes, which for an all-ASCII name is its characters.

As in 0009, one statement drops and adds the constraint, which checks the table's
rows once under a brief exclusive lock.  CockroachDB keeps its regular expression.
"""

from alembic import context, op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

ALLOWED = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-"
BYTEWISE = (
    "octet_length(queue) BETWEEN 1 AND 128 AND left(queue, 1) NOT IN ('_', '.', ':', '-') "
    f"AND ltrim(textsend(queue), '\\x{ALLOWED.hex()}'::bytea) = ''::bytea"
)
# Revision 0009's check, which the downgrade restores.
TRANSLATE = (
    "queue <> '' AND length(queue) <= 128 AND left(queue, 1) NOT IN ('_', '.', ':', '-') AND "
    "translate(queue, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-', "
    "'') = ''"
)


def _replace(check: str) -> None:
    # One statement, so the name stays and a re-run (the version row lost after the
    # change committed) does the same again.
    if op.get_context().dialect.name != "cockroachdb":
        op.execute("ALTER TABLE shardq.tasks DROP CONSTRAINT IF EXISTS tasks_queue_check, "
                   "ADD CONSTRAINT tasks_queue_check CHECK (" + check + ")")


def upgrade() -> None:
    # A live server is asked first (``--sql`` renders the statement without a server).
    if op.get_context().dialect.name != "cockroachdb" and not context.is_offline_mode():
        version = int(str(op.get_bind().exec_driver_sql("SHOW server_version_num").scalar()))
        if version < 140000:
            raise RuntimeError(f"shardq needs PostgreSQL 14 or newer (this server is "
                               f"{version // 10000}): revision 0015's queue-name "
                               "check uses ltrim(bytea, bytea)")
    _replace(BYTEWISE)


def downgrade() -> None:
    _replace(TRANSLATE)
