-- shardq migrate --grants ROLE --spark: Spark's staged writes make their staging table
-- in the schema shardq (and drop it once merged).
GRANT CREATE ON SCHEMA shardq TO {role}
