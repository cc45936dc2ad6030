-- A task whose lease expires for the first time gets its attempt back: it may never
-- have reached a handler (it waited in the buffer of a worker that died, or its claim's
-- reply was lost), and it comes back suspect, so that the next worker runs it alone.
-- A suspect whose lease expires again is the likely culprit: that attempt counts, and
-- on its last attempt it is dead.
status = CASE WHEN {rescue_dies} THEN 'dead' ELSE 'available' END,
    exec_time = CASE WHEN {rescue_dies} THEN clock.now ELSE clock.now + {backoff} END,
    attempts = CASE WHEN {suspect} THEN t.attempts ELSE t.attempts - 1 END,
    lease_token = NULL,
    last_error = {rescue_error},
    -- A death is not a requeue: it keeps the last time the task went back in line.
    times_requeued = t.times_requeued + CASE WHEN {rescue_dies} THEN 0 ELSE 1 END,
    last_requeued_at = CASE WHEN {rescue_dies} THEN t.last_requeued_at ELSE clock.now END
