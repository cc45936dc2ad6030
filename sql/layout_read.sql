-- The layout claims use now (one row): its bucket count, whether the bucket is an
-- expression of the id (after a reshard on PostgreSQL) or the table's column, and the
-- generation that each switch of a reshard increases.
SELECT bucket_count, expression, generation
FROM shardq.layout
