-- Lock one flow's row (waiting for a resolver that folds its events), for a cancel.
SELECT f.id, f.finished_at FROM shardq.flows AS f WHERE f.id = %(id)s::uuid FOR UPDATE
