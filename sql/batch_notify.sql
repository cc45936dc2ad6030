-- A batch's wake-up call for idle workers, as a column of its placement statement:
-- none on engines without LISTEN/NOTIFY (CockroachDB); see postgresql/batch_notify.
NULL
