-- Released nodes' wake-up call for idle workers: none on engines without LISTEN/NOTIFY
-- (CockroachDB); see postgresql/flow_notify.
NULL
