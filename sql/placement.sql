-- Where a new task stands in line, for each row of a source `src` with columns
-- run_at (timestamptz), delay_s (float8) and priority (int); use it as
-- a LATERAL subquery joined to that source.
-- due is its not-before time: run_at, else now + delay_s, else now.
-- A task that is due now (or was due in the past) stands at due - priority
-- seconds: a head start over tasks enqueued up to `priority` seconds earlier.
-- A task due in the future stands at exactly due, outside every claim range,
-- and keeps a positive priority as pending_head_start_s for the janitor to
-- apply once due: it never runs before run_at.  A negative priority only
-- moves a task back, so it is applied at once.
SELECT
    CASE WHEN d.due > d.now AND src.priority > 0
         THEN d.due
         ELSE d.due - src.priority * interval '1 second' END AS exec_time,
    CASE WHEN d.due > d.now AND src.priority > 0
         THEN src.priority ELSE 0 END AS pending_head_start_s,
    d.now AS now
FROM (
    SELECT c.now,
           coalesce(src.run_at, c.now + coalesce(src.delay_s, 0) * interval '1 second') AS due
    FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
) AS d
