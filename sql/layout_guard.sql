-- A claim composed for an earlier layout takes nothing once a reshard retires that
-- layout: the indexes it would read may be gone, and its claimer re-reads the layout
-- within a second.  Until then (the switch phase, when both layouts' indexes exist)
-- claims of the layout just replaced run beside the new one's.  The probe names no
-- column of the row, so it runs once per statement (an InitPlan on PostgreSQL), like
-- the pause check.
AND EXISTS (SELECT 1 FROM shardq.layout AS current
                  WHERE current.generation = %(generation)s
                     OR (current.phase = 'switch'
                         AND current.generation = %(generation)s::int8 + 1))
