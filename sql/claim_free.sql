-- The capacity slots a limited claim may give out, numbered i = 1, 2, …: the queue's
-- free slots (queue_free) beside its group's (group_free), as many as both have.
SELECT q.i, q.slot, g.slot AS group_slot
FROM ({queue_free}) AS q JOIN ({group_free}) AS g ON g.i = q.i
