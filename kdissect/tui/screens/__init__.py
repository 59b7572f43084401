"""The pop-up screens of `kdissect tui`: help, prompts, the conversation, statistics."""
