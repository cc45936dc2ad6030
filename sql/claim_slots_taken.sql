-- The capacity slots a limited claim gave each task (claim_free).
slot = f.slot, group_slot = f.group_slot
