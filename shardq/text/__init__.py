"""Text for people, shared by the command line and the dashboard: figures
(:mod:`shardq.text.figures`), limits as written and read (:mod:`shardq.text.limits`),
and durable tasks' steps, wait and attempts (:mod:`shardq.text.durable`)."""
