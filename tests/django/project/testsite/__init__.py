"""The project's settings package."""
