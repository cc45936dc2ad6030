-- The embedded server: create the database shardq uses (its name is quoted as an identifier).
CREATE DATABASE {database}
