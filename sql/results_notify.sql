-- The wake-up call of clients waiting for results, as a column of ack_results: none on
-- engines without LISTEN/NOTIFY (CockroachDB), whose clients poll instead; see
-- postgresql/results_notify.
NULL
