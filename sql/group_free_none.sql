-- An ungrouped claim holds no group slot: `limit` NULL slots.
SELECT i, NULL::int4 AS slot FROM generate_series(1, {limit}) AS i
