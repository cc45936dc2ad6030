-- Park durable tasks (shardq.worker.durable): each gives back its claim without
-- penalty (the attempt the claim counted is taken back, and the attempt is recorded
-- as parked, with what it waits for) and stands in line at its wake-up time (a
-- sleep's end, a wait's deadline, the year 9999 without one: shardq.ops.durable.NEVER): 'available' beyond every
-- claim's range until then, so it holds no slot, lease or connection meanwhile.
-- Fenced by each lease token, which stays on the row (see nack_many).
-- A wake-up is never missed:
-- - a task waiting for an event writes the event's row if it is not there (`heard`):
--   the row's lock orders this statement and an emit of the event (event_emit, then
--   event_wake, in one transaction), and the row returned is the latest, so either
--   the emit came first and the task is due now, or the emit waits for this commit
--   and its event_wake finds the task parked;
-- - a task waiting for its children locks its children's flow (`folded`), which the
--   flows' resolver holds while it folds their events in and wakes their parent: when
--   the events folded since the task looked at its children (`seen`) changed, it is due
--   now; otherwise the resolver's next fold of them finds it parked (parents_wake).
-- A task due now is claimed again at once, and finds what it waits for.
WITH p AS (
    SELECT *
    FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[], %(untils)s::timestamptz[],
                %(reasons)s::text[], %(events)s::text[], %(seen)s::int8[], %(notes)s::text[])
         AS p(id, lease_token, until, reason, event, seen, note)
), heard AS (
    INSERT INTO shardq.events AS e (name, expires_at)
    SELECT p.event, max(p.until) + %(event_keep_s)s::float8 * interval '1 second'
    FROM p WHERE p.event IS NOT NULL
    GROUP BY p.event
    ORDER BY p.event
    ON CONFLICT (name) DO UPDATE SET expires_at = greatest(e.expires_at, EXCLUDED.expires_at)
    RETURNING e.name, e.emitted_at
), folded AS (
    SELECT f.id, f.folded FROM shardq.flows AS f
    WHERE f.id = ANY(ARRAY(SELECT p.id FROM p WHERE p.reason = 'children'))
    ORDER BY f.id
    FOR UPDATE
), parked AS (
    UPDATE shardq.tasks AS t SET
        status = 'available',
        exec_time = CASE
            WHEN a.reason = 'event' AND h.emitted_at IS NOT NULL THEN c.now
            WHEN a.reason = 'children' AND f.folded IS DISTINCT FROM a.seen THEN c.now
            ELSE greatest(a.until, c.now) END,
        attempts = t.attempts - 1,
        parked = a.reason,
        wait_event = a.event
    FROM p AS a
    LEFT JOIN heard AS h ON h.name = a.event
    LEFT JOIN folded AS f ON f.id = a.id
    CROSS JOIN (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    {locate}
    RETURNING t.id, t.exec_time, t.queue, t.times_claimed, t.last_claimed_at, t.worker_id,
              t.exec_time <= c.now AS due
), ended AS (
    SELECT k.id, k.queue, k.times_claimed AS attempt, k.last_claimed_at AS claimed_at,
           k.worker_id, 'parked'::text AS outcome, a.note AS error
    FROM parked AS k JOIN p AS a ON a.id = k.id
), recorded AS (
    {attempts_add}
)
SELECT parked.id, parked.due FROM parked
