-- The shardq.groups row that holds a group's rate state, made on the group's first
-- rated claim.
INSERT INTO shardq.groups (queue, name) VALUES (%(queue)s, %(group)s)
ON CONFLICT (queue, name) DO NOTHING
