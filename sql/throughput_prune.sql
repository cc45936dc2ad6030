-- Forget throughput counts older than keep_s (rates read only the last minute);
-- returns how many rows went.
WITH gone AS (
    DELETE FROM shardq.throughput
    WHERE period < coalesce(%(now)s::timestamptz, now()) - %(keep_s)s::float8 * interval '1 second'
    RETURNING 1
)
SELECT count(*) FROM gone
