"""``manage.py tasks_demo``."""
