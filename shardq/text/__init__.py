"""Text for people, shared by the command line and the dashboard: figures
(:mod:`shardq.text.figures`) and limits as written and read (:mod:`shardq.text.limits`)."""
