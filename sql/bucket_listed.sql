-- The bucket a claim of several buckets reads in turn: the current row of its list
-- (claim_buckets' `listed`).
listed.bucket
