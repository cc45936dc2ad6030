-- Enqueue one task (CockroachDB has no NOTIFY: its workers poll).
{insert_one}
