-- A sample's rows `s` (status, exec_time, parked) counted by state, due or not against
-- `c.now`: the states of shardq.queuestats (shardq.ops.samples.SAMPLED), shared by both
-- engines' samples.  A task not yet due is scheduled, or parked on one of three reasons.
count(*) FILTER (WHERE s.status = 'available' AND s.exec_time <= c.now) AS available,
           count(*) FILTER (WHERE s.status = 'available' AND s.exec_time > c.now
                              AND s.parked IS NULL) AS scheduled,
           count(*) FILTER (WHERE s.status = 'locked') AS locked,
           count(*) FILTER (WHERE s.status = 'dead') AS dead,
           count(*) FILTER (WHERE s.status = 'available' AND s.exec_time > c.now
                              AND s.parked = 'sleep') AS parked_sleep,
           count(*) FILTER (WHERE s.status = 'available' AND s.exec_time > c.now
                              AND s.parked = 'event') AS parked_event,
           count(*) FILTER (WHERE s.status = 'available' AND s.exec_time > c.now
                              AND s.parked = 'children') AS parked_children
