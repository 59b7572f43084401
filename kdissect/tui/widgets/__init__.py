"""The panes of `kdissect tui` (Textual widgets)."""
