-- shardq doctor: PostgreSQL's version as a number (for the supported minimum) and as text.
SELECT current_setting('server_version_num')::int AS number,
       current_setting('server_version') AS version
