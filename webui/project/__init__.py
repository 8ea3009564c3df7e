"""The Project tab: the voice project picker and its steps."""
