-- Retention of results: delete a bounded batch of expired ones, read from the index
-- results_expiry (CockroachDB deletes with a LIMIT directly).
DELETE FROM shardq.results
WHERE expires_at <= coalesce(%(now)s::timestamptz, now())
LIMIT {limit}
RETURNING id
