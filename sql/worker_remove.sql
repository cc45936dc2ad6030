-- A worker that stops cleanly deletes its row (the attempts it ran keep their copy
-- of its name, host and pid).
DELETE FROM shardq.workers WHERE id = %(id)s::uuid
