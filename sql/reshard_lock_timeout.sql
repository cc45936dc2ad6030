-- The catalog changes that need an ACCESS EXCLUSIVE lock wait for it at most this long
-- (and are tried again later): every statement on the table would queue behind the
-- waiting request.
SET LOCAL lock_timeout = '200ms'
