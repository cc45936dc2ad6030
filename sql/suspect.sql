-- Whether a task is suspect: its last lease expired without a result (the janitor's
-- mark, rescue_set).  Unqualified, so that it reads the row the statement is on.
(last_error IS NOT NULL AND last_error LIKE 'lease expired:%%')
