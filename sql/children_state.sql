-- What became of a durable task's children (ctx.wait), in the order asked, read in one
-- snapshot with the count of their events folded in so far (their flow's `folded`,
-- which the task compares as it parks: park_many): each child's status while it is
-- in shardq.tasks (dead with its error), else its result, kept until the flow ends.
SELECT u.id, t.status, t.last_error, r.value::text, r.error, r.id IS NOT NULL AS kept,
       (SELECT f.folded FROM shardq.flows AS f WHERE f.id = %(parent)s::uuid) AS folded
FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS u(id, n)
LEFT JOIN shardq.tasks AS t ON t.id = u.id
LEFT JOIN shardq.results AS r ON r.id = u.id
ORDER BY u.n
