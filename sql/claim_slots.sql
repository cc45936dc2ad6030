-- A claim without limits holds no capacity slot (tasks_slots, tasks_group_slots).
slot = NULL, group_slot = NULL
