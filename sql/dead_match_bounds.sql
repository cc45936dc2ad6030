-- The time-of-death range a redrive chooses from, as two times: a dead task died in
-- (after, before].  Read first, so that dead_match compares exec_time with values the
-- planner knows (now() - interval is not folded into a constant, and a range it cannot
-- estimate is read with a bitmap scan and a sort instead of in index order).
SELECT coalesce(%(now)s::timestamptz, now()) - %(older_than_s)s::float8 * interval '1 second',
       coalesce(%(now)s::timestamptz, now()) - %(newer_than_s)s::float8 * interval '1 second'
