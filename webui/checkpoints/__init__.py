"""The Checkpoints tab: list, score, verify, inspect, repair, export."""
