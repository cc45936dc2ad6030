-- Record one action in the audit trail: an action's row is written in the action's own
-- transaction (it commits or rolls back with it); a refused action's or a failed
-- login's in one of its own.  "now" is the clock's (the server's by default).
INSERT INTO shardq.audit
    (at, actor, role, via, action, queue, task_id, params, outcome, detail, address)
VALUES (coalesce(%(now)s::timestamptz, now()), %(actor)s, %(role)s, %(via)s, %(action)s,
        %(queue)s, %(task_id)s, %(params)s, %(outcome)s, %(detail)s, %(address)s)
