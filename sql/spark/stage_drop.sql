-- Drop a staging table once merged (or when the write failed).
DROP TABLE IF EXISTS {stage}
