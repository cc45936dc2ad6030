-- A sample's rows `s` (status, exec_time) counted by state, due or not against `c.now`:
-- the states of shardq.queuestats, shared by both engines' samples.
count(*) FILTER (WHERE s.status = 'available' AND s.exec_time <= c.now) AS available,
           count(*) FILTER (WHERE s.status = 'available' AND s.exec_time > c.now) AS scheduled,
           count(*) FILTER (WHERE s.status = 'locked') AS locked,
           count(*) FILTER (WHERE s.status = 'dead') AS dead
