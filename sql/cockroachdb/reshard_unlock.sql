-- CockroachDB: a reshard takes no lock (reshard_lock), so there is none to give back.
SELECT true
