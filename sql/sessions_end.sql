-- End every session of one actor (sessions_actor): a removed credential's.
DELETE FROM shardq.sessions WHERE actor = %(actor)s RETURNING id
