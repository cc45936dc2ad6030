-- Tasks of one bucket whose lease expired (the partial index tasks_leases holds the
-- locked ones).  Keyed tasks that go back in line are left to janitor_rescue_keyed,
-- which merges them with their follow-up.
{bucket} = %(bucket)s
      AND status = 'locked'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
      AND (key IS NULL OR {rescue_dies})
