"""shardq's test suite (a package, so that its modules have one name each: tests.helpers)."""
