-- Find each claimed task `a` by its id (the unique index tasks_ids), locked under its
-- lease token: the lease may have moved the row within the primary key, the id and
-- token name it wherever it is.  The probe is a LATERAL subquery with LIMIT, which
-- the planner neither flattens into a join nor pushes conditions into: so it reads
-- tasks_ids, never a partial index that statistics taken when few tasks were
-- claimed make look small (as a join, that read every locked row for each batch).
-- A row changed by someone else since has a new ctid, so the update passes it over.
CROSS JOIN LATERAL (
    SELECT r.ctid, r.status, r.lease_token
    FROM shardq.tasks AS r
    WHERE r.id = a.id
    LIMIT 1
) AS located
WHERE t.ctid = located.ctid
  AND located.status = 'locked'
  AND located.lease_token = a.lease_token
  AND t.lease_token = a.lease_token
