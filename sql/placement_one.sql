-- The placement shared by a batch enqueued with the same options.
SELECT p.exec_time, p.pending_head_start_s, p.now
FROM ({source}) AS src CROSS JOIN LATERAL ({placement}) AS p
