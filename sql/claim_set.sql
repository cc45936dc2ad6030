-- What a claim writes: the lease (exec_time is its expiry while 'locked'), a new
-- lease token (one per claim, made by the client), the attempt and the claim
-- history, the capacity slots it holds (claim_slots), and the worker it is claimed
-- for (NULL for a claim outside a worker that gives no identity).  A parked task that
-- is claimed is woken: it waits for nothing any more (parked, wait_event).  `clock.now` is the
-- statement's now.
status = 'locked',
    exec_time = clock.now + %(lease_s)s::float8 * interval '1 second',
    attempts = t.attempts + 1,
    pending_head_start_s = 0,
    lease_token = %(token)s::uuid,
    first_claimed_at = coalesce(t.first_claimed_at, clock.now),
    last_claimed_at = clock.now,
    times_claimed = t.times_claimed + 1,
    worker_id = %(worker_id)s::uuid,
    parked = NULL,
    wait_event = NULL,
    {claim_slots}
