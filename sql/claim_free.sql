-- The capacity slots a limited claim may give out, numbered i = 1, 2, …: the queue's
-- free slots (queue_free: free_slots under max_running) beside its group's (group_free:
-- free_slots under max_running_per_group, or group_free_none for ungrouped tasks), as
-- many as both have.
SELECT q.i, q.slot, g.slot AS group_slot
FROM ({queue_free}) AS q JOIN ({group_free}) AS g ON g.i = q.i
