"""CLI commands beyond read and export, each in its own module."""
