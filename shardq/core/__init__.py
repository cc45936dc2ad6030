"""The statement core: settings, errors, validation, the SQL files and the statements
composed from them, operations as plans, and the runners that send them (blocking and
asyncio), with their retry, deadline and error boundary."""
