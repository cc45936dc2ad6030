-- Whether a staged row is new (idempotent writes): the ledger took its own id now.
s.id IN (SELECT f.id FROM fresh AS f)
