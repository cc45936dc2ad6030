"""The project's app: its tasks, and a command that enqueues and reads them."""
