-- A LISTEN connection's check, after a silence, that its server still answers: a
-- connection to a host that died without closing it would otherwise wait for notes for
-- good.
SELECT 1
