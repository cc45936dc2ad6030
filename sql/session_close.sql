-- End one session (logout, or a session whose credential is gone); returns its actor.
DELETE FROM shardq.sessions WHERE id = %(id)s RETURNING actor
