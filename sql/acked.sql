-- What an ack writes beside deleting its tasks (the CTE `done`, which returns at least
-- their id, queue, times_claimed, last_claimed_at, worker_id, flow_id, flow_next and
-- durable): it counts them as
-- completed (throughput_add), and a task claimed before this attempt has attempts on
-- record, which this one joins (attempts_add); a task that succeeds at once writes no
-- history.  A node of a flow leaves an event for the flows' resolver (flow_events_add,
-- from `done`'s flow_id and flow_next).  A durable task's checkpoints go with it
-- (steps_drop, from `done`'s durable).  The CTEs of ack_many and ack_results, after
-- their `done`.
n AS (
    SELECT done.queue, 0::int8 AS enqueued, count(*) AS completed FROM done GROUP BY done.queue
), counted AS (
    {throughput_add}
), ended AS (
    SELECT done.id, done.queue, done.times_claimed AS attempt, done.last_claimed_at AS claimed_at,
           done.worker_id, 'acked'::text AS outcome, NULL::text AS error
    FROM done WHERE done.times_claimed > 1
), recorded AS (
    {attempts_add}
), flow_ended AS (
    SELECT done.flow_id, done.id, 'succeeded'::text AS outcome, done.flow_next AS next
    FROM done
), flowed AS (
    {flow_events_add}
), steps_ended AS (
    SELECT done.id FROM done WHERE done.durable
), stepped AS (
    {steps_drop}
)
