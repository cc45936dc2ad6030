-- Insert keyed tasks (or any batch given as rows) with coalescing; see insert_rows.
WITH ins AS (
    {insert}
)
SELECT ins.id, ins.key FROM ins
