-- A promoted task moves from run_at to run_at - priority seconds.
exec_time = t.exec_time - t.pending_head_start_s * interval '1 second',
    pending_head_start_s = 0
