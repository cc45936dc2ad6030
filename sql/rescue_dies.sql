-- Whether an expired task is dead rather than put back: a suspect (its lease had expired
-- before) whose lease expired again on its last attempt.
({suspect} AND attempts >= max_attempts)
