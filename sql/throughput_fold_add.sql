-- Add folded counts to the minute rows (slot -1) of their queues (throughput_fold).
INSERT INTO shardq.throughput AS tp (queue, period, slot, enqueued, completed)
SELECT f.queue, f.minute, -1, f.enqueued, f.completed
FROM unnest(%(queues)s::text[], %(minutes)s::timestamptz[], %(enqueued)s::int8[],
            %(completed)s::int8[]) AS f(queue, minute, enqueued, completed)
ON CONFLICT (queue, period, slot) DO UPDATE SET
    enqueued = tp.enqueued + EXCLUDED.enqueued,
    completed = tp.completed + EXCLUDED.completed
