-- Put claimed keyed tasks back in line, merged with their follow-up if the key
-- has one waiting.  Each task is deleted and inserted again as available (same
-- id and history) through the waiting-key index: on conflict the follow-up
-- absorbs it, keeping the follow-up's id and payload (the latest enqueued) and
-- taking the returning task's place in line, attempts and history.  Expects a
-- CTE `x`: the deleted rows (t.*) plus next_time, attempts_after, error.
INSERT INTO shardq.tasks AS w
    (id, queue, key, status, exec_time, payload, priority, pending_head_start_s, attempts,
     max_attempts, lease_token, last_error, enqueued_at, first_claimed_at, last_claimed_at,
     times_claimed, times_requeued, last_requeued_at, task_group)
SELECT x.id, x.queue, x.key, 'available', x.next_time, x.payload, x.priority, 0,
       x.attempts_after, x.max_attempts, NULL, x.error, x.enqueued_at, x.first_claimed_at,
       x.last_claimed_at, x.times_claimed, x.times_requeued + 1, x.now, x.task_group
FROM x
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status = 'available'
DO UPDATE SET
    exec_time = EXCLUDED.exec_time,
    attempts = EXCLUDED.attempts,
    last_error = EXCLUDED.last_error,
    enqueued_at = least(w.enqueued_at, EXCLUDED.enqueued_at),
    first_claimed_at = EXCLUDED.first_claimed_at,
    last_claimed_at = EXCLUDED.last_claimed_at,
    times_claimed = EXCLUDED.times_claimed,
    times_requeued = EXCLUDED.times_requeued,
    last_requeued_at = EXCLUDED.last_requeued_at,
    pending_head_start_s = 0
