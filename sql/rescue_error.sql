-- The last error a rescued task is left with; its prefix marks the task suspect.
'lease expired: the worker holding it died, stalled or overran its lease; it runs alone next time'::text
