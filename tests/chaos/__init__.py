"""The chaos suite: real daemons, a real PostgreSQL, and faults between them (see scenarios)."""
